package io.github.redislock.redisson;

import java.util.List;

import org.redisson.client.protocol.RedisCommand;

/**
 * The three lock kinds and their commands: the plain lock (also fenced), the read hold
 * and the write hold of a read-write lock. {@link LockCore} does the rest the same way
 * for each.
 */
enum LockKind {
    /** {@code LOCK.ACQUIRE} / {@code LOCK.RELEASE}: RLock, RFencedLock. */
    LOCK(Commands.ACQUIRE, Commands.ACQUIRE_TOKEN, Commands.RELEASE, true, true, ""),
    /** {@code LOCK.RACQUIRE} / {@code LOCK.RRELEASE}: RReadWriteLock's read lock. */
    READ(Commands.RACQUIRE, null, Commands.RRELEASE, false, false, ""),
    /** {@code LOCK.WACQUIRE} / {@code LOCK.WRELEASE}: RReadWriteLock's write lock. */
    WRITE(Commands.WACQUIRE, Commands.WACQUIRE_TOKEN, Commands.WRELEASE, true, false, ":write");

    final RedisCommand<Long> acquire;
    final RedisCommand<List<Object>> acquireWithToken;
    final RedisCommand<Boolean> release;
    /** Whether the release takes the lease to keep when holds are left (Redisson's rule). */
    final boolean releaseTakesLease;
    /** Whether the acquire takes {@code SYNC numreplicas timeout-ms}. */
    final boolean takesSync;
    /** The hash field of a hold is the owner plus this (Redisson's write lock adds {@code :write}). */
    final String fieldSuffix;

    LockKind(RedisCommand<Long> acquire, RedisCommand<List<Object>> acquireWithToken, RedisCommand<Boolean> release,
             boolean releaseTakesLease, boolean takesSync, String fieldSuffix) {
        this.acquire = acquire;
        this.acquireWithToken = acquireWithToken;
        this.release = release;
        this.releaseTakesLease = releaseTakesLease;
        this.takesSync = takesSync;
        this.fieldSuffix = fieldSuffix;
    }
}
