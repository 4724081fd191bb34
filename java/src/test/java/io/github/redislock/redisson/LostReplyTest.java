package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.redislock.redisson.support.Clients;
import io.github.redislock.redisson.support.CutProxy;
import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.redisson.config.ConstantDelay;

/**
 * Commands that change a hold count and whose reply is lost on the way back, through a proxy
 * that cuts the connection: the library reads the count back and decides (the old count - 1
 * or + 1: it ran; the old count: it did not), never resending what ran nor leaving a grant
 * nobody holds.
 */
class LostReplyTest extends ServerTest {

    private CutProxy proxy;
    private RedissonClient cut;
    private ModuleLocks cutLocks;

    @BeforeEach
    void throughAProxy() {
        proxy = new CutProxy(server.port);
        // One connection, so that the lock's commands share it with what warmed it up.
        cut = Clients.single(proxy.address(), c -> {
            c.useSingleServer().setConnectionPoolSize(1).setConnectionMinimumIdleSize(1).setTimeout(1000)
                    .setRetryAttempts(3).setRetryDelay(new ConstantDelay(Duration.ofMillis(50)));
            // Redisson's watchdog (30 s) outlives a cut connection's reconnection.
        });
        // A wait's reply lost is only noticed at its slice's response timeout (Redisson's
        // executor does not say that the connection closed): short slices, short tests.
        cutLocks = ModuleLocks.wrap(cut, ModuleLocks.Options.defaults().waitSlice(Duration.ofMillis(500)));
    }

    @AfterEach
    void closeProxy() {
        cut.shutdown();
        proxy.close();
    }

    /** A lock whose connection knows its id and whose count the library knows (0). */
    private RLock warm(String name) {
        RLock lock = cutLocks.getLock(name);
        lock.lock();
        lock.unlock();
        return lock;
    }

    private String count(String name) {
        return (String) server.call("HGET", name, LockTest.ownerOf(cut, Thread.currentThread().getId()));
    }

    @Test
    void anUnlockThatRanIsConfirmedAndNotSentAgain() throws Exception {
        RLock lock = warm("lost");
        lock.lock();
        lock.lock();
        proxy.dropReply("LOCK.RELEASE");
        lock.unlock(); // ran; its reply lost: the count read back (1) says so
        assertTrue(proxy.fired(0));
        assertEquals("1", count("lost"), "released once, not twice");
        lock.unlock();
        assertEquals(0L, server.call("EXISTS", "lost"));
    }

    @Test
    @Smoke
    void anUnlockThatNeverRanIsSentAgainOnce() throws Exception {
        RLock lock = warm("lost");
        lock.lock();
        lock.lock();
        proxy.cutBefore("LOCK.RELEASE");
        lock.unlock(); // never ran: the count read back (2) says so, and it is sent again
        assertTrue(proxy.fired(0));
        assertEquals("1", count("lost"));
        lock.unlock();
        assertEquals(0L, server.call("EXISTS", "lost"));
    }

    @Test
    void theLastUnlockIsConfirmedOrSentAgain() throws Exception {
        RLock lock = warm("lost");
        lock.lock();
        proxy.dropReply("LOCK.RELEASE");
        lock.unlock();
        assertTrue(proxy.fired(0));
        assertEquals(0L, server.call("EXISTS", "lost"));
        lock.lock();
        proxy.cutBefore("LOCK.RELEASE");
        lock.unlock();
        assertTrue(proxy.fired(0));
        assertEquals(0L, server.call("EXISTS", "lost"));
        assertTrue(locks.getLock("lost").tryLock(), "free for anyone");
        locks.getLock("lost").unlock();
    }

    @Test
    @Smoke
    void aTryWhoseGrantIsLostGivesItBack() throws Exception {
        RLock lock = warm("lost");
        proxy.dropReply("LOCK.ACQUIRE");
        assertThrows(RedisException.class, lock::tryLock);
        assertTrue(proxy.fired(0));
        eventually(() -> (Long) server.call("EXISTS", "lost") == 0);
        // A re-entry whose reply is lost gives back that one hold only.
        lock.lock();
        proxy.dropReply("LOCK.ACQUIRE");
        assertThrows(RedisException.class, lock::tryLock);
        eventually(() -> "1".equals(count("lost")));
        lock.unlock();
        assertEquals(0L, server.call("EXISTS", "lost"));
    }

    @Test
    void aTryThatNeverRanTakesNothing() throws Exception {
        RLock lock = warm("lost");
        proxy.cutBefore("LOCK.ACQUIRE");
        assertThrows(RedisException.class, lock::tryLock);
        assertTrue(proxy.fired(0));
        assertEquals(0L, server.call("EXISTS", "lost"));
        assertTrue(lock.tryLock(), "the library still knows the count: the next try works");
        lock.unlock();
    }

    @Test
    void aWaitWhoseGrantIsLostGivesItBack() throws Exception {
        java.util.concurrent.CountDownLatch warmed = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
        Future<Throwable> waiter = pool(1).submit(() -> {
            RLock mine = warm("lost"); // known count 0: the wait is sent without a try
            warmed.countDown();
            held.await();
            proxy.dropReply("LOCK.ACQUIRE");
            return assertThrows(RedisException.class, mine::lock);
        });
        warmed.await();
        RLock holder = locks.getLock("lost");
        holder.lock();
        held.countDown();
        LockTest.waitForWaiters("lost", 1);
        holder.unlock(); // hands the lock to the waiter, whose reply is dropped
        waiter.get(20, TimeUnit.SECONDS);
        assertTrue(proxy.fired(0));
        LockTest.eventuallyFree("lost");
    }

    private static void eventually(java.util.function.BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            if (condition.getAsBoolean()) {
                return;
            }
            Thread.sleep(10);
        }
        throw new AssertionError("not within 10 s");
    }
}
