package io.github.redislock.redisson.support;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redis Cluster: three masters on loopback, each with the module, joined by
 * {@code redis-cli --cluster create} ({@code REDIS_CLI}, else redis-cli on PATH), as the
 * project's Rust tests build theirs; killed by {@link #close}.
 */
public final class RedisCluster implements AutoCloseable {

    public final List<RedisServer> nodes = new ArrayList<>();

    public static RedisCluster start(String... extra) {
        RedisCluster cluster = new RedisCluster();
        try {
            for (int i = 0; i < 3; i++) {
                List<String> args = new ArrayList<>(List.of("--cluster-enabled", "yes",
                        "--cluster-config-file", "nodes-" + i + ".conf",
                        "--cluster-port", String.valueOf(RedisServer.freePort()),
                        "--cluster-node-timeout", "5000"));
                args.addAll(List.of(extra));
                cluster.nodes.add(RedisServer.start(args.toArray(new String[0])));
            }
            List<String> cmd = new ArrayList<>(List.of(RedisServer.cli(), "--cluster", "create"));
            for (RedisServer n : cluster.nodes) {
                cmd.add("127.0.0.1:" + n.port);
            }
            cmd.add("--cluster-yes");
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new IllegalStateException("cluster create failed: " + out);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            for (RedisServer n : cluster.nodes) {
                while (true) {
                    String info = String.valueOf(n.call("CLUSTER", "INFO"));
                    if (info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
                            && info.contains("cluster_known_nodes:3")) {
                        break;
                    }
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("cluster not ok: " + info);
                    }
                    RedisServer.sleep(50);
                }
            }
            return cluster;
        } catch (IOException e) {
            cluster.close();
            throw new UncheckedIOException("run " + RedisServer.cli() + " (set REDIS_CLI)", e);
        } catch (InterruptedException e) {
            cluster.close();
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        } catch (RuntimeException e) {
            cluster.close();
            throw e;
        }
    }

    /** A Redisson client in cluster mode. */
    public RedissonClient client() {
        Config config = Clients.base();
        config.setLockWatchdogTimeout(1000);
        var cluster = config.useClusterServers().setScanInterval(1000)
                .setMasterConnectionMinimumIdleSize(2).setSlaveConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionMinimumIdleSize(1);
        for (RedisServer n : nodes) {
            cluster.addNodeAddress(n.address());
        }
        return Redisson.create(config);
    }

    /** The node serving {@code key}. */
    public RedisServer nodeFor(String key) {
        long slot = (Long) nodes.get(0).call("CLUSTER", "KEYSLOT", key);
        for (RedisServer n : nodes) {
            @SuppressWarnings("unchecked")
            List<Object> ranges = (List<Object>) n.call("CLUSTER", "SLOTS");
            for (Object r : ranges) {
                @SuppressWarnings("unchecked")
                List<Object> range = (List<Object>) r;
                @SuppressWarnings("unchecked")
                List<Object> master = (List<Object>) range.get(2);
                if ((Long) range.get(0) <= slot && slot <= (Long) range.get(1)) {
                    long port = (Long) master.get(1);
                    return nodes.stream().filter(x -> x.port == port).findFirst().orElseThrow();
                }
            }
        }
        throw new IllegalStateException("no node for " + key);
    }

    @Override
    public void close() {
        for (RedisServer n : nodes) {
            n.close();
        }
    }
}
