package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.Callable;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;

/**
 * Unmodified Redisson objects ({@code redisson.getLock(name)} and the rest, with Redisson's
 * own scripts, pub/sub and watchdog) and this library's objects on the same names, both ways,
 * for every kind; names with and without a hash tag.
 *
 * <p>"Woken" means: from the moment the release is sent to the moment the waiter's acquire
 * returns, under 100 ms. A Redisson waiter wakes only through Redisson's real pub/sub
 * message; a library waiter is handed the object by the module when Redisson's script frees it.
 * A prompt wake takes 3-36 ms; the JVM's first one also compiles the paths it runs (up to
 * 182 ms measured on a loaded 2-core machine), so one unmeasured wake each way warms them first.
 */
class MixedFleetTest extends ServerTest {

    private static final long PROMPT_MS = 100;

    /** An unmodified Redisson client: its objects are Redisson's own. */
    private RedissonClient plain;

    /** Whether this JVM has woken a waiter each way yet (see the class comment). */
    private static boolean warmedUp;

    @BeforeEach
    void plainClient() throws Exception {
        plain = client();
        if (!warmedUp) {
            warmedUp = true;
            RLock ours = locks.getLock("mixed:warm-up");
            ours.lock();
            wake(() -> {
                RLock theirs = plain.getLock("mixed:warm-up");
                boolean got = theirs.tryLock(10, 10, TimeUnit.SECONDS);
                theirs.unlock();
                return got;
            }, ours::unlock);
            RLock theirs = plain.getLock("mixed:warm-up");
            theirs.lock();
            wake(() -> {
                RLock mine = locks.getLock("mixed:warm-up");
                boolean got = mine.tryLock(10, 10, TimeUnit.SECONDS);
                mine.unlock();
                return got;
            }, theirs::unlock);
        }
    }

    // ---- RLock

    @ParameterizedTest
    @ValueSource(strings = {"mixed:lock", "{mixed}:lock"})
    void locksExcludeEachOtherBothWays(String name) throws Exception {
        RLock ours = locks.getLock(name);
        ours.lock();
        assertFalse(other(() -> plain.getLock(name).tryLock()));
        ours.unlock();
        RLock theirs = plain.getLock(name);
        theirs.lock();
        assertFalse(other(() -> locks.getLock(name).tryLock()));
        theirs.unlock();
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed:lock", "{mixed}:lock"})
    @Smoke
    void aRedissonWaiterIsWokenByAModuleRelease(String name) throws Exception {
        RLock ours = locks.getLock(name);
        ours.lock();
        long woken = wake(() -> {
            RLock theirs = plain.getLock(name);
            boolean got = theirs.tryLock(10, 10, TimeUnit.SECONDS);
            theirs.unlock();
            return got;
        }, ours::unlock);
        assertTrue(woken < PROMPT_MS, "Redisson's waiter woke " + woken + " ms after the module's release");
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed:lock", "{mixed}:lock"})
    void aLibraryWaiterIsHandedALockRedissonReleases(String name) throws Exception {
        RLock theirs = plain.getLock(name);
        theirs.lock();
        long woken = wake(() -> {
            RLock ours = locks.getLock(name);
            boolean got = ours.tryLock(10, 10, TimeUnit.SECONDS);
            ours.unlock();
            return got;
        }, theirs::unlock);
        assertTrue(woken < PROMPT_MS, "the library's waiter got it " + woken + " ms after Redisson's release");
    }

    @Test
    @Smoke
    void holdsAreSharedByOwnerBothWays() {
        // Same client, same thread: the same owner, so each side re-enters what the other took.
        RLock theirs = redisson.getLock("shared");
        RLock ours = locks.getLock("shared");
        theirs.lock();
        ours.lock();
        assertEquals(2, theirs.getHoldCount());
        theirs.unlock();
        assertTrue(ours.isHeldByCurrentThread());
        ours.unlock();
        assertFalse(theirs.isLocked());
    }

    @Test
    void redissonsWatchdogRenewsAModuleGrant() throws InterruptedException {
        // The library grants with LOCK.ACQUIRE and leaves renewal to Redisson's own watchdog
        // (its renewal script on the same hash): no LOCK.RENEW is ever sent.
        RLock ours = locks.getLock("watched");
        ours.lock();
        Thread.sleep(PAST_THREE_LEASES_MS);
        assertTrue(ours.isLocked());
        assertNull(server.connect().info("commandstats", "cmdstat_lock.renew"));
        ours.unlock();
    }

    @Test
    void aRedissonForceUnlockAndARedissonLeaseEndHandTheLockOn() throws Exception {
        RLock theirs = plain.getLock("forced");
        theirs.lock();
        long woken = wake(() -> {
            RLock ours = locks.getLock("forced");
            boolean got = ours.tryLock(10, 10, TimeUnit.SECONDS);
            ours.unlock();
            return got;
        }, () -> plain.getLock("forced").forceUnlock());
        assertTrue(woken < PROMPT_MS, "handed on " + woken + " ms after Redisson's forceUnlock");

        theirs.lock(400, TimeUnit.MILLISECONDS);
        long start = System.nanoTime();
        RLock ours = locks.getLock("forced");
        assertTrue(ours.tryLock(5, 5, TimeUnit.SECONDS));
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        ours.unlock();
        assertTrue(waited < 400 + PROMPT_MS, "handed on " + waited + " ms after a 400 ms Redisson lease began");
    }

    // ---- RFencedLock

    @Test
    @Smoke
    void fencedTokensFromBothNeverGoBackwards() {
        RFencedLock theirs = plain.getFencedLock("fenced");
        RFencedLock ours = locks.getFencedLock("fenced");
        long last = 0;
        for (int i = 0; i < 6; i++) {
            RFencedLock lock = i % 2 == 0 ? ours : theirs;
            Long token = lock.lockAndGetToken();
            assertTrue(token > last, "token " + token + " after " + last);
            last = token;
            lock.unlock();
        }
    }

    // ---- RReadWriteLock

    @ParameterizedTest
    @ValueSource(strings = {"mixed:rw", "{mixed}:rw"})
    void readWriteLocksExcludeEachOtherBothWays(String name) throws Exception {
        RLock ourWrite = locks.getReadWriteLock(name).writeLock();
        ourWrite.lock();
        assertFalse(other(() -> plain.getReadWriteLock(name).readLock().tryLock()));
        ourWrite.unlock();
        RLock theirRead = plain.getReadWriteLock(name).readLock();
        theirRead.lock();
        assertTrue(other(() -> {
            RLock r = locks.getReadWriteLock(name).readLock();
            boolean got = r.tryLock();
            r.unlock();
            return got;
        }));
        assertFalse(other(() -> locks.getReadWriteLock(name).writeLock().tryLock()));
        theirRead.unlock();
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed:rw", "{mixed}:rw"})
    void aRedissonReaderIsWokenByAModuleWriteRelease(String name) throws Exception {
        RLock ourWrite = locks.getReadWriteLock(name).writeLock();
        ourWrite.lock();
        long woken = wake(() -> {
            RLock read = plain.getReadWriteLock(name).readLock();
            boolean got = read.tryLock(10, 10, TimeUnit.SECONDS);
            read.unlock();
            return got;
        }, ourWrite::unlock);
        assertTrue(woken < PROMPT_MS, "Redisson's reader woke " + woken + " ms after the module's release");
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed:rw", "{mixed}:rw"})
    void aLibraryWriterIsHandedALockRedissonsReaderReleases(String name) throws Exception {
        RLock theirRead = plain.getReadWriteLock(name).readLock();
        theirRead.lock();
        long woken = wake(() -> {
            RLock write = locks.getReadWriteLock(name).writeLock();
            boolean got = write.tryLock(10, 10, TimeUnit.SECONDS);
            write.unlock();
            return got;
        }, theirRead::unlock);
        assertTrue(woken < PROMPT_MS, "the library's writer got it " + woken + " ms after Redisson's release");
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed:rw", "{mixed}:rw"})
    void aLibraryReaderIsLetInWhenRedissonsWriterDowngrades(String name) throws Exception {
        // Redisson's writer takes read, then releases write with Redisson's script: the hash
        // goes to mode=read with the writer's read hold, and a reader queued in the module
        // must be let in then.
        RReadWriteLock theirs = plain.getReadWriteLock(name);
        theirs.writeLock().lock();
        theirs.readLock().lock();
        long woken = wake(() -> {
            RLock read = locks.getReadWriteLock(name).readLock();
            boolean got = read.tryLock(10, 10, TimeUnit.SECONDS);
            read.unlock();
            return got;
        }, () -> theirs.writeLock().unlock());
        theirs.readLock().unlock();
        assertTrue(woken < PROMPT_MS, "the library's reader got in " + woken + " ms after Redisson's downgrade");
    }

    @Test
    void aRedissonReadLeaseEndHandsTheLockToALibraryWriter() throws Exception {
        plain.getReadWriteLock("rwlease").readLock().lock(400, TimeUnit.MILLISECONDS);
        long start = System.nanoTime();
        RLock write = locks.getReadWriteLock("rwlease").writeLock();
        assertTrue(write.tryLock(5, 5, TimeUnit.SECONDS));
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        write.unlock();
        assertTrue(waited < 400 + PROMPT_MS, "handed on " + waited + " ms after a 400 ms Redisson read lease began");
    }

    @Test
    void aRedissonForceUnlockOfAReadLockHandsItToALibraryWriter() throws Exception {
        plain.getReadWriteLock("rwforce").readLock().lock();
        long woken = wake(() -> {
            RLock write = locks.getReadWriteLock("rwforce").writeLock();
            boolean got = write.tryLock(10, 10, TimeUnit.SECONDS);
            write.unlock();
            return got;
        }, () -> plain.getReadWriteLock("rwforce").readLock().forceUnlock());
        assertTrue(woken < PROMPT_MS, "handed on " + woken + " ms after Redisson's forceUnlock");
    }

    @Test
    @Smoke
    void aWriterDowngradesAcrossTheTwo() {
        // One owner (same client and thread), each side taking the other mode.
        RReadWriteLock theirs = redisson.getReadWriteLock("down");
        RReadWriteLock ours = locks.getReadWriteLock("down");
        theirs.writeLock().lock();
        ours.readLock().lock();
        theirs.writeLock().unlock();
        assertEquals("read", server.call("HGET", "down", "mode"));
        ours.readLock().unlock();
        assertEquals(0L, server.call("EXISTS", "down"));
        ours.writeLock().lock();
        theirs.readLock().lock();
        ours.writeLock().unlock();
        assertEquals("read", server.call("HGET", "down", "mode"));
        theirs.readLock().unlock();
        assertEquals(0L, server.call("EXISTS", "down"));
    }

    @Test
    void anUpgradeAcrossTheTwoIsRefusedOrWaitsAsEachSideDoes() throws InterruptedException {
        RReadWriteLock theirs = redisson.getReadWriteLock("up");
        RReadWriteLock ours = locks.getReadWriteLock("up");
        theirs.readLock().lock();
        // The module refuses a reader's write at once (an upgrade would wait for itself)...
        assertThrows(RedisException.class, () -> ours.writeLock().tryLock(1, TimeUnit.SECONDS));
        theirs.readLock().unlock();
        ours.readLock().lock();
        // ...where Redisson's own script just answers "held" until the wait ends (#4796).
        assertFalse(theirs.writeLock().tryLock(200, TimeUnit.MILLISECONDS));
        ours.readLock().unlock();
    }

    // ---- RSemaphore, RPermitExpirableSemaphore

    @ParameterizedTest
    @ValueSource(strings = {"mixed:sem", "{mixed}:sem"})
    void semaphoreWaitersAreServedByTheOtherSidesRelease(String name) throws Exception {
        RSemaphore ours = locks.getSemaphore(name);
        RSemaphore theirs = plain.getSemaphore(name);
        ours.trySetPermits(0);
        long woken = wake(() -> theirs.tryAcquire(1, java.time.Duration.ofSeconds(10)), () -> ours.release());
        assertTrue(woken < PROMPT_MS, "Redisson's acquire woke " + woken + " ms after the module's release");
        woken = wake(() -> ours.tryAcquire(1, java.time.Duration.ofSeconds(10)), () -> theirs.release());
        assertTrue(woken < PROMPT_MS, "the library's acquire got it " + woken + " ms after Redisson's release");
        assertEquals(0, ours.availablePermits());
    }

    @Test
    void redissonsAddAndSetPermitsServeLibraryWaiters() throws Exception {
        // Redisson's addPermits and trySetPermits write the count with SET, not INCRBY.
        RSemaphore ours = locks.getSemaphore("added");
        long woken = wake(() -> ours.tryAcquire(1, java.time.Duration.ofSeconds(10)),
                () -> plain.getSemaphore("added").trySetPermits(1));
        assertTrue(woken < PROMPT_MS, "served " + woken + " ms after Redisson's trySetPermits");
        woken = wake(() -> ours.tryAcquire(1, java.time.Duration.ofSeconds(10)),
                () -> plain.getSemaphore("added").addPermits(1));
        assertTrue(woken < PROMPT_MS, "served " + woken + " ms after Redisson's addPermits");
        RPermitExpirableSemaphore permits = locks.getPermitExpirableSemaphore("added:permits");
        woken = wake(() -> permits.tryAcquire(10, 10, TimeUnit.SECONDS) != null,
                () -> plain.getPermitExpirableSemaphore("added:permits").trySetPermits(1));
        assertTrue(woken < PROMPT_MS, "served " + woken + " ms after Redisson's trySetPermits (permits)");
        woken = wake(() -> permits.tryAcquire(10, 10, TimeUnit.SECONDS) != null,
                () -> plain.getPermitExpirableSemaphore("added:permits").addPermits(1));
        assertTrue(woken < PROMPT_MS, "served " + woken + " ms after Redisson's addPermits (permits)");
    }

    @ParameterizedTest
    @ValueSource(strings = {"mixed:permits", "{mixed}:permits"})
    void permitWaitersAreServedByTheOtherSidesRelease(String name) throws Exception {
        RPermitExpirableSemaphore ours = locks.getPermitExpirableSemaphore(name);
        RPermitExpirableSemaphore theirs = plain.getPermitExpirableSemaphore(name);
        ours.trySetPermits(1);
        String held = ours.acquire();
        long woken = wake(() -> {
            String id = theirs.tryAcquire(10, 10, TimeUnit.SECONDS);
            theirs.release(id);
            return id != null;
        }, () -> ours.release(held));
        assertTrue(woken < PROMPT_MS, "Redisson's acquire woke " + woken + " ms after the module's release");
        String theirHold = theirs.acquire();
        woken = wake(() -> {
            String id = ours.tryAcquire(10, 10, TimeUnit.SECONDS);
            ours.release(id);
            return id != null;
        }, () -> theirs.release(theirHold));
        assertTrue(woken < PROMPT_MS, "the library's acquire got it " + woken + " ms after Redisson's release");
        assertEquals(1, theirs.availablePermits());
    }

    // ---- RCountDownLatch

    @ParameterizedTest
    @ValueSource(strings = {"mixed:latch", "{mixed}:latch"})
    void latchWaitersAreLetGoByTheOtherSidesCountDown(String name) throws Exception {
        RCountDownLatch ours = locks.getCountDownLatch(name);
        RCountDownLatch theirs = plain.getCountDownLatch(name);
        assertTrue(theirs.trySetCount(1));
        long woken = wake(() -> theirs.await(10, TimeUnit.SECONDS), ours::countDown);
        assertTrue(woken < PROMPT_MS, "Redisson's await woke " + woken + " ms after the module's count-down");
        assertTrue(ours.trySetCount(1));
        woken = wake(() -> ours.await(10, TimeUnit.SECONDS), theirs::countDown);
        assertTrue(woken < PROMPT_MS, "the library's await woke " + woken + " ms after Redisson's count-down");
    }

    // ---- helpers

    private <T> T other(Callable<T> task) throws Exception {
        return pool(1).submit(task).get(10, TimeUnit.SECONDS);
    }

    interface Release {
        void run() throws Exception;
    }

    /**
     * Starts {@code waiter} on another thread, lets it wait, runs {@code release}, and answers
     * how many ms after the release began the waiter's acquire returned (it must succeed).
     */
    private long wake(Callable<Boolean> waiter, Release release) throws Exception {
        long[] at = new long[1];
        Future<Boolean> f = pool(1).submit(() -> {
            boolean got = waiter.call();
            at[0] = System.nanoTime();
            return got;
        });
        Thread.sleep(250); // subscribed (Redisson) or queued (module)
        assertFalse(f.isDone(), "the waiter waits");
        long start = System.nanoTime();
        release.run();
        assertTrue(f.get(15, TimeUnit.SECONDS), "the waiter got it");
        assertNotNull(at);
        return TimeUnit.NANOSECONDS.toMillis(at[0] - start);
    }
}
