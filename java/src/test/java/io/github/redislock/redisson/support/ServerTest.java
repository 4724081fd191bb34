package io.github.redislock.redisson.support;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import io.github.redislock.redisson.ModuleLocks;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * One server with the module per test class; a Redisson client and this library's
 * {@link ModuleLocks} on it; {@code FLUSHALL} before each test. Extra clients a test makes
 * with {@link #client} are shut down after it.
 */
public abstract class ServerTest {

    /** Redisson's watchdog lease in these tests: it renews every third of it. */
    protected static final long WATCHDOG_MS = 1000;

    /** Longer than three watchdog leases: a lock still held then was renewed. */
    protected static final long PAST_THREE_LEASES_MS = 3 * WATCHDOG_MS + 300;

    protected static RedisServer server;
    protected static RedissonClient redisson;
    protected static ModuleLocks locks;

    private final List<RedissonClient> extra = new ArrayList<>();
    private final List<ExecutorService> pools = new ArrayList<>();

    @BeforeAll
    static void startServer() {
        server = RedisServer.start();
        redisson = Clients.single(server, c -> c.setLockWatchdogTimeout(WATCHDOG_MS));
        locks = ModuleLocks.wrap(redisson);
    }

    @AfterAll
    static void stopServer() {
        if (redisson != null) {
            redisson.shutdown();
        }
        if (server != null) {
            server.close();
        }
    }

    @BeforeEach
    void flush() {
        server.call("FLUSHALL");
    }

    @AfterEach
    void closeExtras() {
        for (ExecutorService pool : pools) {
            pool.shutdownNow();
            try {
                pool.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        for (RedissonClient c : extra) {
            c.shutdown();
        }
    }

    /** Another Redisson client of the server, shut down after the test. */
    protected RedissonClient client() {
        return client(c -> c.setLockWatchdogTimeout(WATCHDOG_MS));
    }

    protected RedissonClient client(Consumer<Config> tweak) {
        RedissonClient c = Clients.single(server, tweak);
        extra.add(c);
        return c;
    }

    /** A thread pool, shut down after the test. */
    protected ExecutorService pool(int threads) {
        ExecutorService p = Executors.newFixedThreadPool(threads);
        pools.add(p);
        return p;
    }
}
