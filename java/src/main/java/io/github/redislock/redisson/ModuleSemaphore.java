package io.github.redislock.redisson;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

import org.redisson.RedissonSemaphore;
import org.redisson.api.RFuture;
import org.redisson.client.codec.LongCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.misc.CompletableFutureWrapper;

/**
 * Redisson's {@code RSemaphore} on the module: {@code LOCK.SEMACQUIRE ... WAIT} waits in the
 * server's FIFO queue (a large request is not starved by small ones), and {@code
 * LOCK.SEMRELEASE} serves the head of that queue in the same event. The permits are
 * Redisson's string key, so unmodified Redisson clients share the semaphore both ways.
 */
public class ModuleSemaphore extends RedissonSemaphore {

    private final Backend backend;

    ModuleSemaphore(Backend backend, String name) {
        super(backend.executor, name);
        this.backend = backend;
    }

    private CompletableFuture<Boolean> take(int permits, long waitMs) {
        return take(permits, waitMs, Function.identity());
    }

    /** Takes {@code permits}, waiting up to {@code waitMs}; the future answers {@code answer}. */
    private <T> CompletableFuture<T> take(int permits, long waitMs, Function<Boolean, T> answer) {
        if (permits < 0) {
            throw new IllegalArgumentException("Permits amount can't be negative");
        }
        if (permits == 0) {
            return CompletableFuture.completedFuture(answer.apply(true));
        }
        String name = getRawName();
        return backend.waiting.run(new Waiting.OwnerlessStep<Boolean>(name) {
            @Override
            public RFuture<Boolean> send(CommandAsyncExecutor executor, long wait, Object[] keepArgs) {
                if (wait > 0) {
                    Object[] args = new Object[4 + keepArgs.length];
                    args[0] = name;
                    args[1] = permits;
                    args[2] = "WAIT";
                    args[3] = wait;
                    System.arraycopy(keepArgs, 0, args, 4, keepArgs.length);
                    return executor.writeAsync(name, LongCodec.INSTANCE, Commands.SEMACQUIRE, args);
                }
                return executor.writeAsync(name, LongCodec.INSTANCE, Commands.SEMACQUIRE, name, permits);
            }

            @Override
            public boolean granted(Boolean reply) {
                return Boolean.TRUE.equals(reply);
            }

            @Override
            public CompletionStage<?> giveBack(Boolean reply) {
                return releaseAsync(permits);
            }

            @Override
            public CompletionStage<?> giveBackCancelled(List<Object> grant) {
                // LOCK.CANCEL's [granted, n]: the permits this waiter id was granted.
                return releaseAsync(grant.isEmpty() ? permits : Integer.parseInt(grant.get(0).toString()));
            }
        }, waitMs, answer);
    }

    @Override
    public void acquire(int permits) throws InterruptedException {
        Waiting.await(backend.executor, take(permits, Waiting.FOREVER), true);
    }

    @Override
    public RFuture<Void> acquireAsync(int permits) {
        return new CompletableFutureWrapper<>(take(permits, Waiting.FOREVER, r -> (Void) null));
    }

    @Override
    public RFuture<Boolean> tryAcquireAsync(int permits) {
        return new CompletableFutureWrapper<>(take(permits, Waiting.NO_WAIT));
    }

    @Override
    public boolean tryAcquire(int permits, Duration waitTime) throws InterruptedException {
        return Waiting.await(backend.executor, take(permits, Math.max(0, waitTime.toMillis())), true);
    }

    @Override
    public RFuture<Boolean> tryAcquireAsync(int permits, Duration waitTime) {
        return new CompletableFutureWrapper<>(take(permits, Math.max(0, waitTime.toMillis())));
    }

    @Override
    public RFuture<Void> releaseAsync(int permits) {
        if (permits < 0) {
            throw new IllegalArgumentException("Permits amount can't be negative");
        }
        if (permits == 0) {
            return new CompletableFutureWrapper<>((Void) null);
        }
        String name = getRawName();
        RFuture<Long> f = backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.SEMRELEASE, name, permits);
        return new CompletableFutureWrapper<>(f.thenApply(n -> (Void) null));
    }

    @Override
    public RFuture<Boolean> trySetPermitsAsync(int permits) {
        String name = getRawName();
        return backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.SEMSET, name, permits);
    }

    @Override
    public RFuture<Boolean> trySetPermitsAsync(int permits, Duration timeToLive) {
        String name = getRawName();
        return backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.SEMSET, name, permits, "PX", timeToLive.toMillis());
    }

    @Override
    public RFuture<Void> addPermitsAsync(int permits) {
        String name = getRawName();
        RFuture<Long> f = backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.SEMADD, name, permits);
        return new CompletableFutureWrapper<>(f.thenApply(n -> (Void) null));
    }

    @Override
    public RFuture<Integer> drainPermitsAsync() {
        String name = getRawName();
        RFuture<Long> f = backend.executor.writeAsync(name, StringCodec.INSTANCE, Commands.SEMDRAIN, name);
        return new CompletableFutureWrapper<>(f.thenApply(Long::intValue));
    }
}
