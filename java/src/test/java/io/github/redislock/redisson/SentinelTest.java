package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import io.github.redislock.redisson.support.Resp;
import io.github.redislock.redisson.support.Sentinels;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.redisson.command.NoSyncedSlavesException;

/**
 * Sentinel mode (a master, a replica, a sentinel): every kind works through Redisson's
 * Sentinel client, and Redisson's synced lock writes ({@code checkLockSyncedSlaves}) go out as
 * the module's {@code SYNC}: a grant is answered once the replica has it, and undone (Redisson's
 * {@code NoSyncedSlavesException}) when it cannot have it.
 */
@Tag("topology")
class SentinelTest {

    private static Sentinels sentinels;
    private static RedissonClient redisson;
    private static ModuleLocks locks;

    @BeforeAll
    static void start() {
        sentinels = Sentinels.start();
        redisson = sentinels.client(1000, 3);
        locks = ModuleLocks.wrap(redisson);
    }

    @AfterAll
    static void stop() {
        if (redisson != null) {
            redisson.shutdown();
        }
        sentinels.close();
    }

    @Test
    void lockGrantsWaitForTheReplica() {
        long before = synced();
        RLock lock = locks.getLock("synced");
        lock.lock();
        assertEquals(before + 1, synced(), "the grant was answered once the replica acknowledged it (SYNC)");
        assertTrue(lock.isLocked());
        lock.unlock();
    }

    @Test
    void aGrantTheReplicaCannotHaveIsUndone() {
        RedissonClient quick = sentinels.client(200, 1);
        try {
            RLock lock = ModuleLocks.wrap(quick).getLock("unsynced");
            lock.lock(); // Redisson's entry learns of the replica
            lock.unlock();
            sentinels.replica.signal("STOP");
            try {
                // As with Redisson's own locks: its sync API wraps NoSyncedSlavesException.
                RedisException e = assertThrows(RedisException.class, () -> lock.tryLock(0, 10, TimeUnit.SECONDS));
                assertTrue(e.getCause() instanceof NoSyncedSlavesException, String.valueOf(e.getCause()));
            } finally {
                sentinels.replica.signal("CONT");
            }
            assertFalse(lock.isLocked(), "the module undid the grant");
        } finally {
            quick.shutdown();
        }
    }

    @Test
    void everyKindWorksThroughSentinel() throws Exception {
        RReadWriteLock rw = locks.getReadWriteLock("s:rw");
        rw.writeLock().lock();
        rw.readLock().lock();
        rw.writeLock().unlock();
        rw.readLock().unlock();
        RSemaphore sem = locks.getSemaphore("s:sem");
        assertTrue(sem.trySetPermits(1));
        assertTrue(sem.tryAcquire(1, Duration.ofSeconds(1)));
        assertFalse(sem.tryAcquire(1, Duration.ofMillis(50)));
        sem.release();
        assertTrue(locks.getFencedLock("s:fenced").lockAndGetToken() > 0);
        String id = locks.getPermitExpirableSemaphore("s:permits").tryAcquire();
        assertEquals(null, id);
        locks.getCountDownLatch("s:latch").trySetCount(1);
        locks.getCountDownLatch("s:latch").countDown();
        assertTrue(locks.getCountDownLatch("s:latch").await(1, TimeUnit.SECONDS));
    }

    private static long synced() {
        try (Resp r = sentinels.master.connect()) {
            return Long.parseLong(r.info("lock", "lock_grants_synced"));
        }
    }
}
