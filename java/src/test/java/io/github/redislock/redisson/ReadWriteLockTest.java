package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.client.RedisException;

/** RReadWriteLock's contract, as Redisson's RedissonReadWriteLockTest checks it, on the module. */
class ReadWriteLockTest extends ServerTest {

    @Test
    void readersShareAndAWriterExcludesThem() throws Exception {
        RReadWriteLock rw = locks.getReadWriteLock("rw");
        rw.readLock().lock();
        assertTrue(pool(1).submit(() -> locks.getReadWriteLock("rw").readLock().tryLock()).get());
        assertFalse(pool(1).submit(() -> locks.getReadWriteLock("rw").writeLock().tryLock()).get());
        assertTrue(rw.readLock().isLocked());
        assertFalse(rw.writeLock().isLocked());
        rw.readLock().unlock();
    }

    @Test
    @Smoke
    void aWriterExcludesEveryoneAndReentersAndAReaderIsHandedItAfter() throws Exception {
        RReadWriteLock rw = locks.getReadWriteLock("rw");
        RLock write = rw.writeLock();
        write.lock();
        write.lock();
        assertEquals(2, write.getHoldCount());
        assertTrue(write.isLocked());
        Future<Boolean> reader = pool(1).submit(() -> {
            RLock read = locks.getReadWriteLock("rw").readLock();
            boolean got = read.tryLock(5, 5, TimeUnit.SECONDS);
            read.unlock();
            return got;
        });
        LockTest.waitForWaiters("rw", 1);
        write.unlock();
        assertFalse(reader.isDone());
        write.unlock();
        assertTrue(reader.get(2, TimeUnit.SECONDS));
    }

    @Test
    @Smoke
    void aWriterDowngradesToRead() throws Exception {
        RReadWriteLock rw = locks.getReadWriteLock("rw");
        rw.writeLock().lock();
        rw.readLock().lock();
        rw.writeLock().unlock();
        assertEquals("read", server.call("HGET", "rw", "mode"));
        assertTrue(pool(1).submit(() -> locks.getReadWriteLock("rw").readLock().tryLock()).get());
        assertFalse(pool(1).submit(() -> locks.getReadWriteLock("rw").writeLock().tryLock()).get());
        rw.readLock().unlock();
    }

    @Test
    void anUpgradeIsRefusedNotLeftWaiting() {
        // Deliberately different: Redisson's writeLock().lock() by a reader waits for its own
        // read hold forever (#4796); the module refuses it at once.
        RReadWriteLock rw = locks.getReadWriteLock("rw");
        rw.readLock().lock();
        RedisException e = assertThrows(RedisException.class, () -> rw.writeLock().tryLock(1, TimeUnit.SECONDS));
        assertTrue(e.getMessage().contains("holds this read-write lock for reading"), e.getMessage());
        rw.readLock().unlock();
    }

    @Test
    void aWriterIsNotStarvedByAStreamOfReaders() throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger reads = new AtomicInteger();
        ExecutorService readers = pool(4);
        for (int i = 0; i < 4; i++) {
            readers.submit(() -> {
                while (!stop.get()) {
                    RLock read = locks.getReadWriteLock("rw").readLock();
                    read.lock(5, TimeUnit.SECONDS);
                    reads.incrementAndGet();
                    Thread.sleep(20);
                    read.unlock();
                }
                return null;
            });
        }
        while (reads.get() < 20) {
            Thread.sleep(10);
        }
        long start = System.nanoTime();
        RLock write = locks.getReadWriteLock("rw").writeLock();
        boolean got = write.tryLock(3, 5, TimeUnit.SECONDS);
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        stop.set(true);
        assertTrue(got, "the writer got the lock");
        assertTrue(waited < 500, "the writer waited " + waited + " ms behind readers holding 20 ms");
        write.unlock();
    }

    @Test
    void theWatchdogKeepsReadAndWriteHoldsPastThreeLeases() throws InterruptedException {
        // A name no other test uses: other tests leave read holds of "rw" taken by pool
        // threads, whose renewal Redisson keeps in one entry per lock name. After the next
        // FLUSHALL that renewal finds nothing and Redisson cancels the entry for every
        // thread, this test's hold included, if it joined the entry in the meantime.
        RReadWriteLock rw = locks.getReadWriteLock("rw-watchdog");
        rw.readLock().lock();
        Thread.sleep(PAST_THREE_LEASES_MS);
        assertTrue(rw.readLock().isLocked());
        rw.readLock().unlock();
        rw.writeLock().lock();
        Thread.sleep(PAST_THREE_LEASES_MS);
        assertTrue(rw.writeLock().isLocked());
        rw.writeLock().unlock();
        assertEquals(0L, server.call("EXISTS", "rw-watchdog"));
    }

    @Test
    void aReadLeaseEndsAndTheWriterIsHandedTheLock() throws Exception {
        locks.getReadWriteLock("rw").readLock().lock(500, TimeUnit.MILLISECONDS);
        long start = System.nanoTime();
        Future<Long> writer = pool(1).submit(() -> {
            RLock write = locks.getReadWriteLock("rw").writeLock();
            write.lock();
            long at = System.nanoTime();
            write.unlock();
            return at;
        });
        long waited = TimeUnit.NANOSECONDS.toMillis(writer.get(5, TimeUnit.SECONDS) - start);
        assertTrue(waited >= 450 && waited < 800, "waited " + waited);
    }

    @Test
    void anInterruptedReaderLeavesNoReadHold() throws Exception {
        RLock write = locks.getReadWriteLock("rw").writeLock();
        write.lock();
        Thread reader = new Thread(() -> {
            try {
                locks.getReadWriteLock("rw").readLock().lockInterruptibly();
            } catch (InterruptedException e) {
                // expected
            }
        });
        reader.start();
        LockTest.waitForWaiters("rw", 1);
        reader.interrupt();
        reader.join(5000);
        write.unlock();
        LockTest.eventuallyFree("rw");
    }
}
