package io.github.redislock.redisson;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.redisson.Redisson;
import org.redisson.RedissonReactive;
import org.redisson.RedissonRx;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RCountDownLatchReactive;
import org.redisson.api.RCountDownLatchRx;
import org.redisson.api.RFencedLock;
import org.redisson.api.RFencedLockReactive;
import org.redisson.api.RFencedLockRx;
import org.redisson.api.RLock;
import org.redisson.api.RLockReactive;
import org.redisson.api.RLockRx;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RPermitExpirableSemaphoreReactive;
import org.redisson.api.RPermitExpirableSemaphoreRx;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RReadWriteLockReactive;
import org.redisson.api.RReadWriteLockRx;
import org.redisson.api.RSemaphore;
import org.redisson.api.RSemaphoreReactive;
import org.redisson.api.RSemaphoreRx;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.reactive.CommandReactiveExecutor;
import org.redisson.rx.CommandRxExecutor;
import org.redisson.connection.MasterSlaveEntry;
import org.redisson.reactive.ReactiveProxyBuilder;
import org.redisson.rx.RxProxyBuilder;

/**
 * Redisson's lock family backed by the redis-lock module, on Redisson's own interfaces.
 *
 * <pre>{@code
 * RedissonClient redisson = Redisson.create(config);
 * ModuleLocks locks = ModuleLocks.wrap(redisson);   // fails unless every master has the module
 * RLock lock = locks.getLock("order:42");           // was: redisson.getLock("order:42")
 * }</pre>
 *
 * <p>The objects are Redisson's own classes with their acquire and release paths replaced:
 * same keys, same owners ({@code <client id>:<thread id>}), same watchdog, so unmodified
 * Redisson clients and these objects share every lock both ways. Waits are the server's FIFO
 * waits ({@code ... WAIT ms}), not Redisson's subscribe-and-retry loop.
 */
public final class ModuleLocks {

    /** Settings beyond Redisson's own (which come from the client's {@code Config}). */
    public static final class Options {
        private Duration waitSlice;
        private boolean checkModule = true;

        public static Options defaults() {
            return new Options();
        }

        /**
         * The longest single server-side wait (default: two thirds of Redisson's PING
         * timeout, {@code max(timeout, pingConnectionInterval / 2)}, so 10 s; a minute when
         * {@code pingConnectionInterval} is 0). Longer waits are sent as several.
         */
        public Options waitSlice(Duration slice) {
            this.waitSlice = slice;
            return this;
        }

        /** Whether {@link #wrap} checks that every master has the module (default true). */
        public Options checkModule(boolean check) {
            this.checkModule = check;
            return this;
        }
    }

    private final Redisson redisson;
    private final Backend backend;
    private final long sliceOverrideMs;

    private ModuleLocks(Redisson redisson, long sliceOverrideMs) {
        this.redisson = redisson;
        this.sliceOverrideMs = sliceOverrideMs;
        this.backend = new Backend(redisson.getCommandExecutor(), sliceOverrideMs);
    }

    /** {@link #wrap(RedissonClient, Options)} with the defaults. */
    public static ModuleLocks wrap(RedissonClient redisson) {
        return wrap(redisson, Options.defaults());
    }

    /**
     * The module's lock family on {@code redisson}'s connections and configuration.
     *
     * @throws IllegalStateException when a master the client knows has no module loaded
     * @throws IllegalArgumentException when {@code redisson} is not Redisson's own client
     */
    public static ModuleLocks wrap(RedissonClient redisson, Options options) {
        if (!(redisson instanceof Redisson)) {
            throw new IllegalArgumentException("ModuleLocks.wrap needs the client Redisson.create(config) returns, not "
                    + (redisson == null ? "null" : redisson.getClass().getName()));
        }
        Redisson client = (Redisson) redisson;
        if (options.checkModule) {
            checkModule(client.getCommandExecutor());
        }
        long slice = options.waitSlice == null ? 0 : Math.max(1, options.waitSlice.toMillis());
        return new ModuleLocks(client, slice);
    }

    /**
     * Fails unless every master answers {@code COMMAND INFO lock.cancel} with the command: the
     * library's waits need {@code LOCK.CANCEL} and {@code KEEP} (module 0.2.0), so a node with an
     * older module is refused here rather than on its first wait.
     */
    private static void checkModule(CommandAsyncExecutor executor) {
        List<String> missing = new ArrayList<>();
        for (MasterSlaveEntry entry : executor.getConnectionManager().getEntrySet()) {
            List<Object> info = executor.get(executor.writeAsync(entry, StringCodec.INSTANCE, Commands.COMMAND_INFO, "lock.cancel"));
            if (info == null || info.isEmpty() || info.get(0) == null) {
                missing.add(String.valueOf(entry.getClient().getAddr()));
            }
        }
        if (!missing.isEmpty()) {
            throw new IllegalStateException("the redis-lock module is not loaded on " + String.join(", ", missing)
                    + " (or is older than 0.2.0: COMMAND INFO lock.cancel is empty there): load it on every node, e.g. "
                    + "'loadmodule /path/to/libredis_lock.so' in redis.conf, or use Redisson's own objects");
        }
    }

    /** Redisson's {@code RLock} ({@code redisson.getLock(name)}). */
    public RLock getLock(String name) {
        return new ModuleLock(backend, name);
    }

    /** Redisson's {@code RFencedLock}: tokens are large and node-distinct, see {@link ModuleFencedLock}. */
    public RFencedLock getFencedLock(String name) {
        return new ModuleFencedLock(backend, name);
    }

    /** Redisson's {@code RReadWriteLock}, fair. */
    public RReadWriteLock getReadWriteLock(String name) {
        return new ModuleReadWriteLock(backend, name);
    }

    /** Redisson's {@code RSemaphore}, fair. */
    public RSemaphore getSemaphore(String name) {
        return new ModuleSemaphore(backend, name);
    }

    /** Redisson's {@code RPermitExpirableSemaphore}, fair, leases on the server's clock. */
    public RPermitExpirableSemaphore getPermitExpirableSemaphore(String name) {
        return new ModulePermitExpirableSemaphore(backend, name);
    }

    /** Redisson's {@code RCountDownLatch}. */
    public RCountDownLatch getCountDownLatch(String name) {
        return new ModuleCountDownLatch(backend, name);
    }

    /** The same objects as Redisson's Reactive (Project Reactor) interfaces. */
    public Reactive reactive() {
        return new Reactive(((RedissonReactive) redisson.reactive()).getCommandExecutor(), sliceOverrideMs);
    }

    /** The same objects as Redisson's RxJava 3 interfaces. */
    public Rx rxJava() {
        return new Rx(((RedissonRx) redisson.rxJava()).getCommandExecutor(), sliceOverrideMs);
    }

    /** {@link ModuleLocks}' objects through Redisson's Reactive proxies. */
    public static final class Reactive {
        private final CommandReactiveExecutor executor;
        private final Backend backend;

        Reactive(CommandReactiveExecutor executor, long sliceOverrideMs) {
            this.executor = executor;
            this.backend = new Backend(executor, sliceOverrideMs);
        }

        public RLockReactive getLock(String name) {
            return ReactiveProxyBuilder.create(executor, new ModuleLock(backend, name), RLockReactive.class);
        }

        public RFencedLockReactive getFencedLock(String name) {
            return ReactiveProxyBuilder.create(executor, new ModuleFencedLock(backend, name), RFencedLockReactive.class);
        }

        public RReadWriteLockReactive getReadWriteLock(String name) {
            ModuleReadWriteLock lock = new ModuleReadWriteLock(backend, name);
            return new RReadWriteLockReactive() {
                @Override
                public RLockReactive readLock() {
                    return ReactiveProxyBuilder.create(executor, lock.readLock(), RLockReactive.class);
                }

                @Override
                public RLockReactive writeLock() {
                    return ReactiveProxyBuilder.create(executor, lock.writeLock(), RLockReactive.class);
                }
            };
        }

        public RSemaphoreReactive getSemaphore(String name) {
            return ReactiveProxyBuilder.create(executor, new ModuleSemaphore(backend, name), RSemaphoreReactive.class);
        }

        public RPermitExpirableSemaphoreReactive getPermitExpirableSemaphore(String name) {
            return ReactiveProxyBuilder.create(executor, new ModulePermitExpirableSemaphore(backend, name),
                    RPermitExpirableSemaphoreReactive.class);
        }

        public RCountDownLatchReactive getCountDownLatch(String name) {
            return ReactiveProxyBuilder.create(executor, new ModuleCountDownLatch(backend, name), RCountDownLatchReactive.class);
        }
    }

    /** {@link ModuleLocks}' objects through Redisson's RxJava proxies. */
    public static final class Rx {
        private final CommandRxExecutor executor;
        private final Backend backend;

        Rx(CommandRxExecutor executor, long sliceOverrideMs) {
            this.executor = executor;
            this.backend = new Backend(executor, sliceOverrideMs);
        }

        public RLockRx getLock(String name) {
            return RxProxyBuilder.create(executor, new ModuleLock(backend, name), RLockRx.class);
        }

        public RFencedLockRx getFencedLock(String name) {
            return RxProxyBuilder.create(executor, new ModuleFencedLock(backend, name), RFencedLockRx.class);
        }

        public RReadWriteLockRx getReadWriteLock(String name) {
            ModuleReadWriteLock lock = new ModuleReadWriteLock(backend, name);
            return new RReadWriteLockRx() {
                @Override
                public RLockRx readLock() {
                    return RxProxyBuilder.create(executor, lock.readLock(), RLockRx.class);
                }

                @Override
                public RLockRx writeLock() {
                    return RxProxyBuilder.create(executor, lock.writeLock(), RLockRx.class);
                }
            };
        }

        public RSemaphoreRx getSemaphore(String name) {
            return RxProxyBuilder.create(executor, new ModuleSemaphore(backend, name), RSemaphoreRx.class);
        }

        public RPermitExpirableSemaphoreRx getPermitExpirableSemaphore(String name) {
            return RxProxyBuilder.create(executor, new ModulePermitExpirableSemaphore(backend, name),
                    RPermitExpirableSemaphoreRx.class);
        }

        public RCountDownLatchRx getCountDownLatch(String name) {
            return RxProxyBuilder.create(executor, new ModuleCountDownLatch(backend, name), RCountDownLatchRx.class);
        }
    }
}
