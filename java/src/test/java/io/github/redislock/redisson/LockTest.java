package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFuture;
import org.redisson.api.RLock;
import org.redisson.api.RLockReactive;
import org.redisson.api.RedissonClient;

/**
 * RLock's contract, as Redisson's own RedissonLockTest checks it, on the module: re-entry,
 * hold counts, leases, the watchdog, forceUnlock, tryLock's wait, interrupts, many clients.
 */
class LockTest extends ServerTest {

    @Test
    @Smoke
    void lockUnlockAndReentry() throws InterruptedException {
        RLock lock = locks.getLock("lock");
        lock.lock();
        lock.lock();
        assertTrue(lock.isLocked());
        assertTrue(lock.isHeldByCurrentThread());
        assertEquals(2, lock.getHoldCount());
        assertEquals("2", String.valueOf(server.call("HGET", "lock", redissonOwner())));
        lock.unlock();
        assertEquals(1, lock.getHoldCount());
        assertTrue(lock.isLocked());
        lock.unlock();
        assertFalse(lock.isLocked());
        assertEquals(0, lock.getHoldCount());
        assertTrue(lock.tryLock(0, TimeUnit.SECONDS));
        lock.unlock();
    }

    @Test
    void anotherThreadIsExcludedAndSeesItHeldByOthers() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock();
        Future<Boolean> other = pool(1).submit(() -> {
            RLock mine = locks.getLock("lock");
            assertFalse(mine.isHeldByCurrentThread());
            assertTrue(mine.isLocked());
            return mine.tryLock();
        });
        assertFalse(other.get());
        lock.unlock();
    }

    @Test
    void unlockByAnotherThreadFailsWithIllegalMonitorState() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock();
        Future<?> other = pool(1).submit(() -> assertThrows(IllegalMonitorStateException.class,
                () -> locks.getLock("lock").unlock()));
        other.get();
        assertTrue(lock.isHeldByCurrentThread());
        lock.unlock();
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
    }

    @Test
    void aLeaseEndsTheLockAndRemainTimeToLiveShowsIt() throws InterruptedException {
        RLock lock = locks.getLock("lock");
        lock.lock(2, TimeUnit.SECONDS);
        long ttl = lock.remainTimeToLive();
        assertTrue(ttl > 1000 && ttl <= 2000, "ttl " + ttl);
        Thread.sleep(2300);
        assertFalse(lock.isLocked());
        assertEquals(-2, lock.remainTimeToLive());
    }

    @Test
    @Smoke
    void theWatchdogKeepsALockPastThreeLeases() throws InterruptedException {
        RLock lock = locks.getLock("lock");
        lock.lock();
        Thread.sleep(PAST_THREE_LEASES_MS);
        assertTrue(lock.isLocked());
        long ttl = lock.remainTimeToLive();
        assertTrue(ttl > 0 && ttl <= WATCHDOG_MS, "ttl " + ttl);
        lock.unlock();
        assertFalse(lock.isLocked());
    }

    @Test
    void forceUnlockFreesALockHeldByAnotherThread() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock();
        assertTrue(pool(1).submit(() -> locks.getLock("lock").forceUnlock()).get());
        assertFalse(lock.isLocked());
        assertFalse(locks.getLock("lock").forceUnlock());
    }

    @Test
    void tryLockWaitsAndTimesOut() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock();
        Future<Long> other = pool(1).submit(() -> {
            long start = System.nanoTime();
            assertFalse(locks.getLock("lock").tryLock(500, TimeUnit.MILLISECONDS));
            return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        });
        long waited = other.get();
        assertTrue(waited >= 480 && waited < 1500, "waited " + waited);
        lock.unlock();
    }

    @Test
    @Smoke
    void aWaiterIsHandedTheLockWhenItIsReleased() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock();
        CountDownLatch waiting = new CountDownLatch(1);
        Future<Long> other = pool(1).submit(() -> {
            waiting.countDown();
            RLock mine = locks.getLock("lock");
            assertTrue(mine.tryLock(10, 5, TimeUnit.SECONDS));
            long at = System.nanoTime();
            mine.unlock();
            return at;
        });
        waiting.await();
        Thread.sleep(200);
        long released = System.nanoTime();
        lock.unlock();
        long granted = other.get();
        assertTrue(TimeUnit.NANOSECONDS.toMillis(granted - released) < 100);
    }

    @Test
    void anExpiredLeaseIsHandedToTheWaiterAtOnce() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock(400, TimeUnit.MILLISECONDS);
        long start = System.nanoTime();
        Future<Long> other = pool(1).submit(() -> {
            RLock mine = locks.getLock("lock");
            mine.lock();
            long at = System.nanoTime();
            mine.unlock();
            return at;
        });
        long waited = TimeUnit.NANOSECONDS.toMillis(other.get() - start);
        // Handed on at the lease's end (module timer), not when Redisson's client polls.
        assertTrue(waited >= 350 && waited < 700, "waited " + waited);
    }

    @Test
    void anInterruptedWaitLeavesNoGrant() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock();
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread waiter = new Thread(() -> {
            try {
                locks.getLock("lock").lockInterruptibly();
            } catch (Throwable e) {
                thrown.set(e);
            }
        });
        waiter.start();
        waitForWaiters("lock", 1);
        waiter.interrupt();
        waiter.join(5000);
        assertTrue(thrown.get() instanceof InterruptedException, "thrown " + thrown.get());
        // The interrupt cancelled the server-side wait (LOCK.CANCEL) before it was reported.
        assertEquals(0, waiters("lock"));
        lock.unlock();
        eventuallyFree("lock");
    }

    @Test
    @Smoke
    void aCancelledLockAsyncLeavesNoGrant() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock();
        RLock other = locks.getLock("lock");
        RFuture<Void> f = other.lockAsync(-1, null, 4242);
        waitForWaiters("lock", 1);
        assertTrue(f.cancel(false));
        lock.unlock(); // hands the lock to the cancelled waiter, which gives it back
        eventuallyFree("lock");
        assertFalse(other.isHeldByThread(4242));
    }

    @Test
    void theUninterruptibleLockKeepsWaitingThroughAnInterrupt() throws Exception {
        RLock lock = locks.getLock("lock");
        lock.lock();
        AtomicReference<Boolean> flag = new AtomicReference<>();
        Thread waiter = new Thread(() -> {
            RLock mine = locks.getLock("lock");
            mine.lock();
            flag.set(Thread.interrupted()); // read and cleared: unlock() would throw on it
            mine.unlock();
        });
        waiter.start();
        waitForWaiters("lock", 1);
        waiter.interrupt();
        Thread.sleep(300);
        assertTrue(waiter.isAlive());
        lock.unlock();
        waiter.join(5000);
        assertEquals(Boolean.TRUE, flag.get(), "the interrupt is kept for the caller");
    }

    @Test
    @Smoke
    void asyncAndReactiveViews() throws Exception {
        RLock lock = locks.getLock("lock");
        assertTrue(lock.tryLockAsync(1, 10, TimeUnit.SECONDS, 7).get());
        assertTrue(lock.isHeldByThread(7));
        assertFalse(lock.tryLockAsync(8).get());
        lock.unlockAsync(7).get();
        RLockReactive reactive = locks.reactive().getLock("lock");
        reactive.lock(5, TimeUnit.SECONDS, 9).block();
        assertTrue(lock.isHeldByThread(9));
        reactive.unlock(9).block();
        assertFalse(lock.isLocked());
        locks.rxJava().getLock("lock").lock(5, TimeUnit.SECONDS, 10).blockingAwait();
        assertTrue(lock.isHeldByThread(10));
        locks.rxJava().getLock("lock").forceUnlock().blockingGet();
    }

    @Test
    @Smoke
    void redissonsMultiLockTakesTheseLocks() throws Exception {
        // RedissonMultiLock drives its members through RLock's async methods (and casts them to
        // RedissonBaseLock): the library's locks are Redisson's subclasses, so it works.
        RLock multi = redisson.getMultiLock(locks.getLock("m1"), locks.getLock("m2"), locks.getLock("m3"));
        assertTrue(multi.tryLock(1, 5, TimeUnit.SECONDS));
        assertEquals(1L, server.call("EXISTS", "m2"));
        assertFalse(pool(1).submit(() -> locks.getLock("m3").tryLock()).get());
        multi.unlock();
        assertEquals(0L, server.call("EXISTS", "m1", "m2", "m3"));
    }

    @Test
    void manyClientsNeverHoldItAtOnce() throws Exception {
        int clients = 4;
        int threadsPerClient = 4;
        int rounds = 25;
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger sections = new AtomicInteger();
        ExecutorService pool = pool(clients * threadsPerClient);
        List<Future<?>> done = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            ModuleLocks mine = ModuleLocks.wrap(client());
            for (int t = 0; t < threadsPerClient; t++) {
                done.add(pool.submit(() -> {
                    for (int i = 0; i < rounds; i++) {
                        RLock lock = mine.getLock("contended");
                        lock.lock();
                        try {
                            if (inside.incrementAndGet() != 1) {
                                overlaps.incrementAndGet();
                            }
                            sections.incrementAndGet();
                            inside.decrementAndGet();
                        } finally {
                            lock.unlock();
                        }
                    }
                    return null;
                }));
            }
        }
        for (Future<?> f : done) {
            f.get(60, TimeUnit.SECONDS);
        }
        assertEquals(0, overlaps.get());
        assertEquals(clients * threadsPerClient * rounds, sections.get());
        assertNull(server.call("GET", "contended"));
    }

    @Test
    @Smoke
    void aWaitLongerThanRedissonsPingCheckIsSliced() throws Exception {
        // Redisson closes a connection whose PING, queued behind an outstanding command,
        // has no answer within max(timeout, pingConnectionInterval / 2), checked every
        // pingConnectionInterval. Here 0.5 s and 1 s: a single 4 s server-side wait loses its
        // connection within 2 s (checked by hand with one unsliced wait); the sliced one
        // gets the lock.
        RedissonClient fussy = client(c -> {
            c.useSingleServer().setPingConnectionInterval(1000).setTimeout(500);
        });
        ModuleLocks mine = ModuleLocks.wrap(fussy);
        RLock lock = locks.getLock("lock");
        lock.lock();
        Future<Boolean> waiter = pool(1).submit(() -> mine.getLock("lock").tryLock(10, 5, TimeUnit.SECONDS));
        Thread.sleep(4000);
        assertFalse(waiter.isDone());
        lock.unlock();
        assertTrue(waiter.get(5, TimeUnit.SECONDS));
    }

    @Test
    void aRetriedAcquireNeverCountsTwice() throws Exception {
        // Writes paused: the acquire is queued by the server past Redisson's response
        // timeout. Redisson's executor resends a command that timed out unless it is marked
        // no-retry; the module's commands are, so the lock is held once, not several times.
        RedissonClient impatient = client(c -> c.useSingleServer().setTimeout(300).setRetryAttempts(3)
                .setRetryDelay(new org.redisson.config.ConstantDelay(java.time.Duration.ofMillis(50))));
        RLock lock = ModuleLocks.wrap(impatient).getLock("lock");
        server.call("CLIENT", "PAUSE", "1200", "WRITE");
        assertThrows(Exception.class, () -> lock.tryLockAsync(5).get());
        Thread.sleep(1500);
        String count = (String) server.call("HGET", "lock", ownerOf(impatient, 5));
        assertTrue(count == null || "1".equals(count), "hold count " + count);
    }

    // ---- helpers

    private static String redissonOwner() {
        return ownerOf(redisson, Thread.currentThread().getId());
    }

    static String ownerOf(RedissonClient client, long threadId) {
        return ((org.redisson.Redisson) client).getCommandExecutor().getServiceManager().getId() + ":" + threadId;
    }

    /** Waits until {@code LOCK.INFO name} lists {@code n} waiters. */
    static void waitForWaiters(String name, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < deadline) {
            if (waiters(name) >= n) {
                return;
            }
            Thread.sleep(5);
        }
        throw new AssertionError("no " + n + " waiter(s) on " + name + ": " + server.call("LOCK.INFO", name));
    }

    @SuppressWarnings("unchecked")
    static int waiters(String name) {
        List<Object> info = (List<Object>) server.call("LOCK.INFO", name);
        for (int i = 0; i < info.size(); i += 2) {
            if ("waiters".equals(info.get(i))) {
                return ((List<Object>) info.get(i + 1)).size();
            }
        }
        return 0;
    }

    static void eventuallyFree(String name) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (System.nanoTime() < deadline) {
            if ((Long) server.call("EXISTS", name) == 0 && waiters(name) == 0) {
                return;
            }
            Thread.sleep(10);
        }
        throw new AssertionError(name + " still held or waited for: " + server.call("LOCK.INFO", name));
    }
}
