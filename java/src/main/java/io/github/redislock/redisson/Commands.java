package io.github.redislock.redisson;

import java.util.List;

import org.redisson.client.protocol.RedisCommand;
import org.redisson.client.protocol.convertor.BooleanReplayConvertor;
import org.redisson.client.protocol.convertor.Convertor;
import org.redisson.client.protocol.decoder.MultiDecoder;
import org.redisson.client.protocol.decoder.ObjectListReplayDecoder;

/**
 * The module's commands as Redisson command objects, sent through Redisson's own executor
 * the way Redisson sends {@code BF.*} and {@code JSON.*}.
 *
 * <p>Every one of them is {@linkplain ModuleCommand#isNoRetry() never resent} after it was
 * written: a resent {@code LOCK.ACQUIRE} that had run would count a re-entry twice, a resent
 * {@code LOCK.RELEASE} would release a hold its caller still has. Redisson still retries
 * what certainly did not run (no connection yet, {@code MOVED}, {@code READONLY}).
 */
final class Commands {

    private Commands() {
    }

    /** A module command: Redisson's command object, never resent once written. */
    static final class ModuleCommand<R> extends RedisCommand<R> {

        ModuleCommand(String name) {
            super(name);
        }

        ModuleCommand(String name, Convertor<R> convertor) {
            super(name, convertor);
        }

        ModuleCommand(String name, MultiDecoder<R> decoder) {
            super(name, decoder);
        }

        @Override
        public boolean isNoRetry() {
            return true;
        }
    }

    /** nil: granted; integer: the holder's remaining lease. */
    static final RedisCommand<Long> ACQUIRE = new ModuleCommand<>("LOCK.ACQUIRE");

    /** With {@code TOKEN}: {@code [-1, token]} granted, {@code [pttl, -1]} not. */
    static final RedisCommand<List<Object>> ACQUIRE_TOKEN =
            new ModuleCommand<>("LOCK.ACQUIRE", new ObjectListReplayDecoder<Object>());

    static final RedisCommand<Long> RACQUIRE = new ModuleCommand<>("LOCK.RACQUIRE");
    static final RedisCommand<Long> WACQUIRE = new ModuleCommand<>("LOCK.WACQUIRE");
    static final RedisCommand<List<Object>> WACQUIRE_TOKEN =
            new ModuleCommand<>("LOCK.WACQUIRE", new ObjectListReplayDecoder<Object>());

    /** nil: not held; 0: holds left; 1: the last hold went. */
    static final RedisCommand<Boolean> RELEASE = new ModuleCommand<>("LOCK.RELEASE", new BooleanReplayConvertor());
    static final RedisCommand<Boolean> RRELEASE = new ModuleCommand<>("LOCK.RRELEASE", new BooleanReplayConvertor());
    static final RedisCommand<Boolean> WRELEASE = new ModuleCommand<>("LOCK.WRELEASE", new BooleanReplayConvertor());
    static final RedisCommand<Boolean> FORCE = new ModuleCommand<>("LOCK.FORCE", new BooleanReplayConvertor());

    /** 1 taken, 0 not. */
    static final RedisCommand<Boolean> SEMACQUIRE = new ModuleCommand<>("LOCK.SEMACQUIRE", new BooleanReplayConvertor());
    /** The count after the release. */
    static final RedisCommand<Long> SEMRELEASE = new ModuleCommand<>("LOCK.SEMRELEASE");
    static final RedisCommand<Boolean> SEMSET = new ModuleCommand<>("LOCK.SEMSET", new BooleanReplayConvertor());
    static final RedisCommand<Long> SEMADD = new ModuleCommand<>("LOCK.SEMADD");
    static final RedisCommand<Long> SEMDRAIN = new ModuleCommand<>("LOCK.SEMDRAIN");

    /** The new permit ids, or nil. */
    static final RedisCommand<List<Object>> PERMITACQUIRE =
            new ModuleCommand<>("LOCK.PERMITACQUIRE", new ObjectListReplayDecoder<Object>());
    /** How many permits went back; an error naming an id that is not live. */
    static final RedisCommand<Long> PERMITRELEASE = new ModuleCommand<>("LOCK.PERMITRELEASE");
    static final RedisCommand<Boolean> PERMITRENEW = new ModuleCommand<>("LOCK.PERMITRENEW", new BooleanReplayConvertor());

    static final RedisCommand<Boolean> LATCHSET = new ModuleCommand<>("LOCK.LATCHSET", new BooleanReplayConvertor());
    static final RedisCommand<Long> COUNTDOWN = new ModuleCommand<>("LOCK.COUNTDOWN");
    /** 1 opened, 0 timed out, -1 the latch expired. Read-only: nothing to give back. */
    static final RedisCommand<Long> AWAIT = new RedisCommand<>("LOCK.AWAIT");

    /**
     * {@code LOCK.CANCEL key owner-or-waiter-id}: {@code [cancelled]}, {@code [none]}, or
     * {@code [granted, ...what was granted]} (docs/waiting.md).
     */
    static final RedisCommand<List<Object>> CANCEL =
            new ModuleCommand<>("LOCK.CANCEL", new ObjectListReplayDecoder<Object>());

    /** {@code COMMAND INFO <command>}: {@code [nil]} where the module (or that command) is missing. */
    static final RedisCommand<List<Object>> COMMAND_INFO =
            new RedisCommand<>("COMMAND", "INFO", new ObjectListReplayDecoder<Object>());

    /** {@code CLIENT ID}: the server's id of the connection it is sent on. */
    static final RedisCommand<Long> CLIENT_ID = new RedisCommand<>("CLIENT", "ID");

    /** {@code CLIENT KILL ID id}: how many were killed (0: already gone). */
    static final RedisCommand<Long> CLIENT_KILL = new RedisCommand<>("CLIENT", "KILL");

    /** {@code HGET key field} as a number: a hold count read back (0 when absent). */
    static final RedisCommand<Long> HGET_COUNT = new RedisCommand<>("HGET", new Convertor<Long>() {
        @Override
        public Long convert(Object obj) {
            return obj == null ? 0L : Long.valueOf(obj.toString());
        }
    });
}
