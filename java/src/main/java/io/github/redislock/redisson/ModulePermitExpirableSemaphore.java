package io.github.redislock.redisson;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.redisson.RedissonPermitExpirableSemaphore;
import org.redisson.api.RFuture;
import org.redisson.client.RedisException;
import org.redisson.client.codec.LongCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.misc.CompletableFutureWrapper;

/**
 * Redisson's {@code RPermitExpirableSemaphore} on the module: {@code LOCK.PERMITACQUIRE}
 * waits in the server's FIFO queue, leases run on the server's clock and a leased permit
 * comes back at its deadline even when its holder died, and a release serves the queue in the
 * same event. Permit ids are Redisson's (32 hex characters, the same sorted set), so
 * unmodified Redisson clients share the semaphore both ways.
 */
public class ModulePermitExpirableSemaphore extends RedissonPermitExpirableSemaphore {

    private final Backend backend;

    ModulePermitExpirableSemaphore(Backend backend, String name) {
        super(backend.executor, name);
        this.backend = backend;
    }

    /**
     * Takes {@code permits} leased for {@code leaseMs} ({@code <= 0}: no lease), waiting up to
     * {@code waitMs}: the new ids, or an empty list.
     */
    private <T> CompletableFuture<T> take(int permits, long waitMs, long leaseMs, Function<List<String>, T> answer) {
        if (permits < 0) {
            throw new IllegalArgumentException("Permits amount can't be negative");
        }
        if (permits == 0) {
            return CompletableFuture.completedFuture(answer.apply(Collections.<String>emptyList()));
        }
        String name = getRawName();
        return backend.waiting.run(new Waiting.OwnerlessStep<List<String>>(name) {
            @Override
            public RFuture<List<String>> send(CommandAsyncExecutor executor, long wait, Object[] keepArgs) {
                List<Object> args = new ArrayList<>(6);
                args.add(name);
                args.add(permits);
                if (leaseMs > 0) {
                    args.add("LEASE");
                    args.add(leaseMs);
                }
                if (wait > 0) {
                    args.add("WAIT");
                    args.add(wait);
                    Collections.addAll(args, keepArgs);
                }
                RFuture<List<Object>> f = executor.writeAsync(name, StringCodec.INSTANCE, Commands.PERMITACQUIRE, args.toArray());
                return new CompletableFutureWrapper<>(f.thenApply(ModulePermitExpirableSemaphore::ids));
            }

            @Override
            public boolean granted(List<String> reply) {
                return !reply.isEmpty();
            }

            @Override
            public CompletionStage<?> giveBack(List<String> reply) {
                return tryReleaseAsync(reply);
            }

            @Override
            public CompletionStage<?> giveBackCancelled(List<Object> grant) {
                // LOCK.CANCEL's [granted, id...]: the permits this waiter id was granted.
                return tryReleaseAsync(ids(grant));
            }
        }, waitMs, answer);
    }

    private static List<String> ids(List<Object> reply) {
        if (reply == null) {
            return Collections.emptyList();
        }
        List<String> ids = new ArrayList<>(reply.size());
        for (Object id : reply) {
            ids.add(id.toString());
        }
        return ids;
    }

    private static String first(List<String> ids) {
        return ids.isEmpty() ? null : ids.get(0);
    }

    private static long leaseMs(long leaseTime, TimeUnit unit) {
        return leaseTime > 0 && unit != null ? unit.toMillis(leaseTime) : -1;
    }

    private static long waitMs(long waitTime, TimeUnit unit) {
        return waitTime > 0 && unit != null ? unit.toMillis(waitTime) : Waiting.NO_WAIT;
    }

    // ---- acquire: wait without end

    @Override
    public List<String> acquire(int permits, long leaseTime, TimeUnit timeUnit) throws InterruptedException {
        return Waiting.await(backend.executor, take(permits, Waiting.FOREVER, leaseMs(leaseTime, timeUnit), ids -> ids), true);
    }

    @Override
    public RFuture<String> acquireAsync() {
        return acquireAsync(-1, TimeUnit.MILLISECONDS);
    }

    @Override
    public RFuture<String> acquireAsync(long leaseTime, TimeUnit timeUnit) {
        return new CompletableFutureWrapper<>(take(1, Waiting.FOREVER, leaseMs(leaseTime, timeUnit),
                ModulePermitExpirableSemaphore::first));
    }

    @Override
    public RFuture<List<String>> acquireAsync(int permits, long leaseTime, TimeUnit timeUnit) {
        return new CompletableFutureWrapper<>(take(permits, Waiting.FOREVER, leaseMs(leaseTime, timeUnit), ids -> ids));
    }

    // ---- tryAcquire: once, or within a wait

    @Override
    public String tryAcquire() {
        return first(tryAcquire(1));
    }

    @Override
    public List<String> tryAcquire(int permits) {
        return get(tryAcquireAsync(permits));
    }

    @Override
    public RFuture<String> tryAcquireAsync() {
        return new CompletableFutureWrapper<>(take(1, Waiting.NO_WAIT, -1, ModulePermitExpirableSemaphore::first));
    }

    @Override
    public RFuture<List<String>> tryAcquireAsync(int permits) {
        return new CompletableFutureWrapper<>(take(permits, Waiting.NO_WAIT, -1, ids -> ids));
    }

    @Override
    public RFuture<String> tryAcquireAsync(long waitTime, TimeUnit unit) {
        return tryAcquireAsync(waitTime, -1, unit);
    }

    @Override
    public RFuture<String> tryAcquireAsync(long waitTime, long leaseTime, TimeUnit unit) {
        return new CompletableFutureWrapper<>(take(1, waitMs(waitTime, unit), leaseMs(leaseTime, unit),
                ModulePermitExpirableSemaphore::first));
    }

    @Override
    public List<String> tryAcquire(int permits, long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
        return Waiting.await(backend.executor,
                take(permits, waitMs(waitTime, unit), leaseMs(leaseTime, unit), ids -> ids), true);
    }

    @Override
    public RFuture<List<String>> tryAcquireAsync(int permits, long waitTime, long leaseTime, TimeUnit timeUnit) {
        return new CompletableFutureWrapper<>(take(permits, waitMs(waitTime, timeUnit), leaseMs(leaseTime, timeUnit), ids -> ids));
    }

    // ---- release, renew, set

    @Override
    public RFuture<Boolean> tryReleaseAsync(String permitId) {
        if (permitId == null) {
            throw new IllegalArgumentException("permitId can't be null");
        }
        return new CompletableFutureWrapper<>(releaseIds(Collections.singletonList(permitId)).thenApply(n -> n == 1));
    }

    @Override
    public RFuture<Integer> tryReleaseAsync(List<String> permitsIds) {
        if (permitsIds == null || permitsIds.isEmpty()) {
            throw new IllegalArgumentException("permitIds can't be null or empty");
        }
        return new CompletableFutureWrapper<>(releaseIds(permitsIds));
    }

    /**
     * {@code LOCK.PERMITRELEASE}: how many went back. The module refuses the whole call (and
     * releases nothing) when an id is not a live permit, which is Redisson's answer 0.
     */
    private CompletionStage<Integer> releaseIds(List<String> ids) {
        String name = getRawName();
        List<Object> args = new ArrayList<>(ids.size() + 1);
        args.add(name);
        args.addAll(ids);
        RFuture<Long> f = backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.PERMITRELEASE, args.toArray());
        return f.handle((n, e) -> {
            if (e == null) {
                return n.intValue();
            }
            Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
            if (cause instanceof RedisException && String.valueOf(cause.getMessage()).contains("is not held")) {
                return 0;
            }
            throw new CompletionException(cause);
        });
    }

    @Override
    public RFuture<Boolean> updateLeaseTimeAsync(String permitId, long leaseTime, TimeUnit unit) {
        String name = getRawName();
        return backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.PERMITRENEW, name, permitId, unit.toMillis(leaseTime));
    }

    @Override
    public RFuture<Boolean> trySetPermitsAsync(int permits) {
        String name = getRawName();
        return backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.SEMSET, name, permits);
    }

    @Override
    public RFuture<Void> addPermitsAsync(int permits) {
        String name = getRawName();
        RFuture<Long> f = backend.executor.writeAsync(name, LongCodec.INSTANCE, Commands.SEMADD, name, permits);
        return new CompletableFutureWrapper<>(f.thenApply(n -> (Void) null));
    }
}
