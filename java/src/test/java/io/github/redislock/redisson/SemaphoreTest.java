package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFuture;
import org.redisson.api.RSemaphore;

/** RSemaphore's contract, as Redisson's RedissonSemaphoreTest checks it, on the module. */
class SemaphoreTest extends ServerTest {

    @Test
    void setAcquireReleaseDrainAdd() throws InterruptedException {
        RSemaphore s = locks.getSemaphore("sem");
        assertTrue(s.trySetPermits(3));
        assertFalse(s.trySetPermits(5));
        assertEquals(3, s.availablePermits());
        s.acquire(2);
        assertEquals(1, s.availablePermits());
        assertFalse(s.tryAcquire(2));
        assertTrue(s.tryAcquire());
        assertTrue(s.tryAcquire(0));
        s.release(3);
        assertEquals(3, s.availablePermits());
        s.addPermits(-1);
        assertEquals(2, s.availablePermits());
        s.addPermits(4);
        assertEquals(6, s.drainPermits());
        assertEquals(0, s.availablePermits());
    }

    @Test
    void tryAcquireWaitsAndTimesOut() throws InterruptedException {
        RSemaphore s = locks.getSemaphore("sem");
        s.trySetPermits(0);
        long start = System.nanoTime();
        assertFalse(s.tryAcquire(1, Duration.ofMillis(400)));
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(waited >= 380 && waited < 1200, "waited " + waited);
    }

    @Test
    @Smoke
    void aBlockedAcquireIsServedByARelease() throws Exception {
        RSemaphore s = locks.getSemaphore("sem");
        s.trySetPermits(0);
        Future<Long> waiter = pool(1).submit(() -> {
            locks.getSemaphore("sem").acquire(2);
            return System.nanoTime();
        });
        Thread.sleep(200);
        s.release();
        Thread.sleep(100);
        assertFalse(waiter.isDone());
        long released = System.nanoTime();
        s.release();
        assertTrue(TimeUnit.NANOSECONDS.toMillis(waiter.get(2, TimeUnit.SECONDS) - released) < 100);
        assertEquals(0, s.availablePermits());
    }

    @Test
    void aLargeRequestIsServedBeforeSmallerOnesBehindIt() throws Exception {
        // Fair: FIFO, and the head is not starved by smaller requests (Redisson's is not, #2325).
        RSemaphore s = locks.getSemaphore("sem");
        s.trySetPermits(0);
        List<Integer> order = new java.util.concurrent.CopyOnWriteArrayList<>();
        ExecutorService pool = pool(3);
        pool.submit(() -> {
            locks.getSemaphore("sem").acquire(3);
            order.add(3);
            return null;
        });
        waitForSemaphoreWaiters(1);
        for (int i = 0; i < 2; i++) {
            pool.submit(() -> {
                locks.getSemaphore("sem").acquire(1);
                order.add(1);
                return null;
            });
        }
        waitForSemaphoreWaiters(3);
        s.release(1);
        s.release(1);
        Thread.sleep(200);
        assertTrue(order.isEmpty(), "nobody overtakes the head: " + order);
        s.release(1); // three free: the head is served, and nothing is left for the others
        awaitSize(order, 1);
        Thread.sleep(200);
        assertEquals(List.of(3), order);
        s.release(2);
        awaitSize(order, 3);
        assertEquals(List.of(3, 1, 1), order);
    }

    @Test
    @Smoke
    void anInterruptedOrCancelledAcquireLeavesThePermits() throws Exception {
        RSemaphore s = locks.getSemaphore("sem");
        s.trySetPermits(0);
        Thread waiter = new Thread(() -> {
            try {
                locks.getSemaphore("sem").acquire(1);
            } catch (InterruptedException e) {
                // expected
            }
        });
        waiter.start();
        waitForSemaphoreWaiters(1);
        waiter.interrupt();
        waiter.join(5000);
        // The interrupt cancelled the wait on the server (LOCK.CANCEL) before it was reported.
        assertEquals(0, KeptPlaceTest.field("LOCK.SEMINFO", "sem", "waiters", "waited_ms").size());
        RFuture<Void> cancelled = locks.getSemaphore("sem").acquireAsync(1);
        waitForSemaphoreWaiters(1);
        cancelled.cancel(false);
        s.release(2); // served to nobody, or to the cancelled wait, which gives them back
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (s.availablePermits() != 2 && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(2, s.availablePermits());
    }

    @Test
    void manyClientsNeverHoldMoreThanThePermits() throws Exception {
        RSemaphore s = locks.getSemaphore("sem");
        s.trySetPermits(2);
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        ExecutorService pool = pool(12);
        List<Future<?>> done = new ArrayList<>();
        for (int c = 0; c < 3; c++) {
            ModuleLocks mine = ModuleLocks.wrap(client());
            for (int t = 0; t < 4; t++) {
                done.add(pool.submit(() -> {
                    RSemaphore sem = mine.getSemaphore("sem");
                    for (int i = 0; i < 20; i++) {
                        sem.acquire();
                        most.accumulateAndGet(inside.incrementAndGet(), Math::max);
                        inside.decrementAndGet();
                        sem.release();
                    }
                    return null;
                }));
            }
        }
        for (Future<?> f : done) {
            f.get(60, TimeUnit.SECONDS);
        }
        assertTrue(most.get() <= 2, "at most 2 inside: " + most.get());
        assertEquals(2, s.availablePermits());
    }

    private static void awaitSize(List<Integer> list, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
        while (list.size() < n && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
    }

    @SuppressWarnings("unchecked")
    static void waitForSemaphoreWaiters(int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < deadline) {
            List<Object> info = (List<Object>) server.call("LOCK.SEMINFO", "sem");
            for (int i = 0; i < info.size(); i += 2) {
                if ("waiters".equals(info.get(i)) && ((List<Object>) info.get(i + 1)).size() >= n) {
                    return;
                }
            }
            Thread.sleep(5);
        }
        throw new AssertionError("no " + n + " waiters: " + server.call("LOCK.SEMINFO", "sem"));
    }
}
