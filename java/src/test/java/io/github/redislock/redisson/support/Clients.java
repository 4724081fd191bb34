package io.github.redislock.redisson.support;

import java.util.function.Consumer;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** Redisson clients for the tests: small thread pools, the test server's address. */
public final class Clients {

    private Clients() {
    }

    /** A client of {@code server} (single-server mode). */
    public static RedissonClient single(RedisServer server) {
        return single(server, c -> { });
    }

    /** A client of {@code server}, with {@code tweak} applied to its config last. */
    public static RedissonClient single(RedisServer server, Consumer<Config> tweak) {
        return single(server.address(), tweak);
    }

    /** A client of the server at {@code address} (a proxy's, say), with {@code tweak} applied last. */
    public static RedissonClient single(String address, Consumer<Config> tweak) {
        Config config = base();
        config.useSingleServer()
                .setAddress(address)
                .setConnectionMinimumIdleSize(2)
                .setConnectionPoolSize(64)
                .setSubscriptionConnectionMinimumIdleSize(1);
        tweak.accept(config);
        return Redisson.create(config);
    }

    /** Redisson's config with the tests' thread pools. */
    public static Config base() {
        Config config = new Config();
        config.setNettyThreads(8);
        config.setThreads(4);
        return config;
    }
}
