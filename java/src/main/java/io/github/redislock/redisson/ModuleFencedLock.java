package io.github.redislock.redisson;

import java.util.concurrent.TimeUnit;

import org.redisson.RedissonFencedLock;
import org.redisson.api.RFuture;

/**
 * Redisson's {@code RFencedLock} on the module: every grant (re-entry included, as Redisson's
 * script {@code INCR}s) is {@code LOCK.ACQUIRE ... TOKEN}, on Redisson's token counter.
 *
 * <p>Two deliberate differences: tokens are large and node-distinct ({@code seq x 16 + node},
 * about 3.7e15), not 1, 2, 3, so that they never go backwards, not even after a failover;
 * and {@code tryLockAndGetToken()} tries once, as its Javadoc says, where Redisson's waits
 * without end.
 */
public class ModuleFencedLock extends RedissonFencedLock {

    private final LockCore core;

    ModuleFencedLock(Backend backend, String name) {
        super(backend.executor, name);
        this.core = new LockCore(backend, getRawName(), LockKind.LOCK, true, new Holds());
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

    // ---- tokens

    @Override
    public RFuture<Long> lockAndGetTokenAsync() {
        return core.tokenAsync(Waiting.FOREVER, -1, Thread.currentThread().getId());
    }

    @Override
    public Long lockAndGetToken(long leaseTime, TimeUnit unit) {
        return get(lockAndGetTokenAsync(leaseTime, unit));
    }

    @Override
    public RFuture<Long> lockAndGetTokenAsync(long leaseTime, TimeUnit unit) {
        return core.tokenAsync(Waiting.FOREVER, LockCore.toMs(leaseTime, unit), Thread.currentThread().getId());
    }

    @Override
    public RFuture<Long> tryLockAndGetTokenAsync() {
        return core.tokenAsync(Waiting.NO_WAIT, -1, Thread.currentThread().getId());
    }

    @Override
    public RFuture<Long> tryLockAndGetTokenAsync(long waitTime, TimeUnit unit) {
        return tryLockAndGetTokenAsync(waitTime, -1, unit);
    }

    @Override
    public RFuture<Long> tryLockAndGetTokenAsync(long waitTime, long leaseTime, TimeUnit unit) {
        return tryLockAndGetTokenAsync(waitTime, leaseTime, unit, Thread.currentThread().getId());
    }

    @Override
    public RFuture<Long> tryLockAndGetTokenAsync(long waitTime, long leaseTime, TimeUnit unit, long threadId) {
        long waitMs = waitTime < 0 ? Waiting.FOREVER : LockCore.waitMs(waitTime, unit);
        return core.tokenAsync(waitMs, LockCore.toMs(leaseTime, unit), threadId);
    }

    // ---- RLock

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

    @Override
    public RFuture<Boolean> forceUnlockAsync() {
        return core.forceAsync();
    }
}
