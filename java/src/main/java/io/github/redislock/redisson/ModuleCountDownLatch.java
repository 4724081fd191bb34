package io.github.redislock.redisson;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.redisson.RedissonCountDownLatch;
import org.redisson.api.RFuture;
import org.redisson.client.codec.LongCodec;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.misc.CompletableFutureWrapper;

/**
 * Redisson's {@code RCountDownLatch} on the module: {@code LOCK.AWAIT} waits in the server
 * (no subscription, no polling) and {@code LOCK.COUNTDOWN} answers every waiter in the event
 * that opens the latch, and publishes Redisson's message for Redisson's own waiters.
 *
 * <p>One deliberate difference: a latch that expires ({@code LOCK.LATCHSET ... PX}) before it
 * opens makes a timed {@code await} answer {@code false} (it never reached zero); Redisson
 * reads the missing key as zero and answers {@code true}. An untimed {@code await()} returns,
 * as Redisson's does.
 */
public class ModuleCountDownLatch extends RedissonCountDownLatch {

    private static final long OPENED = 1;

    private final Backend backend;

    ModuleCountDownLatch(Backend backend, String name) {
        super(backend.executor, name);
        this.backend = backend;
    }

    /** Waits up to {@code waitMs}: 1 opened, 0 timed out, -1 expired. */
    private <T> CompletableFuture<T> waitOpen(long waitMs, Function<Long, T> answer) {
        String name = getRawName();
        return backend.waiting.run(new Waiting.OwnerlessStep<Long>(name) {
            @Override
            public RFuture<Long> send(CommandAsyncExecutor executor, long wait, Object[] keepArgs) {
                // LOCK.AWAIT's 0 is "forever": a try is the shortest real wait (and keeps no place).
                Object[] args = new Object[2 + keepArgs.length];
                args[0] = name;
                args[1] = Math.max(1, wait);
                System.arraycopy(keepArgs, 0, args, 2, keepArgs.length);
                return executor.writeAsync(name, LongCodec.INSTANCE, Commands.AWAIT, args);
            }

            @Override
            public boolean granted(Long reply) {
                return reply != 0;
            }

            @Override
            public CompletionStage<?> giveBack(Long reply) {
                // Read-only: an abandoned await holds nothing.
                return CompletableFuture.completedFuture(null);
            }
        }, waitMs, answer);
    }

    @Override
    public void await() throws InterruptedException {
        Waiting.await(backend.executor, waitOpen(Waiting.FOREVER, r -> r), true);
    }

    @Override
    public RFuture<Void> awaitAsync() {
        return new CompletableFutureWrapper<>(waitOpen(Waiting.FOREVER, r -> (Void) null));
    }

    @Override
    public boolean await(long time, TimeUnit unit) throws InterruptedException {
        return Waiting.await(backend.executor, waitOpen(Math.max(0, unit.toMillis(time)), r -> r == OPENED), true);
    }

    @Override
    public RFuture<Boolean> awaitAsync(long waitTime, TimeUnit unit) {
        return new CompletableFutureWrapper<>(waitOpen(Math.max(0, unit.toMillis(waitTime)), r -> r == OPENED));
    }

    @Override
    public RFuture<Void> countDownAsync() {
        String name = getRawName();
        RFuture<Long> f = backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.COUNTDOWN, name);
        return new CompletableFutureWrapper<>(f.thenApply(n -> (Void) null));
    }

    @Override
    public RFuture<Boolean> trySetCountAsync(long count) {
        if (count <= 0) {
            return super.trySetCountAsync(count); // an open latch: the module takes positive counts only
        }
        String name = getRawName();
        return backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.LATCHSET, name, count);
    }
}
