package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.redislock.redisson.support.RedisCluster;
import io.github.redislock.redisson.support.RedisServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * A Redis Cluster of three masters: every kind on names spread over the nodes (with and
 * without hash tags), Redisson's sharded pub/sub waking its waiters on a module release, and
 * {@code wrap} refusing a cluster where one node has no module.
 */
@Tag("topology")
class ClusterTest {

    private static RedisCluster cluster;
    private static RedissonClient redisson;
    private static RedissonClient plain;
    private static ModuleLocks locks;
    private static final ExecutorService POOL = Executors.newCachedThreadPool();

    /** Names whose slots fall on every node, with and without a hash tag. */
    private static final List<String> NAMES = List.of("alpha", "bravo", "charlie", "delta", "{tag}:echo", "{x}:foxtrot");

    @BeforeAll
    static void start() {
        cluster = RedisCluster.start("--enable-module-command", "yes");
        redisson = cluster.client();
        plain = cluster.client();
        locks = ModuleLocks.wrap(redisson);
    }

    @AfterAll
    static void stop() {
        POOL.shutdownNow();
        if (redisson != null) {
            redisson.shutdown();
            plain.shutdown();
        }
        cluster.close();
    }

    @Test
    void theNamesCoverEveryNode() {
        Set<Integer> ports = new HashSet<>();
        for (String name : NAMES) {
            ports.add(cluster.nodeFor(name).port);
        }
        assertEquals(3, ports.size());
    }

    @Test
    void everyKindWorksOnEveryNode() throws Exception {
        for (String name : NAMES) {
            RLock lock = locks.getLock(name + ":lock");
            lock.lock();
            assertFalse(POOL.submit(() -> plain.getLock(name + ":lock").tryLock()).get());
            lock.unlock();

            RFencedLock fenced = locks.getFencedLock(name + ":fenced");
            Long t1 = fenced.lockAndGetToken();
            fenced.unlock();
            Long t2 = plain.getFencedLock(name + ":fenced").lockAndGetToken();
            plain.getFencedLock(name + ":fenced").unlock();
            assertTrue(t2 > t1);

            RReadWriteLock rw = locks.getReadWriteLock(name + ":rw");
            rw.readLock().lock();
            assertFalse(POOL.submit(() -> plain.getReadWriteLock(name + ":rw").writeLock().tryLock()).get());
            rw.readLock().unlock();
            rw.writeLock().lock();
            rw.writeLock().unlock();

            RSemaphore sem = locks.getSemaphore(name + ":sem");
            assertTrue(sem.trySetPermits(1));
            assertTrue(sem.tryAcquire());
            assertFalse(sem.tryAcquire(1, Duration.ofMillis(50)));
            sem.release();

            RPermitExpirableSemaphore permits = locks.getPermitExpirableSemaphore(name + ":permits");
            assertTrue(permits.trySetPermits(1));
            String id = permits.acquire(5, TimeUnit.SECONDS);
            assertNotNull(id);
            permits.release(id);

            RCountDownLatch latch = locks.getCountDownLatch(name + ":latch");
            assertTrue(latch.trySetCount(1));
            latch.countDown();
            assertTrue(latch.await(1, TimeUnit.SECONDS));
        }
    }

    @Test
    void waitersOnEitherSideAreWokenOnEveryNode() throws Exception {
        wakeBothWays(List.of("alpha", "bravo", "charlie", "delta"));
    }

    @Test
    void waitersOnEitherSideAreWokenOnHashTaggedNames() throws Exception {
        wakeBothWays(List.of("{tag}:echo", "{x}:foxtrot"));
    }

    private static void wakeBothWays(List<String> names) throws Exception {
        for (String name : names) {
            String key = name + ":wake";
            RLock ours = locks.getLock(key);
            ours.lock();
            Future<Long> theirs = POOL.submit(() -> {
                RLock l = plain.getLock(key);
                assertTrue(l.tryLock(10, 10, TimeUnit.SECONDS));
                long at = System.nanoTime();
                l.unlock();
                return at;
            });
            Thread.sleep(300);
            long start = System.nanoTime();
            ours.unlock();
            long woken = TimeUnit.NANOSECONDS.toMillis(theirs.get(15, TimeUnit.SECONDS) - start);
            assertTrue(woken < 100, name + ": Redisson's waiter woke " + woken + " ms after the module's release");

            RLock held = plain.getLock(key);
            held.lock();
            Future<Long> mine = POOL.submit(() -> {
                RLock l = locks.getLock(key);
                assertTrue(l.tryLock(10, 10, TimeUnit.SECONDS));
                long at = System.nanoTime();
                l.unlock();
                return at;
            });
            Thread.sleep(300);
            start = System.nanoTime();
            held.unlock();
            woken = TimeUnit.NANOSECONDS.toMillis(mine.get(15, TimeUnit.SECONDS) - start);
            assertTrue(woken < 100, name + ": the library's waiter got it " + woken + " ms after Redisson's release");
        }
    }

    @Test
    void wrapRefusesAClusterWithANodeWithoutTheModule() {
        RedisServer bare = cluster.nodes.get(2);
        bare.call("MODULE", "UNLOAD", "lock");
        try {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> ModuleLocks.wrap(redisson));
            assertTrue(e.getMessage().contains(String.valueOf(bare.port)), e.getMessage());
            assertTrue(e.getMessage().contains("not loaded"), e.getMessage());
        } finally {
            bare.call("MODULE", "LOAD", RedisServer.modulePath());
        }
        ModuleLocks.wrap(redisson);
    }
}
