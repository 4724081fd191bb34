package io.github.redislock.redisson;

import org.redisson.RedissonReadWriteLock;
import org.redisson.api.RLock;

/**
 * Redisson's {@code RReadWriteLock} on the module: a fair read-write lock (one FIFO queue for
 * readers and writers, no writer starved) on Redisson's exact layout.
 */
public class ModuleReadWriteLock extends RedissonReadWriteLock {

    private final Backend backend;

    ModuleReadWriteLock(Backend backend, String name) {
        super(backend.executor, name);
        this.backend = backend;
    }

    @Override
    public RLock readLock() {
        return new ModuleReadLock(backend, getName());
    }

    @Override
    public RLock writeLock() {
        return new ModuleWriteLock(backend, getName());
    }
}
