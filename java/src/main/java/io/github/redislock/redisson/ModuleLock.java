package io.github.redislock.redisson;

import java.util.concurrent.TimeUnit;

import org.redisson.RedissonLock;
import org.redisson.api.RFuture;

/**
 * Redisson's {@code RLock} on the module: {@code LOCK.ACQUIRE} (waiting in the server's FIFO
 * queue) and {@code LOCK.RELEASE}, on Redisson's own hash, owners and watchdog, so that
 * unmodified Redisson clients share it both ways. Everything not about acquiring or releasing
 * ({@code isLocked}, {@code getHoldCount}, {@code remainTimeToLive}, expiry, the watchdog's
 * renewal) is Redisson's own code, unchanged.
 */
public class ModuleLock extends RedissonLock {

    private final LockCore core;

    ModuleLock(Backend backend, String name) {
        super(backend.executor, name);
        this.core = new LockCore(backend, getRawName(), LockKind.LOCK, false, new Holds());
    }

    /** Redisson's protected lock state, for {@link LockCore}. */
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

    /** Redisson 3.x's release hook (its timeout is an int there). */
    protected RFuture<Boolean> unlockInnerAsync(long threadId, String requestId, int timeout) {
        return core.releaseOnce(threadId);
    }

    /** Redisson 4.x's release hook (its timeout is a long there). */
    protected RFuture<Boolean> unlockInnerAsync(long threadId, String requestId, long timeout) {
        return core.releaseOnce(threadId);
    }

    @Override
    public RFuture<Boolean> forceUnlockAsync() {
        return core.forceAsync();
    }
}
