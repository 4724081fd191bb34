package io.github.redislock.redisson;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.RedisCommands;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.command.NoSyncedSlavesException;
import org.redisson.config.Config;
import org.redisson.connection.MasterSlaveEntry;

/**
 * Redisson's synced lock writes, mapped onto the module's {@code SYNC numreplicas timeout-ms}.
 *
 * <p>With replicas (any configuration but a single server) Redisson follows each lock script
 * with {@code WAIT <replicas> slavesSyncTimeout} and, when {@code checkLockSyncedSlaves} is
 * on (the default), treats "no replica acknowledged" as a failed acquire: it undoes the grant
 * and tries again up to {@code retryAttempts} times. {@code SYNC 1 slavesSyncTimeout} asks the
 * module for the same thing inside the server, in one round trip, for hand-offs too, and
 * fail-closed: the module undoes the grant itself and answers {@code NOSYNC}, which
 * {@link Waiting} retries as Redisson does. Only {@code LOCK.ACQUIRE} takes {@code SYNC};
 * the module offers it for no other kind yet.
 */
final class Sync {

    private static final Object[] NONE = new Object[0];

    private final CommandAsyncExecutor executor;
    private final boolean enabled;
    private final long timeoutMs;

    Sync(CommandAsyncExecutor executor) {
        this.executor = executor;
        Config cfg = executor.getServiceManager().getCfg();
        this.enabled = !cfg.isSingleConfig() && cfg.isCheckLockSyncedSlaves();
        this.timeoutMs = cfg.getSlavesSyncTimeout();
    }

    /** The {@code SYNC} arguments for a grant of {@code key}: none when no replica is known. */
    CompletionStage<Object[]> args(String key) {
        if (!enabled) {
            return CompletableFuture.completedFuture(NONE);
        }
        MasterSlaveEntry entry = executor.getConnectionManager().getEntry(key);
        if (entry == null) {
            return CompletableFuture.completedFuture(NONE);
        }
        int replicas = entry.getAvailableSlaves();
        if (replicas >= 0) {
            return CompletableFuture.completedFuture(forReplicas(replicas));
        }
        // Unknown, as Redisson's own entry says: ask the master, and tell the entry, as
        // Redisson's synced eval does.
        CompletionStage<Map<String, String>> info =
                executor.writeAsync(entry, StringCodec.INSTANCE, RedisCommands.INFO_REPLICATION);
        return info.thenApply(map -> {
            int n = Integer.parseInt(map.getOrDefault("connected_slaves", "0"));
            entry.setAvailableSlaves(n);
            return forReplicas(n);
        });
    }

    private Object[] forReplicas(int replicas) {
        return replicas > 0 ? new Object[] {"SYNC", 1, timeoutMs} : NONE;
    }

    /** How long a synced grant may wait for a replica ({@code slavesSyncTimeout}). */
    long timeoutMs() {
        return timeoutMs;
    }

    /** Whether {@code e} is the module's {@code NOSYNC} (the grant was undone). */
    static boolean isNoSync(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String message = t.getMessage();
            if (message != null && message.startsWith("NOSYNC")) {
                return true;
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return false;
    }

    /** Redisson's own exception for a grant no replica acknowledged. */
    static NoSyncedSlavesException noSyncedReplicas(Throwable e) {
        NoSyncedSlavesException ex = new NoSyncedSlavesException(
                "None of slaves were synced (the module undid the grant). "
                        + "Try to increase slavesSyncTimeout setting or set checkLockSyncedSlaves = false.");
        ex.initCause(e);
        return ex;
    }
}
