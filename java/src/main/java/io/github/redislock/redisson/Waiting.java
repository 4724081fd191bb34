package io.github.redislock.redisson;

import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;
import java.util.function.Function;

import org.redisson.api.RFuture;
import org.redisson.api.options.ObjectParams;
import org.redisson.client.codec.StringCodec;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.config.DelayStrategy;
import org.redisson.config.MasterSlaveServersConfig;
import org.redisson.config.ReadMode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one place where this library waits on the server: every kind's {@code ... WAIT ms}
 * goes through {@link #run}, which slices the wait, keeps the waiter's place between slices,
 * gives each slice its own response timeout, and cancels a wait its caller gave up.
 *
 * <p><b>Why slices.</b> Redisson's executor sees a {@code LOCK.*} wait as an ordinary
 * command: its response timeout is {@code timeout} (3 s by default) and, while it is
 * outstanding, the connection's PING check queues a PING behind it and closes the connection
 * when that PING has no answer within {@code max(timeout, pingConnectionInterval / 2)}
 * (15 s by default). Closing the connection drops the server-side waiter. So one server-side
 * wait lasts at most {@link #sliceMs} (two thirds of that PING timeout), is sent through a
 * copy of the executor whose response timeout is the slice plus Redisson's own timeout, and
 * is never resent: a longer wait is several slices.
 *
 * <p><b>Why slices keep their place.</b> Every slice is sent with {@code KEEP} {@link
 * #keepMs} (5 s by default; {@link #KEEP_MS} says why): a slice that ends by its timeout
 * leaves its place kept, and the next slice, from
 * the same identity (the owner for the locks; for the semaphores, permits and latch a
 * {@code WAITER} id made for the one acquisition), takes it back. A newcomer that arrives
 * between two slices queues behind the slicing waiter (docs/waiting.md, the protocol).
 *
 * <p><b>Why cancel.</b> A caller can stop waiting while a slice is in flight or its place is
 * kept: an interrupt, a cancelled future, an abandoned sync call, the wait's own deadline.
 * Then {@code LOCK.CANCEL key identity} is sent: a blocked slice is answered {@code
 * CANCELLED} at once, a kept place is dropped, and a grant that came first is given back
 * ({@link Step#giveBack} for a grant the slice's reply carries; {@link Step#giveBackCancelled}
 * for one only the cancel's answer tells, when the slice's reply was lost). One grant is
 * given back once, never twice, and none is left held by nobody. A sync caller interrupted
 * returns only when this is decided ({@link #await}), so the same thread asking again is
 * never cancelled by its own earlier wait's cancel.
 */
final class Waiting {

    static final Logger LOG = LoggerFactory.getLogger(Waiting.class);

    /**
     * The least grace ({@code KEEP}) a slice asks for; {@link #keepMs} is this, or more when
     * Redisson's {@code timeout} is long.
     *
     * <p><b>Why the library sends it</b> rather than leave it to the server's {@code
     * lock.keep-place-ms} (5000 by default too): the grace must span this client's own piece
     * boundaries, which only the client knows (they follow Redisson's {@code timeout}), and a
     * server configured with a shorter grace, or 0 (keep none), for its other clients would
     * otherwise put a slicing waiter behind newcomers and forget the grants {@code LOCK.CANCEL}
     * must find.
     *
     * <p><b>What it must span.</b> (1) The gap between two slices of one wait: the next slice
     * is sent when the previous one's "not granted" reply arrives, at most Redisson's {@code
     * timeout} ({@link #marginMs}) after the slice ended on the server (a later reply counts as
     * lost), so the grace is that margin plus {@link #KEEP_ALLOWANCE_MS} for the next slice to
     * reach the server. (2) For the ownerless kinds, a grant whose reply was lost must still be
     * remembered when the cancel naming its waiter id arrives: the loss is noticed at the
     * slice's response timeout (Redisson's executor does not report a closed connection
     * earlier), up to the slice plus the margin after the grant. The grace spans that only
     * for a grant made in the slice's last seconds; a grant made earlier whose reply is lost
     * is forgotten before its cancel comes, and its permits stay taken (README, Limits).
     */
    static final long KEEP_MS = 5000;

    /** (1) above: the time the next slice, or a cancel, is allowed to reach the server. */
    static final long KEEP_ALLOWANCE_MS = 2000;

    /** One kind's wait: how to send it, what a grant looks like, how to undo one. */
    interface Step<R> {
        /**
         * Sends the command once through {@code executor}: with {@code WAIT waitMs} followed
         * by {@code keepArgs} ({@code KEEP grace} and, for the ownerless kinds, {@code WAITER
         * id}) when {@code waitMs > 0}; as a plain try, {@code keepArgs} empty, when {@code
         * waitMs == NO_WAIT}.
         */
        RFuture<R> send(CommandAsyncExecutor executor, long waitMs, Object[] keepArgs);

        /** The key the wait queues on (what {@code LOCK.CANCEL} names). */
        String key();

        /**
         * The owner that waits, for the locks; {@code null} for the ownerless kinds
         * (semaphore, permits, latch), whose every acquisition gets a waiter id of its own.
         */
        String owner();

        /** Whether {@code reply} granted what was asked. */
        boolean granted(R reply);

        /**
         * A grant is about to reach its caller: start what holding it needs (Redisson's
         * watchdog). {@link #giveBack} undoes this too, should the caller be gone after all.
         */
        default void adopt(R reply) {
        }

        /** A grant nobody will receive: undo it (release the hold, give the permits back). */
        CompletionStage<?> giveBack(R reply);

        /**
         * For the locks: a wait whose reply was lost (no reply came), after its cancel was
         * answered: undo its grant if it was made (judged by the owner's known hold count;
         * a cancel's {@code granted} says only that the owner holds, maybe from before).
         */
        default CompletionStage<?> giveBackIfGranted(Throwable why) {
            return CompletableFuture.completedFuture(null);
        }

        /**
         * For the ownerless kinds: {@code LOCK.CANCEL} answered {@code granted} for a wait
         * whose reply never came: give back what it names ({@code grant}, the answer after
         * {@code "granted"}: a permit count, leased permit ids, a latch's state).
         */
        default CompletionStage<?> giveBackCancelled(List<Object> grant) {
            return CompletableFuture.completedFuture(null);
        }

        /**
         * Whether a plain try must come before the first wait. The locks need it while the
         * owner's hold count is not known ({@link Holds}): the try (through {@link Counted})
         * learns it, and a known count is what {@link #giveBackIfGranted} judges by (one hold
         * more after a lost wait reply came from the wait).
         */
        boolean tryFirst();
    }

    /**
     * The semaphore's, the permits' and the latch's step: no owner (each acquisition waits
     * as a waiter id of its own) and no try before the wait (there is no count to learn).
     */
    abstract static class OwnerlessStep<R> implements Step<R> {
        private final String key;

        OwnerlessStep(String key) {
            this.key = key;
        }

        @Override
        public final String key() {
            return key;
        }

        @Override
        public final String owner() {
            return null;
        }

        @Override
        public final boolean tryFirst() {
            return false;
        }
    }

    /** {@link Step#send}'s {@code waitMs} for a plain try. */
    static final long NO_WAIT = 0;

    /** A wait without end (Redisson's {@code lock()}, {@code acquire()}, {@code await()}). */
    static final long FOREVER = -1;

    private static final Object[] NO_ARGS = new Object[0];

    private final CommandAsyncExecutor executor;
    private final long sliceMs;
    private final long marginMs;
    /** The grace every slice sends ({@link #KEEP_MS}): the gap between slices fits in it. */
    private final long keepMs;
    private final int retryAttempts;
    private final DelayStrategy retryDelay;

    Waiting(CommandAsyncExecutor executor, long sliceOverrideMs) {
        this.executor = executor;
        MasterSlaveServersConfig config = executor.getServiceManager().getConfig();
        this.marginMs = Math.max(1000, config.getTimeout());
        this.keepMs = Math.max(KEEP_MS, marginMs + KEEP_ALLOWANCE_MS);
        this.retryAttempts = config.getRetryAttempts();
        this.retryDelay = config.getRetryDelay();
        this.sliceMs = sliceOverrideMs > 0 ? sliceOverrideMs : defaultSliceMs(config);
    }

    /** Two thirds of Redisson's PING timeout; a minute when the PING check is off. */
    static long defaultSliceMs(MasterSlaveServersConfig config) {
        int ping = config.getPingConnectionInterval();
        if (ping <= 0) {
            return 60_000;
        }
        long pingTimeout = Math.max(config.getTimeout(), ping / 2);
        return Math.max(200, pingTimeout * 2 / 3);
    }

    long sliceMs() {
        return sliceMs;
    }

    /**
     * The future of a wait: completing or cancelling it from outside gives the wait up
     * (see the class comment); {@link #over} completes when nothing of it is left on the
     * server (no slice in flight, no place kept, a grant that came anyway given back).
     */
    static final class WaitFuture<T> extends CompletableFuture<T> {
        final CompletableFuture<Void> over = new CompletableFuture<>();
        /** How long {@link #await} waits for {@link #over} after an interrupt. */
        final long overBoundMs;

        WaitFuture(long overBoundMs) {
            this.overBoundMs = overBoundMs;
        }
    }

    /**
     * Waits up to {@code waitMs} ({@link #FOREVER}, or {@link #NO_WAIT} for one try) and
     * completes with the granting reply, or the last reply when time ran out. Completing or
     * cancelling the returned future from outside abandons the wait (see the class comment).
     */
    <R> CompletableFuture<R> run(Step<R> step, long waitMs) {
        return run(step, waitMs, Function.identity());
    }

    /**
     * {@link #run(Step, long)}, completing with {@code answer} of the last reply: the caller's
     * own future, so that a grant that cannot complete it (the caller cancelled it a moment
     * before) is given back.
     */
    <R, T> CompletableFuture<T> run(Step<R> step, long waitMs, Function<R, T> answer) {
        WaitFuture<T> result = new WaitFuture<>(sliceMs + 2 * marginMs);
        long deadline = waitMs < 0 ? Long.MAX_VALUE : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        Run<R, T> run = new Run<>(step, answer, result, deadline, waitMs == NO_WAIT);
        result.whenComplete((v, e) -> run.givenUp());
        if (waitMs == NO_WAIT || step.tryFirst()) {
            run.attempt(executor, NO_WAIT);
        } else {
            run.nextSlice();
        }
        return result;
    }

    /**
     * One wait. Its state is guarded by its monitor: the slice's reply, the caller giving up
     * and the cancel's answer can come on three threads at once.
     */
    private final class Run<R, T> {
        private final Step<R> step;
        private final Function<R, T> answer;
        private final WaitFuture<T> result;
        private final long deadline;
        private final boolean tryOnly;
        /** The identity the slices wait as and {@code LOCK.CANCEL} names. */
        private final String identity;
        private final Object[] keepArgs;
        private int noSyncRetries;
        /** A command is outstanding. */
        private boolean inFlight;
        /** A wait was sent since the last grant: a waiter or its kept place may be on the server. */
        private boolean placed;
        /** The result was completed (or is being) here; its completion is not a give-up. */
        private boolean settling;
        /** The caller gave up (completed the result from outside). */
        private boolean abandoned;
        /** The {@code LOCK.CANCEL} sent, once. */
        private CompletableFuture<List<Object>> cancel;

        Run(Step<R> step, Function<R, T> answer, WaitFuture<T> result, long deadline, boolean tryOnly) {
            this.step = step;
            this.answer = answer;
            this.result = result;
            this.deadline = deadline;
            this.tryOnly = tryOnly;
            String owner = step.owner();
            this.identity = owner != null ? owner : UUID.randomUUID().toString();
            this.keepArgs = owner != null
                    ? new Object[] {"KEEP", keepMs}
                    : new Object[] {"KEEP", keepMs, "WAITER", identity};
        }

        void attempt(CommandAsyncExecutor through, long waitMs) {
            RFuture<R> sent;
            synchronized (this) {
                if (result.isDone()) {
                    return;
                }
                inFlight = true;
                placed |= waitMs != NO_WAIT;
            }
            try {
                sent = step.send(through, waitMs, waitMs == NO_WAIT ? NO_ARGS : keepArgs);
            } catch (RuntimeException e) {
                synchronized (this) {
                    inFlight = false;
                }
                settleExceptionally(e);
                return;
            }
            sent.whenComplete((reply, error) -> outcome(reply, error, waitMs));
        }

        private synchronized void outcome(R reply, Throwable error, long waitMs) {
            inFlight = false;
            boolean granted = error == null && step.granted(reply);
            if (granted) {
                placed = false;
            }
            if (abandoned) {
                afterGivenUp(reply, error, granted, waitMs != NO_WAIT);
                return;
            }
            if (error != null) {
                failed(error, waitMs);
                return;
            }
            if (granted) {
                step.adopt(reply);
                settling = true;
                if (!result.complete(answer.apply(reply))) {
                    // The caller gave up a moment ago (its give-up waits for this monitor).
                    abandoned = true;
                    afterGivenUp(reply, null, true, waitMs != NO_WAIT);
                }
                return;
            }
            if (tryOnly || remainingMs() <= 0) {
                // Time is up: drop the place the last slice kept before answering, so that
                // the same owner asking again is not cancelled by this wait's late cancel.
                whenCancelled((grant, e) -> {
                    settle(reply);
                    result.over.complete(null);
                });
                return;
            }
            nextSlice();
        }

        private void failed(Throwable error, long waitMs) {
            if (Sync.isNoSync(error)) {
                // The module undid the grant its replicas did not acknowledge: nothing to
                // give back, and safe to ask again, as Redisson does after its own WAIT.
                if (noSyncRetries < retryAttempts) {
                    noSyncRetries++;
                    long delay = retryDelay.calcDelay(noSyncRetries).toMillis();
                    executor.getServiceManager().newTimeout(t -> attempt(executor, NO_WAIT), delay, TimeUnit.MILLISECONDS);
                    return;
                }
                Throwable refused = Sync.noSyncedReplicas(error);
                whenCancelled((grant, e) -> {
                    settleExceptionally(refused);
                    result.over.complete(null);
                });
                return;
            }
            if (waitMs == NO_WAIT) {
                // A try's lost reply is decided where it was sent ({@link Counted}).
                whenCancelled((grant, e) -> {
                    settleExceptionally(error);
                    result.over.complete(null);
                });
                return;
            }
            whenCancelled((grant, e) -> lostReply(error, grant, e).whenComplete((v, e2) -> {
                logGiveBackFailure(step.key(), e2);
                settleExceptionally(error);
                result.over.complete(null);
            }));
        }

        /** The caller completed the result from outside: cancel what is left of the wait. */
        synchronized void givenUp() {
            if (settling || abandoned) {
                return;
            }
            abandoned = true;
            if (inFlight) {
                // The slice's outcome decides, once the cancel (sent now) has answered.
                cancelIfPlaced();
                return;
            }
            // Between two slices, or waiting for a retry: a kept place, maybe.
            whenCancelled((grant, e) -> {
                if (grant != null && step.owner() == null) {
                    giveBackCancelled(grant);
                } else {
                    result.over.complete(null);
                }
            });
        }

        /**
         * A slice's outcome after the caller gave up: give back the grant it carries, or,
         * when its reply was lost, what the cancel says was granted.
         */
        private void afterGivenUp(R reply, Throwable error, boolean granted, boolean waited) {
            whenCancelled((grant, e) -> {
                CompletionStage<?> undo;
                if (granted) {
                    undo = step.giveBack(reply);
                } else if (error != null && waited) {
                    undo = lostReply(error, grant, e);
                } else {
                    undo = CompletableFuture.completedFuture(null);
                }
                undo.whenComplete((v, e2) -> {
                    logGiveBackFailure(step.key(), e2);
                    result.over.complete(null);
                });
            });
        }

        /** A wait whose reply never came (or was {@code CANCELLED}), its cancel answered. */
        private CompletionStage<?> lostReply(Throwable error, List<Object> grant, Throwable cancelError) {
            if (isCancelled(error)) {
                return CompletableFuture.completedFuture(null); // the cancel came first: no grant
            }
            if (step.owner() != null) {
                return step.giveBackIfGranted(error);
            }
            if (cancelError != null) {
                LOG.warn("a wait on {} lost its reply and its cancel failed; a grant it had stays taken", step.key(),
                        cancelError);
            }
            return grant != null ? step.giveBackCancelled(grant) : CompletableFuture.completedFuture(null);
        }

        private void giveBackCancelled(List<Object> grant) {
            step.giveBackCancelled(grant).whenComplete((v, e) -> {
                logGiveBackFailure(step.key(), e);
                result.over.complete(null);
            });
        }

        /**
         * Runs {@code then} once the cancel has answered, with what it says was granted
         * ({@code null}: nothing) or its error; at once when no place can be on the server.
         */
        private void whenCancelled(BiConsumer<List<Object>, Throwable> then) {
            CompletableFuture<List<Object>> c = cancelIfPlaced();
            if (c == null) {
                then.accept(null, null);
                return;
            }
            c.whenComplete((reply, e) -> {
                List<Object> grant = null;
                if (e == null && reply != null && !reply.isEmpty() && "granted".equals(String.valueOf(reply.get(0)))) {
                    grant = reply.subList(1, reply.size());
                }
                if (e != null) {
                    LOG.debug("LOCK.CANCEL {} {} failed", step.key(), identity, e);
                }
                synchronized (this) {
                    then.accept(grant, e);
                }
            });
        }

        private synchronized CompletableFuture<List<Object>> cancelIfPlaced() {
            if (cancel == null && placed) {
                placed = false;
                cancel = new CompletableFuture<>();
                RFuture<List<Object>> sent;
                try {
                    sent = executor.writeAsync(step.key(), StringCodec.INSTANCE, Commands.CANCEL, step.key(), identity);
                } catch (RuntimeException e) {
                    cancel.completeExceptionally(e);
                    return cancel;
                }
                CompletableFuture<List<Object>> c = cancel;
                sent.whenComplete((reply, e) -> {
                    if (e != null) {
                        c.completeExceptionally(e);
                    } else {
                        c.complete(reply);
                    }
                });
            }
            return cancel;
        }

        private synchronized void settle(R reply) {
            settling = true;
            result.complete(answer.apply(reply));
        }

        private synchronized void settleExceptionally(Throwable error) {
            settling = true;
            result.completeExceptionally(error);
        }

        void nextSlice() {
            long remaining = remainingMs();
            if (remaining <= 0) {
                // Only reached when the try already answered; a zero wait never slices.
                remaining = 1;
            }
            long slice = Math.min(remaining, sliceMs);
            attempt(executor.copy(new SliceParams((int) Math.min(Integer.MAX_VALUE, slice + marginMs))), slice);
        }

        private long remainingMs() {
            if (deadline == Long.MAX_VALUE) {
                return Long.MAX_VALUE;
            }
            return TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        }
    }

    /** Whether {@code error} is the module's {@code CANCELLED} answer to a cancelled wait. */
    static boolean isCancelled(Throwable error) {
        for (Throwable e = error; e != null; e = e.getCause()) {
            String message = e.getMessage();
            if (message != null && message.startsWith("CANCELLED")) {
                return true;
            }
            if (e.getCause() == e) {
                break;
            }
        }
        return false;
    }

    /** A slice's executor: its own response timeout, and no retry. */
    private static final class SliceParams implements ObjectParams {
        private final int timeout;

        SliceParams(int timeout) {
            this.timeout = timeout;
        }

        @Override
        public int getTimeout() {
            return timeout;
        }

        @Override
        public int getRetryAttempts() {
            return 0;
        }

        @Override
        public DelayStrategy getRetryDelay() {
            return null;
        }

        /** Redisson 4.x asks for it ({@code ObjectParams.getReadMode}); 3.x never calls it. */
        public ReadMode getReadMode() {
            return null;
        }
    }

    /**
     * A sync caller's wait for {@code future}: interruptible or not. An interrupt completes
     * {@code future} exceptionally, which abandons the wait behind it.
     */
    static <V> V await(CommandAsyncExecutor executor, CompletableFuture<V> future, boolean interruptibly)
            throws InterruptedException {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return future.get();
                } catch (InterruptedException e) {
                    if (interruptibly) {
                        future.completeExceptionally(e);
                        awaitOver(future);
                        throw e;
                    }
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw executor.convertException(e);
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * After an interrupt gave a wait up: returns once the wait is over on the server (its
     * cancel answered, a grant given back), so that the thread asking again is not cancelled
     * by it; bounded, and uninterruptible (the interrupt is already being reported).
     */
    private static void awaitOver(CompletableFuture<?> future) {
        if (!(future instanceof WaitFuture)) {
            return;
        }
        WaitFuture<?> wait = (WaitFuture<?>) future;
        boolean interrupted = false;
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(wait.overBoundMs);
        while (true) {
            try {
                wait.over.get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            } catch (ExecutionException | TimeoutException e) {
                break;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** {@link #await} for callers that cannot throw {@code InterruptedException}. */
    static <V> V awaitUninterruptibly(CommandAsyncExecutor executor, CompletableFuture<V> future) {
        try {
            return await(executor, future, false);
        } catch (InterruptedException e) {
            throw new IllegalStateException(e); // not thrown when not interruptible
        }
    }

    /** Logs a give-back that failed: the grant then ends with its lease. */
    static void logGiveBackFailure(String what, Throwable e) {
        if (e != null) {
            LOG.warn("could not give back {} after an abandoned wait; it ends with its lease", what, e);
        }
    }

    static RuntimeException unwrap(Throwable e) {
        Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
        return cause instanceof RuntimeException ? (RuntimeException) cause : new CompletionException(cause);
    }
}
