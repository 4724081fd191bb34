package io.github.redislock.redisson;

import org.redisson.command.CommandAsyncExecutor;

/**
 * What every object of one {@link ModuleLocks} shares: Redisson's executor (the client's
 * own, or a reactive/Rx one), the {@link Waiting} that slices waits on it, the
 * {@link Sync} policy, and the known hold counts ({@link Holds}, {@link Counted}).
 */
final class Backend {

    final CommandAsyncExecutor executor;
    final Waiting waiting;
    final Sync sync;
    /** The hold counts known for this client's owners (shared with its Reactive and Rx views). */
    final Holds holds;
    /** How hold-changing commands that do not wait are sent and their lost replies decided. */
    final Counted counted;
    /** Redisson's {@code lockWatchdogTimeout}: the lease of a lock taken without one. */
    final long watchdogLeaseMs;
    /** Redisson's client id, the first half of every owner ({@code <id>:<thread id>}). */
    final String clientId;

    Backend(CommandAsyncExecutor executor, long sliceOverrideMs) {
        this.executor = executor;
        this.waiting = new Waiting(executor, sliceOverrideMs);
        this.sync = new Sync(executor);
        this.holds = Holds.of(executor.getServiceManager());
        this.counted = new Counted(executor, holds);
        this.watchdogLeaseMs = executor.getServiceManager().getCfg().getLockWatchdogTimeout();
        this.clientId = executor.getServiceManager().getId();
    }

    /** Redisson's owner of a thread's holds: {@code <client id>:<thread id>}. */
    String owner(long threadId) {
        return clientId + ":" + threadId;
    }
}
