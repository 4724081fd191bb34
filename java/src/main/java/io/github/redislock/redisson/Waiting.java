package io.github.redislock.redisson;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.redisson.api.RFuture;
import org.redisson.api.options.ObjectParams;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.config.DelayStrategy;
import org.redisson.config.MasterSlaveServersConfig;
import org.redisson.config.ReadMode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one place where this library waits on the server: every kind's {@code ... WAIT ms}
 * goes through {@link #run}, which slices the wait, gives each slice its own response
 * timeout, and undoes a grant that arrives for a caller who is gone.
 *
 * <p><b>Why slices.</b> Redisson's executor sees a {@code LOCK.*} wait as an ordinary
 * command: its response timeout is {@code timeout} (3 s by default) and, while it is
 * outstanding, the connection's PING check queues a PING behind it and closes the connection
 * when that PING has no answer within {@code max(timeout, pingConnectionInterval / 2)}
 * (15 s by default). Closing the connection drops the server-side waiter. So one server-side
 * wait lasts at most {@link #sliceMs} (two thirds of that PING timeout), is sent through a
 * copy of the executor whose response timeout is the slice plus Redisson's own timeout, and
 * is never resent: a longer wait is several slices. Today each slice queues again at the
 * back; when the module keeps a waiter's place for a grace period (issue 24) the next slice
 * takes its old place and nothing here changes but the command's arguments.
 *
 * <p><b>Why give back.</b> A caller can stop waiting while a slice is in flight: an
 * interrupt, a cancelled future, an abandoned sync call. The slice is left to finish (it
 * ends within one slice) and, if its reply is a grant, the grant is given back at once
 * ({@link Step#giveBack}), so no lock or permit is left held by nobody. A slice whose reply
 * never came (response timeout, connection lost) may have been granted: {@link
 * Step#giveBackIfGranted} finds out (for the locks, by the owner's known hold count) and
 * undoes it. When the module gains a cancel command
 * (issue 24), {@code giveBackIfGranted} becomes that command and a cancel no longer waits
 * for the slice to end.
 */
final class Waiting {

    static final Logger LOG = LoggerFactory.getLogger(Waiting.class);

    /** One kind's wait: how to send it, what a grant looks like, how to undo one. */
    interface Step<R> {
        /**
         * Sends the command once through {@code executor}: with {@code WAIT waitMs} when
         * {@code waitMs > 0}, as a plain try when {@code waitMs == NO_WAIT}.
         */
        RFuture<R> send(CommandAsyncExecutor executor, long waitMs);

        /** Whether {@code reply} granted what was asked. */
        boolean granted(R reply);

        /**
         * A grant is about to reach its caller: start what holding it needs (Redisson's
         * watchdog). {@link #giveBack} undoes this too, should the caller be gone after all.
         */
        default void adopt(R reply) {
        }

        /** A grant nobody will receive: undo it (release the hold, give the permits back). */
        void giveBack(R reply);

        /**
         * A waiting command whose outcome is unknown (no reply came): undo its grant if it
         * was made. Kinds that cannot tell (semaphores, until waiter ids exist) log it.
         */
        void giveBackIfGranted(Throwable why);

        /**
         * Whether a plain try must come before the first wait. The locks need it while the
         * owner's hold count is not known ({@link Holds}): the try (through {@link Counted})
         * learns it, and a known count is what {@link #giveBackIfGranted} judges by (one hold
         * more after a lost wait reply came from the wait).
         */
        boolean tryFirst();
    }

    /** {@link Step#send}'s {@code waitMs} for a plain try. */
    static final long NO_WAIT = 0;

    /** A wait without end (Redisson's {@code lock()}, {@code acquire()}, {@code await()}). */
    static final long FOREVER = -1;

    private final CommandAsyncExecutor executor;
    private final long sliceMs;
    private final long marginMs;
    private final int retryAttempts;
    private final DelayStrategy retryDelay;

    Waiting(CommandAsyncExecutor executor, long sliceOverrideMs) {
        this.executor = executor;
        MasterSlaveServersConfig config = executor.getServiceManager().getConfig();
        this.marginMs = Math.max(1000, config.getTimeout());
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
        CompletableFuture<T> result = new CompletableFuture<>();
        long deadline = waitMs < 0 ? Long.MAX_VALUE : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        Run<R, T> run = new Run<>(step, answer, result, deadline, waitMs == NO_WAIT);
        if (waitMs == NO_WAIT || step.tryFirst()) {
            run.attempt(executor, NO_WAIT);
        } else {
            run.nextSlice();
        }
        return result;
    }

    private final class Run<R, T> {
        private final Step<R> step;
        private final Function<R, T> answer;
        private final CompletableFuture<T> result;
        private final long deadline;
        private final boolean tryOnly;
        private int noSyncRetries;

        Run(Step<R> step, Function<R, T> answer, CompletableFuture<T> result, long deadline, boolean tryOnly) {
            this.step = step;
            this.answer = answer;
            this.result = result;
            this.deadline = deadline;
            this.tryOnly = tryOnly;
        }

        void attempt(CommandAsyncExecutor through, long waitMs) {
            RFuture<R> sent;
            try {
                sent = step.send(through, waitMs);
            } catch (RuntimeException e) {
                result.completeExceptionally(e);
                return;
            }
            sent.whenComplete((reply, error) -> {
                if (error != null) {
                    failed(error, waitMs);
                } else {
                    replied(reply);
                }
            });
        }

        private void replied(R reply) {
            boolean granted = step.granted(reply);
            if (result.isDone()) {
                if (granted) {
                    step.giveBack(reply);
                }
                return;
            }
            if (granted || tryOnly || remainingMs() <= 0) {
                if (granted) {
                    step.adopt(reply);
                }
                if (!result.complete(answer.apply(reply)) && granted) {
                    step.giveBack(reply);
                }
                return;
            }
            nextSlice();
        }

        private void failed(Throwable error, long waitMs) {
            if (Sync.isNoSync(error)) {
                // The module undid the grant its replicas did not acknowledge: nothing to
                // give back, and safe to ask again, as Redisson does after its own WAIT.
                if (noSyncRetries < retryAttempts && !result.isDone()) {
                    noSyncRetries++;
                    long delay = retryDelay.calcDelay(noSyncRetries).toMillis();
                    executor.getServiceManager().newTimeout(t -> attempt(executor, NO_WAIT), delay, TimeUnit.MILLISECONDS);
                    return;
                }
                result.completeExceptionally(Sync.noSyncedReplicas(error));
                return;
            }
            if (waitMs != NO_WAIT) {
                step.giveBackIfGranted(error);
            }
            result.completeExceptionally(error);
        }

        void nextSlice() {
            if (result.isDone()) {
                return;
            }
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
