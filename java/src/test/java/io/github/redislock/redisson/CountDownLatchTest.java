package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.Test;
import org.redisson.api.RCountDownLatch;

/** RCountDownLatch's contract, as Redisson's RedissonCountDownLatchTest checks it, on the module. */
class CountDownLatchTest extends ServerTest {

    @Test
    @Smoke
    void waitersAreLetGoWhenTheCountReachesZero() throws Exception {
        RCountDownLatch latch = locks.getCountDownLatch("latch");
        assertTrue(latch.trySetCount(2));
        assertFalse(latch.trySetCount(3));
        ExecutorService pool = pool(4);
        List<Future<Long>> waiters = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            waiters.add(pool.submit(() -> {
                locks.getCountDownLatch("latch").await();
                return System.nanoTime();
            }));
        }
        Thread.sleep(200);
        latch.countDown();
        assertEquals(1, latch.getCount());
        Thread.sleep(100);
        for (Future<Long> w : waiters) {
            assertFalse(w.isDone());
        }
        long opened = System.nanoTime();
        latch.countDown();
        for (Future<Long> w : waiters) {
            assertTrue(TimeUnit.NANOSECONDS.toMillis(w.get(2, TimeUnit.SECONDS) - opened) < 100);
        }
        assertEquals(0, latch.getCount());
    }

    @Test
    void awaitTimesOutAndAMissingLatchIsOpen() throws Exception {
        RCountDownLatch latch = locks.getCountDownLatch("latch");
        assertTrue(latch.await(10, TimeUnit.MILLISECONDS), "a missing latch is open");
        latch.trySetCount(1);
        long start = System.nanoTime();
        assertFalse(latch.await(300, TimeUnit.MILLISECONDS));
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(waited >= 280 && waited < 1200, "waited " + waited);
        assertFalse(latch.awaitAsync(50, TimeUnit.MILLISECONDS).get());
        latch.countDownAsync().get();
        assertTrue(latch.awaitAsync(50, TimeUnit.MILLISECONDS).get());
        latch.awaitAsync().get(1, TimeUnit.SECONDS);
    }

    @Test
    void aLatchThatExpiresIsNotReportedOpen() throws Exception {
        // Deliberately different: Redisson reads the missing key as zero and answers true.
        server.call("LOCK.LATCHSET", "latch", "1", "PX", "300");
        assertFalse(locks.getCountDownLatch("latch").await(3, TimeUnit.SECONDS));
    }

    @Test
    void deleteLetsWaitersGo() throws Exception {
        RCountDownLatch latch = locks.getCountDownLatch("latch");
        latch.trySetCount(5);
        Future<Boolean> waiter = pool(1).submit(() -> locks.getCountDownLatch("latch").await(5, TimeUnit.SECONDS));
        Thread.sleep(200);
        assertTrue(latch.delete());
        assertTrue(waiter.get(2, TimeUnit.SECONDS));
    }
}
