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
        String field = owner + kind.fieldSuffix;
        long lease = leaseMs > 0 ? leaseMs : backend.watchdogLeaseMs;
        Waiting.Step<Reply> step = new Waiting.Step<Reply>() {
            /** The owner's known count when the wait in flight was sent (what a lost reply is judged by). */
            private volatile Integer beforeWait;

            @Override
            public RFuture<Reply> send(CommandAsyncExecutor executor, long wait, Object[] keepArgs) {
                List<Object> args = new ArrayList<>(11);
                args.add(name);
                args.add(owner);
                args.add(lease);
                if (wait > 0) {
                    args.add("WAIT");
                    args.add(wait);
                    for (Object a : keepArgs) {
                        args.add(a);
                    }
                    beforeWait = backend.holds.known(name, field);
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
                        return sendAcquire(executor, field, args, wait > 0, sync.length > 0, threadId);
                    });
                } else {
                    reply = sendAcquire(executor, field, args, wait > 0, false, threadId);
                }
                return new CompletableFutureWrapper<>(reply);
            }

            @Override
            public String key() {
                return name;
            }

            @Override
            public String owner() {
                return owner;
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
            public CompletionStage<?> giveBack(Reply reply) {
                // Only the hold this call was granted: a re-entry given back leaves the
                // caller's earlier holds, and their watchdog, as they were.
                return adopted ? unlockAsync(threadId) : releaseOnce(threadId);
            }

            @Override
            public CompletionStage<?> giveBackIfGranted(Throwable why) {
                // The count before the wait is known (a try proved it, or the library has
                // counted since), so one hold more is the wait's grant.
                Integer before = beforeWait;
                return backend.counted.readBack(name, field).thenCompose(after -> {
                    backend.holds.set(name, field, (int) Math.min(Integer.MAX_VALUE, after));
                    if (before != null && after == before + 1) {
                        return releaseOnce(threadId);
                    }
                    if (before == null || after > before) {
                        Waiting.LOG.warn("a wait for {} lost its reply and the hold count {} cannot tell whether it was"
                                + " granted; it is left to its lease", name, after, why);
                    }
                    return CompletableFuture.completedFuture(null);
                });
            }

            @Override
            public boolean tryFirst() {
                // A try proves the count; once known, a wait is sent at once.
                return backend.holds.known(name, field) == null;
            }
        };
        return backend.waiting.run(step, waitMs, answer);
    }

    /**
     * One acquire: a wait through Redisson's executor (the slice's), a try through {@link
     * Counted}; the known count follows the reply (a grant one more; a refusal proves none).
     */
    private CompletionStage<Reply> sendAcquire(CommandAsyncExecutor executor, String field, List<Object> args,
                                               boolean waits, boolean synced, long threadId) {
        Object[] params = args.toArray();
        CompletionStage<Reply> reply;
        if (withToken) {
            CompletionStage<List<Object>> f = waits
                    ? executor.writeAsync(name, LongCodec.INSTANCE, kind.acquireWithToken, params)
                    : backend.counted.tryAcquire(name, field, LongCodec.INSTANCE, kind.acquireWithToken, params,
                            synced ? backend.sync.timeoutMs() : 0, () -> giveBackOne(threadId));
            reply = f.thenApply(list -> {
                long first = ((Number) list.get(0)).longValue();
                long second = ((Number) list.get(1)).longValue();
                return first == -1 ? new Reply(true, -1, second) : new Reply(false, first, null);
            });
        } else {
            CompletionStage<Long> f = waits
                    ? executor.writeAsync(name, LongCodec.INSTANCE, kind.acquire, params)
                    : backend.counted.tryAcquire(name, field, LongCodec.INSTANCE, kind.acquire, params,
                            synced ? backend.sync.timeoutMs() : 0, () -> giveBackOne(threadId));
            reply = f.thenApply(ttl -> ttl == null ? new Reply(true, -1, null) : new Reply(false, ttl, null));
        }
        return reply.thenApply(r -> {
            if (r.granted) {
                backend.holds.granted(name, field);
            } else {
                backend.holds.set(name, field, 0);
            }
            return r;
        });
    }

    private void giveBackOne(long threadId) {
        releaseOnce(threadId).whenComplete((v, e) -> Waiting.logGiveBackFailure(name, e));
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

    /**
     * One hold released: null not held, false holds left, true the last one went. Sent
     * through {@link Counted}: a lost reply is read back, and the release sent again only
     * when it certainly did not run.
     */
    RFuture<Boolean> releaseOnce(long threadId) {
        String owner = backend.owner(threadId);
        String field = owner + kind.fieldSuffix;
        Object[] args = kind.releaseTakesLease ? new Object[] {name, owner, host.releaseLeaseMs()} : new Object[] {name, owner};
        CompletionStage<Boolean> f = backend.counted.release(name, field, kind.release, args).thenApply(last -> {
            backend.holds.released(name, field, last);
            return last;
        });
        return new CompletableFutureWrapper<>(f);
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
        RFuture<Boolean> f = backend.executor.writeAsync(name, StringCodec.INSTANCE, Commands.FORCE, name);
        return new CompletableFutureWrapper<>(f.thenApply(deleted -> {
            backend.holds.forced(name);
            return deleted;
        }));
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
