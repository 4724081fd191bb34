package io.github.redislock.redisson;

import java.util.concurrent.TimeUnit;

import org.redisson.RedissonReadLock;
import org.redisson.api.RFuture;

/**
 * the read lock of Redisson's {@code RReadWriteLock}: {@code LOCK.RACQUIRE} / {@code LOCK.RRELEASE},
 * on Redisson's hash and per-hold keys, so that unmodified Redisson clients share it both
 * ways. Readers and writers wait in one FIFO queue (Redisson's is not fair). Redisson's watchdog, {@code isLocked}, {@code forceUnlock} and the rest are
 * Redisson's own.
 */
public class ModuleReadLock extends RedissonReadLock {

    private final LockCore core;

    ModuleReadLock(Backend backend, String name) {
        super(backend.executor, name);
        this.core = new LockCore(backend, getRawName(), LockKind.READ, false, new Holds());
    }

    private final class Holds implements LockCore.Host {
        @Override
        public void granted(long threadId, long leaseMs) {
            if (leaseMs > 0) {
                internalLockLeaseTime = leaseMs;
            } else {
                scheduleExpirationRenewal(threadId);
            }
        }

        @Override
        public void released(Long threadId, Boolean result) {
            cancelExpirationRenewal(threadId, result);
        }

        @Override
        public long releaseLeaseMs() {
            return internalLockLeaseTime;
        }
    }

    @Override
    public void lock() {
        core.lockUninterruptibly(-1, null);
    }

    @Override
    public void lock(long leaseTime, TimeUnit unit) {
        core.lockUninterruptibly(leaseTime, unit);
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        core.lock(-1, null, true);
    }

    @Override
    public void lockInterruptibly(long leaseTime, TimeUnit unit) throws InterruptedException {
        core.lock(leaseTime, unit, true);
    }

    @Override
    public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
        return core.tryLock(waitTime, leaseTime, unit);
    }

    @Override
    public RFuture<Void> lockAsync(long leaseTime, TimeUnit unit, long threadId) {
        return core.lockAsync(leaseTime, unit, threadId);
    }

    @Override
    public RFuture<Boolean> tryLockAsync(long threadId) {
        return core.tryLockAsync(0, -1, null, threadId);
    }

    @Override
    public RFuture<Boolean> tryLockAsync(long waitTime, long leaseTime, TimeUnit unit, long threadId) {
        return core.tryLockAsync(waitTime, leaseTime, unit, threadId);
    }

    @Override
    public RFuture<Void> unlockAsync(long threadId) {
        return core.unlockAsync(threadId);
    }

    /** Redisson 3.x's release hook. */
    protected RFuture<Boolean> unlockInnerAsync(long threadId, String requestId, int timeout) {
        return core.releaseOnce(threadId);
    }

    /** Redisson 4.x's release hook. */
    protected RFuture<Boolean> unlockInnerAsync(long threadId, String requestId, long timeout) {
        return core.releaseOnce(threadId);
    }
}
