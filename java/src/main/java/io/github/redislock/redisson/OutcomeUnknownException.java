package io.github.redislock.redisson;

import org.redisson.client.RedisException;

/**
 * A command that changes a hold count lost its reply, and reading the count back could not
 * prove what became of it (or proved that it did not run and could not be sent again
 * safely). The message says what is known; the holds in question end with their lease.
 * Thrown (as Redisson's own errors are) from the call that sent the command.
 */
public class OutcomeUnknownException extends RedisException {

    private static final long serialVersionUID = 1L;

    private final String lockName;

    OutcomeUnknownException(String lockName, String what, Throwable cause) {
        super(lockName + ": " + what, cause);
        this.lockName = lockName;
    }

    /** The lock (Redisson's raw name) the command was for. */
    public String getLockName() {
        return lockName;
    }
}
