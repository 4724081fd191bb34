package io.github.redislock.redisson.support;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * A master and a replica (both with the module) and one Sentinel monitoring them (quorum 1),
 * on loopback, as the project's Rust tests start theirs ({@code $REDIS_SERVER ... --sentinel});
 * killed by {@link #close}.
 */
public final class Sentinels implements AutoCloseable {

    public final RedisServer master;
    public final RedisServer replica;
    private final Process sentinel;
    public final int sentinelPort;
    private final Path dir;

    private Sentinels(RedisServer master, RedisServer replica, Process sentinel, int sentinelPort, Path dir) {
        this.master = master;
        this.replica = replica;
        this.sentinel = sentinel;
        this.sentinelPort = sentinelPort;
        this.dir = dir;
    }

    public static Sentinels start() {
        RedisServer master = RedisServer.start();
        RedisServer replica = null;
        try {
            replica = RedisServer.start("--replicaof", "127.0.0.1", String.valueOf(master.port));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            try (Resp r = master.connect()) {
                while (!"1".equals(r.info("replication", "connected_slaves"))) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("the replica did not connect");
                    }
                    RedisServer.sleep(20);
                }
            }
            Path dir = Files.createTempDirectory("redis-lock-sentinel-");
            int port = RedisServer.freePort();
            Path conf = dir.resolve("sentinel.conf");
            Files.write(conf, String.join("\n", List.of(
                    "port " + port, "bind 127.0.0.1", "daemonize no", "dir " + dir,
                    "logfile " + dir.resolve("sentinel.log"),
                    "sentinel resolve-hostnames no", "sentinel announce-ip 127.0.0.1",
                    "sentinel monitor mymaster 127.0.0.1 " + master.port + " 1",
                    "sentinel down-after-milliseconds mymaster 1000",
                    "sentinel failover-timeout mymaster 3000", "")).getBytes(StandardCharsets.UTF_8));
            Process p = new ProcessBuilder(RedisServer.binary(), conf.toString(), "--sentinel")
                    .redirectErrorStream(true).redirectOutput(new File("/dev/null")).start();
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (true) {
                try (Resp r = new Resp(port, 2000)) {
                    @SuppressWarnings("unchecked")
                    List<Object> replicas = (List<Object>) r.call("SENTINEL", "REPLICAS", "mymaster");
                    if (!replicas.isEmpty()) {
                        break;
                    }
                } catch (RuntimeException e) {
                    // not up yet
                }
                if (!p.isAlive() || System.nanoTime() > deadline) {
                    p.destroyForcibly();
                    throw new IllegalStateException("sentinel did not come up");
                }
                RedisServer.sleep(50);
            }
            return new Sentinels(master, replica, p, port, dir);
        } catch (IOException e) {
            master.close();
            if (replica != null) {
                replica.close();
            }
            throw new UncheckedIOException(e);
        } catch (RuntimeException e) {
            master.close();
            if (replica != null) {
                replica.close();
            }
            throw e;
        }
    }

    /** A Redisson client in Sentinel mode, {@code slavesSyncTimeout} as given. */
    public RedissonClient client(long slavesSyncTimeoutMs, int retryAttempts) {
        Config config = Clients.base();
        config.setLockWatchdogTimeout(1000);
        config.setSlavesSyncTimeout(slavesSyncTimeoutMs);
        config.useSentinelServers().setMasterName("mymaster").addSentinelAddress("redis://127.0.0.1:" + sentinelPort)
                .setCheckSentinelsList(false).setRetryAttempts(retryAttempts)
                .setMasterConnectionMinimumIdleSize(2).setSlaveConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionMinimumIdleSize(1);
        return Redisson.create(config);
    }

    @Override
    public void close() {
        sentinel.destroyForcibly();
        try {
            sentinel.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        replica.close();
        master.close();
        for (File f : dir.toFile().listFiles()) {
            f.delete();
        }
        dir.toFile().delete();
    }
}
