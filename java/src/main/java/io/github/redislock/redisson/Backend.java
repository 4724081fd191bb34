package io.github.redislock.redisson;

import org.redisson.command.CommandAsyncExecutor;

/**
 * What every object of one {@link ModuleLocks} shares: Redisson's executor (the client's
 * own, or a reactive/Rx one), the {@link Waiting} that slices waits on it, and the
 * {@link Sync} policy.
 */
final class Backend {

    final CommandAsyncExecutor executor;
    final Waiting waiting;
    final Sync sync;
    /** Redisson's {@code lockWatchdogTimeout}: the lease of a lock taken without one. */
    final long watchdogLeaseMs;
    /** Redisson's client id, the first half of every owner ({@code <id>:<thread id>}). */
    final String clientId;

    Backend(CommandAsyncExecutor executor, long sliceOverrideMs) {
        this.executor = executor;
        this.waiting = new Waiting(executor, sliceOverrideMs);
        this.sync = new Sync(executor);
        this.watchdogLeaseMs = executor.getServiceManager().getCfg().getLockWatchdogTimeout();
        this.clientId = executor.getServiceManager().getId();
    }

    /** Redisson's owner of a thread's holds: {@code <client id>:<thread id>}. */
    String owner(long threadId) {
        return clientId + ":" + threadId;
    }
}
