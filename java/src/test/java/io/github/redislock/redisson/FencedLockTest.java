package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFencedLock;

/**
 * RFencedLock's contract (Redisson's RedissonFencedLockTest checks tokens 1, 2, 3...): here
 * every grant still raises the token, re-entry included, but tokens are deliberately large
 * and node-distinct ({@code seq x 16 + node}, about 3.7e15), so the checks are "strictly
 * greater", not "+1".
 */
class FencedLockTest extends ServerTest {

    @Test
    @Smoke
    void everyGrantRaisesTheTokenReentryIncluded() {
        RFencedLock lock = locks.getFencedLock("fenced");
        Long first = lock.lockAndGetToken();
        Long second = lock.lockAndGetToken();
        assertTrue(first > 1_000_000_000_000_000L, "large, clock-based: " + first);
        assertTrue(second > first);
        assertEquals(second, lock.getToken());
        assertEquals(2, lock.getHoldCount());
        lock.unlock();
        lock.unlock();
        lock.lock(); // a plain lock() raises it too, as Redisson's INCR does
        assertTrue(lock.getToken() > second);
        lock.unlock();
        Long third = lock.tryLockAndGetToken();
        assertTrue(third > second);
        lock.unlock();
    }

    @Test
    void tryLockAndGetTokenTriesOnceAndWaitsWhenAskedTo() throws Exception {
        RFencedLock lock = locks.getFencedLock("fenced");
        Long held = lock.lockAndGetToken(5, TimeUnit.SECONDS);
        Future<Long> once = pool(1).submit(() -> locks.getFencedLock("fenced").tryLockAndGetToken());
        // Deliberately different from Redisson 3.52/4.7, whose tryLockAndGetToken() waits without end.
        assertNull(once.get(2, TimeUnit.SECONDS));
        Future<Long> waiting = pool(1).submit(() -> {
            RFencedLock mine = locks.getFencedLock("fenced");
            Long token = mine.tryLockAndGetToken(5, 5, TimeUnit.SECONDS);
            mine.unlock();
            return token;
        });
        Thread.sleep(200);
        lock.unlock();
        Long next = waiting.get(5, TimeUnit.SECONDS);
        assertNotNull(next);
        assertTrue(next > held);
    }
}
