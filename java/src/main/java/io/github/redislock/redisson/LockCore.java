package io.github.redislock.redisson;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.redisson.api.RFuture;
import org.redisson.client.codec.LongCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.misc.CompletableFutureWrapper;

/**
 * What the four lock classes ({@link ModuleLock}, {@link ModuleFencedLock},
 * {@link ModuleReadLock}, {@link ModuleWriteLock}) do the same way: acquire through
 * {@link Waiting}, release with one module command, force. Each class extends the Redisson
 * class it replaces (so {@code RLock}, {@code isLocked}, {@code getHoldCount}, the watchdog,
 * {@code RedissonMultiLock} and the reactive views keep working) and hands its acquire and
 * release methods to one of these; the {@link Host} reaches the Redisson members that only a
 * subclass may touch.
 */
final class LockCore {

    /** The lock object's protected Redisson members, as its own subclass reaches them. */
    interface Host {
        /** A grant was received: start Redisson's watchdog, or remember the lease. */
        void granted(long threadId, long leaseMs);

        /** A hold was released (or given back): Redisson's {@code cancelExpirationRenewal}. */
        void released(Long threadId, Boolean result);

        /** The lease a release leaves to the holds that remain (Redisson's {@code internalLockLeaseTime}). */
        long releaseLeaseMs();
    }

    /** An acquire's answer: granted (with its fencing token), or the holder's remaining lease. */
    static final class Reply {
        final boolean granted;
        final long ttl;
        final Long token;

        Reply(boolean granted, long ttl, Long token) {
            this.granted = granted;
            this.ttl = ttl;
            this.token = token;
        }
    }

    private final Backend backend;
    private final String name;
    private final LockKind kind;
    private final boolean withToken;
    private final Host host;

    LockCore(Backend backend, String name, LockKind kind, boolean withToken, Host host) {
        this.backend = backend;
        this.name = name;
        this.kind = kind;
        this.withToken = withToken;
        this.host = host;
    }

    // ---- acquire

    /**
     * Acquires for {@code threadId}, waiting up to {@code waitMs} ({@link Waiting#FOREVER},
     * or {@link Waiting#NO_WAIT}), with {@code leaseMs} ({@code <= 0}: the watchdog's).
     * Cancelling the result abandons the wait; a grant that comes anyway is given back.
     */
    CompletableFuture<Reply> acquire(long waitMs, long leaseMs, long threadId) {
        return acquire(waitMs, leaseMs, threadId, r -> r);
    }

    /** {@link #acquire(long, long, long)}, answering {@code answer} of the reply. */
    <T> CompletableFuture<T> acquire(long waitMs, long leaseMs, long threadId, Function<Reply, T> answer) {
        String owner = backend.owner(threadId);
        long lease = leaseMs > 0 ? leaseMs : backend.watchdogLeaseMs;
        Waiting.Step<Reply> step = new Waiting.Step<Reply>() {
            @Override
            public RFuture<Reply> send(CommandAsyncExecutor executor, long wait) {
                List<Object> args = new ArrayList<>(9);
                args.add(name);
                args.add(owner);
                args.add(lease);
                if (wait > 0) {
                    args.add("WAIT");
                    args.add(wait);
                }
                if (withToken) {
                    args.add("TOKEN");
                }
                CompletionStage<Reply> reply;
                if (kind.takesSync) {
                    reply = backend.sync.args(name).thenCompose(sync -> {
                        for (Object a : sync) {
                            args.add(a);
                        }
                        return sendAcquire(executor, args);
                    });
                } else {
                    reply = sendAcquire(executor, args);
                }
                return new CompletableFutureWrapper<>(reply);
            }

            @Override
            public boolean granted(Reply reply) {
                return reply.granted;
            }

            /** Whether the watchdog was started for this grant (then giving it back stops it). */
            private volatile boolean adopted;

            @Override
            public void adopt(Reply reply) {
                adopted = true;
                host.granted(threadId, leaseMs);
            }

            @Override
            public void giveBack(Reply reply) {
                // Only the hold this call was granted: a re-entry given back leaves the
                // caller's earlier holds, and their watchdog, as they were.
                RFuture<?> undo = adopted ? unlockAsync(threadId) : releaseOnce(threadId);
                undo.whenComplete((v, e) -> Waiting.logGiveBackFailure(name, e));
            }

            @Override
            public void giveBackIfGranted(Throwable why) {
                // The try before the wait found the owner holding nothing of this kind, so
                // any hold now is the wait's grant.
                CompletionStage<Long> count = backend.executor.writeAsync(name, LongCodec.INSTANCE,
                        Commands.HGET_COUNT, name, owner + kind.fieldSuffix);
                count.thenCompose(n -> n != null && n > 0 ? releaseOnce(threadId) : CompletableFuture.completedFuture(null))
                        .whenComplete((v, e) -> Waiting.logGiveBackFailure(name, e));
            }

            @Override
            public boolean tryFirst() {
                return true;
            }
        };
        return backend.waiting.run(step, waitMs, answer);
    }

    private CompletionStage<Reply> sendAcquire(CommandAsyncExecutor executor, List<Object> args) {
        if (withToken) {
            RFuture<List<Object>> f = executor.writeAsync(name, LongCodec.INSTANCE, kind.acquireWithToken, args.toArray());
            return f.thenApply(list -> {
                long first = ((Number) list.get(0)).longValue();
                long second = ((Number) list.get(1)).longValue();
                return first == -1 ? new Reply(true, -1, second) : new Reply(false, first, null);
            });
        }
        RFuture<Long> f = executor.writeAsync(name, LongCodec.INSTANCE, kind.acquire, args.toArray());
        return f.thenApply(ttl -> ttl == null ? new Reply(true, -1, null) : new Reply(false, ttl, null));
    }

    // ---- Redisson's acquire methods, on top of acquire()

    void lock(long leaseTime, TimeUnit unit, boolean interruptibly) throws InterruptedException {
        long threadId = Thread.currentThread().getId();
        Waiting.await(backend.executor, acquire(Waiting.FOREVER, toMs(leaseTime, unit), threadId), interruptibly);
    }

    void lockUninterruptibly(long leaseTime, TimeUnit unit) {
        long threadId = Thread.currentThread().getId();
        Waiting.awaitUninterruptibly(backend.executor, acquire(Waiting.FOREVER, toMs(leaseTime, unit), threadId));
    }

    boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
        long threadId = Thread.currentThread().getId();
        Reply reply = Waiting.await(backend.executor, acquire(waitMs(waitTime, unit), toMs(leaseTime, unit), threadId), true);
        return reply.granted;
    }

    RFuture<Void> lockAsync(long leaseTime, TimeUnit unit, long threadId) {
        return new CompletableFutureWrapper<>(acquire(Waiting.FOREVER, toMs(leaseTime, unit), threadId, r -> (Void) null));
    }

    RFuture<Boolean> tryLockAsync(long waitTime, long leaseTime, TimeUnit unit, long threadId) {
        return new CompletableFutureWrapper<>(acquire(waitMs(waitTime, unit), toMs(leaseTime, unit), threadId, r -> r.granted));
    }

    /** The fencing token of a grant, or null (fenced lock). */
    RFuture<Long> tokenAsync(long waitMs, long leaseMs, long threadId) {
        return new CompletableFutureWrapper<>(acquire(waitMs, leaseMs, threadId, r -> r.granted ? r.token : null));
    }

    // ---- release

    /** One hold released: null not held, false holds left, true the last one went. */
    RFuture<Boolean> releaseOnce(long threadId) {
        String owner = backend.owner(threadId);
        if (kind.releaseTakesLease) {
            return backend.executor.writeAsync(name, LongCodec.INSTANCE, kind.release, name, owner, host.releaseLeaseMs());
        }
        return backend.executor.writeAsync(name, LongCodec.INSTANCE, kind.release, name, owner);
    }

    /** Redisson's {@code unlockAsync(threadId)}: IllegalMonitorStateException when not held. */
    RFuture<Void> unlockAsync(long threadId) {
        CompletionStage<Void> f = releaseOnce(threadId).handle((res, e) -> {
            host.released(threadId, res);
            if (e != null) {
                throw e instanceof CompletionException ? (CompletionException) e : new CompletionException(e);
            }
            if (res == null) {
                throw new CompletionException(new IllegalMonitorStateException(
                        "attempt to unlock lock, not locked by current thread by node id: "
                                + backend.clientId + " thread-id: " + threadId));
            }
            return null;
        });
        return new CompletableFutureWrapper<>(f);
    }

    /** {@code LOCK.FORCE}: the lock is deleted whoever holds it, and handed on. */
    RFuture<Boolean> forceAsync() {
        host.released(null, null);
        return backend.executor.writeAsync(name, StringCodec.INSTANCE, Commands.FORCE, name);
    }

    // ---- units

    /** A lease in ms; {@code -1} (Redisson's "no lease": the watchdog) for {@code <= 0}. */
    static long toMs(long time, TimeUnit unit) {
        return time > 0 && unit != null ? unit.toMillis(time) : -1;
    }

    /** A {@code tryLock} wait in ms: a negative one tries once, as RedissonLock reads it. */
    static long waitMs(long time, TimeUnit unit) {
        return time <= 0 || unit == null ? Waiting.NO_WAIT : unit.toMillis(time);
    }
}
