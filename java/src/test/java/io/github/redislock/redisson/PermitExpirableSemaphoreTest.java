package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.Test;
import org.redisson.api.RPermitExpirableSemaphore;

/**
 * RPermitExpirableSemaphore's contract, as Redisson's RedissonPermitExpirableSemaphoreTest
 * checks it, on the module (leases on the server's clock).
 */
class PermitExpirableSemaphoreTest extends ServerTest {

    @Test
    @Smoke
    void acquireReleaseAndIds() throws InterruptedException {
        RPermitExpirableSemaphore s = locks.getPermitExpirableSemaphore("permits");
        assertTrue(s.trySetPermits(2));
        String id = s.acquire();
        assertTrue(id.matches("[0-9a-f]{32}"), id);
        List<String> more = s.tryAcquire(1);
        assertEquals(1, more.size());
        assertTrue(s.tryAcquire(1).isEmpty());
        assertNull(s.tryAcquire());
        assertEquals(0, s.availablePermits());
        assertEquals(2, s.acquiredPermits());
        s.release(id);
        assertTrue(s.tryRelease(more.get(0)));
        assertFalse(s.tryRelease(more.get(0)));
        assertThrows(Exception.class, () -> s.release(id));
        assertEquals(2, s.availablePermits());
        List<String> two = s.acquire(2);
        assertEquals(2, s.tryRelease(two));
    }

    @Test
    void aLeaseEndsAndTheWaiterGetsThePermitAtItsDeadline() throws Exception {
        RPermitExpirableSemaphore s = locks.getPermitExpirableSemaphore("permits");
        s.trySetPermits(1);
        String id = s.acquire(500, TimeUnit.MILLISECONDS);
        long start = System.nanoTime();
        Future<Long> waiter = pool(1).submit(() -> {
            String mine = locks.getPermitExpirableSemaphore("permits").tryAcquire(5, 5, TimeUnit.SECONDS);
            return mine == null ? -1L : System.nanoTime();
        });
        long waited = TimeUnit.NANOSECONDS.toMillis(waiter.get(5, TimeUnit.SECONDS) - start);
        assertTrue(waited >= 450 && waited < 800, "waited " + waited);
        assertFalse(s.tryRelease(id), "the expired permit is no longer held");
    }

    @Test
    void updateLeaseTimeKeepsAPermit() throws InterruptedException {
        RPermitExpirableSemaphore s = locks.getPermitExpirableSemaphore("permits");
        s.trySetPermits(1);
        String id = s.acquire(400, TimeUnit.MILLISECONDS);
        assertTrue(s.updateLeaseTime(id, 3, TimeUnit.SECONDS));
        Thread.sleep(700);
        assertEquals(0, s.availablePermits());
        long lease = s.getLeaseTime(id);
        assertTrue(lease > 1500 && lease <= 3000, "lease " + lease);
        s.release(id);
        assertFalse(s.updateLeaseTime(id, 1, TimeUnit.SECONDS));
    }

    @Test
    void tryAcquireWaitsAndTimesOut() throws InterruptedException {
        RPermitExpirableSemaphore s = locks.getPermitExpirableSemaphore("permits");
        s.trySetPermits(1);
        s.acquire();
        long start = System.nanoTime();
        assertNull(s.tryAcquire(300, TimeUnit.MILLISECONDS));
        assertTrue(s.tryAcquire(2, 300, -1, TimeUnit.MILLISECONDS).isEmpty());
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(waited >= 580 && waited < 2000, "waited " + waited);
    }

    @Test
    @Smoke
    void aCancelledAcquireGivesItsPermitBack() throws Exception {
        RPermitExpirableSemaphore s = locks.getPermitExpirableSemaphore("permits");
        s.trySetPermits(1);
        String held = s.acquire();
        s.acquireAsync().cancel(false);
        Thread.sleep(100);
        s.release(held); // served to the abandoned wait, which gives it back
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (s.availablePermits() != 1 && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(1, s.availablePermits());
        assertEquals(0L, server.call("ZCARD", "{permits}:timeout"));
    }
}
