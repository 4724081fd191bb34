package io.github.redislock.redisson;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

import io.netty.util.AttributeKey;
import org.redisson.api.RFuture;
import org.redisson.client.RedisClient;
import org.redisson.client.RedisConnection;
import org.redisson.client.RedisException;
import org.redisson.client.RedisReadonlyException;
import org.redisson.client.RedisRedirectException;
import org.redisson.client.RedisRetryException;
import org.redisson.client.codec.Codec;
import org.redisson.client.codec.LongCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.RedisCommand;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.config.MasterSlaveServersConfig;
import org.redisson.connection.MasterSlaveEntry;

/**
 * Commands that change a hold count and do not wait (a lock's release, a try), sent so that a
 * lost reply is decided, never guessed: the Rust and Python clients' rule, on Redisson's
 * connections.
 *
 * <p><b>How.</b> The command goes out on a connection of Redisson's own pool for the key's
 * master, taken the way Redisson's executor takes one, whose server id ({@code CLIENT ID})
 * the library knows: asked once per connection, before its first command, and remembered on
 * the connection's channel. When the owner's count is not {@linkplain Holds known}, {@code
 * HGET} reads it in the same write as the command. When the reply is lost (the response
 * timeout, a closed connection), the connection is killed by id from another one ({@code
 * CLIENT KILL ID}: once that returns, the server has run all it read from it and reads
 * nothing more), then the count is read back: the old count - 1 (a release) or + 1 (an
 * acquire) means the command ran; the old count means it did not, and only then, fenced, a
 * release is sent again. Anything else is an {@link OutcomeUnknownException}, never an undo.
 *
 * <p>A refusal that proves nothing ran ({@code MOVED}, {@code ASK}, {@code READONLY},
 * {@code LOADING}, {@code TRYAGAIN}...) hands the command to Redisson's executor, which
 * follows redirects and retries those as it does for every command; a reply lost there is
 * read back too, but without a fence nothing is resent.
 */
final class Counted {

    /** The server id of a channel's connection ({@code CLIENT ID}), once asked. */
    private static final AttributeKey<Long> CLIENT_ID = AttributeKey.valueOf("io.github.redislock.client-id");

    /** {@link #CLIENT_ID} of a connection whose id cannot be asked. */
    private static final long NO_ID = -1;

    private final CommandAsyncExecutor executor;
    private final Holds holds;
    private final long timeoutMs;
    private final int retryAttempts;
    private final MasterSlaveServersConfig config;

    Counted(CommandAsyncExecutor executor, Holds holds) {
        this.executor = executor;
        this.holds = holds;
        this.config = executor.getServiceManager().getConfig();
        this.timeoutMs = config.getTimeout();
        this.retryAttempts = config.getRetryAttempts();
    }

    // ---- what a caller sends

    /**
     * A release of one of {@code field}'s holds of {@code name} ({@code LOCK.RELEASE} and its
     * kin: nil not held, 0 holds left, 1 the last went): its reply, or, when the reply was
     * lost, what reading back proves (resent once fenced when it did not run).
     */
    CompletionStage<Boolean> release(String name, String field, RedisCommand<Boolean> command, Object... args) {
        return release(name, field, command, args, 0);
    }

    private CompletionStage<Boolean> release(String name, String field, RedisCommand<Boolean> command, Object[] args,
                                             int attempt) {
        Integer known = holds.known(name, field);
        return send(name, field, known == null, LongCodec.INSTANCE, command, args, 0).thenCompose(sent -> {
            if (sent.lost == null) {
                return CompletableFuture.completedFuture(sent.reply);
            }
            Integer before = sent.learned != null ? sent.learned : known;
            return readBack(name, field).thenCompose(after -> {
                // The caller applies the answer to the known count (Holds.released).
                if (before != null && after == before - 1) {
                    return CompletableFuture.completedFuture(after == 0); // it ran
                }
                if (before != null && after == before.longValue()) {
                    if (before == 0) {
                        return CompletableFuture.completedFuture(null); // not held, ran or not
                    }
                    if (sent.fenced && attempt < retryAttempts) {
                        return retryLater(attempt, () -> release(name, field, command, args, attempt + 1));
                    }
                    throw new CompletionException(new OutcomeUnknownException(name, command.getName()
                            + " did not run (the hold count is still " + after + ") and "
                            + (sent.fenced ? "the retries are spent"
                            : "was not resent: its connection could not be fenced, so it could still run"), sent.lost));
                }
                if (after == 0) {
                    // Nothing is held: the release ran (the count was not known), or the
                    // holds ended otherwise (a lease, a force), as an unlock after them finds.
                    return CompletableFuture.completedFuture(before == null ? Boolean.TRUE : null);
                }
                holds.set(name, field, (int) Math.min(Integer.MAX_VALUE, after));
                throw new CompletionException(new OutcomeUnknownException(name, command.getName()
                        + "'s reply was lost, and the hold count " + after + " is "
                        + (before == null ? "all that is known" : "neither " + before + " nor " + (before - 1)), sent.lost));
            });
        });
    }

    /**
     * A plain try ({@code LOCK.ACQUIRE} without {@code WAIT}, and its kin): its reply; when
     * the reply was lost, a grant it made (the count went up by one) is given back with
     * {@code giveBackOne} (which finds the count known), and the caller gets the error either
     * way.
     */
    <T> CompletionStage<T> tryAcquire(String name, String field, Codec codec, RedisCommand<T> command, Object[] args,
                                      long extraTimeoutMs, Runnable giveBackOne) {
        Integer known = holds.known(name, field);
        return send(name, field, known == null, codec, command, args, extraTimeoutMs).thenCompose(sent -> {
            if (sent.lost == null) {
                return CompletableFuture.completedFuture(sent.reply);
            }
            Integer before = sent.learned != null ? sent.learned : known;
            return readBack(name, field).thenApply(after -> {
                holds.set(name, field, (int) Math.min(Integer.MAX_VALUE, after));
                if (before != null && after == before + 1) {
                    giveBackOne.run();
                    throw new CompletionException(new RedisException(name + ": " + command.getName()
                            + "'s reply was lost; it had been granted, and was given back", sent.lost));
                }
                if (after == 0 || (before != null && after == before.longValue())) {
                    throw new CompletionException(new RedisException(name + ": " + command.getName()
                            + "'s reply was lost; it took nothing", sent.lost));
                }
                throw new CompletionException(new OutcomeUnknownException(name, command.getName()
                        + "'s reply was lost, and the hold count " + after + " is "
                        + (before == null ? "all that is known" : "neither " + before + " nor " + (before + 1)), sent.lost));
            });
        });
    }

    /** The owner's count as the server has it now ({@code HGET}, which Redisson may resend: a read). */
    CompletionStage<Long> readBack(String name, String field) {
        return executor.writeAsync(name, StringCodec.INSTANCE, Commands.HGET_COUNT, name, field);
    }

    private <T> CompletionStage<T> retryLater(int attempt, java.util.function.Supplier<CompletionStage<T>> again) {
        CompletableFuture<T> later = new CompletableFuture<>();
        long delay = config.getRetryDelay().calcDelay(attempt).toMillis();
        executor.getServiceManager().newTimeout(t -> again.get().whenComplete((v, e) -> {
            if (e != null) {
                later.completeExceptionally(e);
            } else {
                later.complete(v);
            }
        }), delay, TimeUnit.MILLISECONDS);
        return later;
    }

    // ---- one send

    /** What became of one send: the reply, or the failure that lost it (and what is known). */
    private static final class Sent<T> {
        T reply;
        /** Non-null when the command may have run but its reply did not come. */
        Throwable lost;
        /** The count read in the same write, when it was asked and answered. */
        Integer learned;
        /** Whether the connection is known dead (killed by id, or gone) before the read back. */
        boolean fenced;
    }

    private <T> CompletionStage<Sent<T>> send(String name, String field, boolean learn, Codec codec,
                                              RedisCommand<T> command, Object[] args, long extraTimeoutMs) {
        long timeout = timeoutMs + extraTimeoutMs;
        MasterSlaveEntry entry = executor.getConnectionManager().getEntry(name);
        if (entry == null) {
            return throughExecutor(name, codec, command, args);
        }
        CompletableFuture<RedisConnection> taking = entry.connectionWriteOp(command);
        // As Redisson's executor: a connection not had within the timeout fails the command;
        // one that comes later goes back to the pool (ConnectionsHolder does that).
        if (!taking.isDone()) {
            io.netty.util.Timeout giveUp = executor.getServiceManager().newTimeout(t -> taking.completeExceptionally(
                    new org.redisson.client.RedisTimeoutException("no connection for " + command.getName()
                            + " within " + timeout + " ms")), timeout, TimeUnit.MILLISECONDS);
            taking.whenComplete((c, e) -> giveUp.cancel());
        }
        return taking.handle((conn, noConnection) -> {
            if (noConnection != null) {
                // Nothing was sent: Redisson's executor retries as it does.
                return throughExecutor(name, codec, command, args);
            }
            return onConnection(entry, conn, name, field, learn, codec, command, args, timeout);
        }).thenCompose(f -> f);
    }

    /**
     * On a connection of the pool: its id first, when not yet known (one round trip per
     * connection: a command is only ever sent where a lost reply can be fenced), then the
     * command.
     */
    private <T> CompletionStage<Sent<T>> onConnection(MasterSlaveEntry entry, RedisConnection conn, String name,
                                                      String field, boolean learn, Codec codec, RedisCommand<T> command,
                                                      Object[] args, long timeout) {
        io.netty.channel.Channel channel = conn.getChannel();
        Long id = channel.attr(CLIENT_ID).get();
        if (id != null) {
            return sendOn(entry, conn, id, name, field, learn, codec, command, args, timeout);
        }
        RFuture<Long> asked = conn.async(timeout, LongCodec.INSTANCE, Commands.CLIENT_ID);
        return asked.handle((n, e) -> {
            Throwable cause = cause(e);
            if (cause != null && isTransport(cause)) {
                entry.releaseWrite(conn); // nothing of the command was sent
                return throughExecutor(name, codec, command, args);
            }
            // Denied (an ACL without CLIENT): never asked again, never fenced.
            long known = cause == null ? n : NO_ID;
            channel.attr(CLIENT_ID).set(known);
            return sendOn(entry, conn, known, name, field, learn, codec, command, args, timeout);
        }).thenCompose(f -> f);
    }

    private <T> CompletionStage<Sent<T>> sendOn(MasterSlaveEntry entry, RedisConnection conn, long id, String name,
                                                String field, boolean learn, Codec codec, RedisCommand<T> command,
                                                Object[] args, long timeout) {
        Sent<T> sent = new Sent<>();
        if (learn) {
            RFuture<Long> f = conn.async(timeout, StringCodec.INSTANCE, Commands.HGET_COUNT, name, field);
            f.thenAccept(n -> {
                sent.learned = (int) Math.min(Integer.MAX_VALUE, n);
                holds.set(name, field, sent.learned);
            });
        }
        RFuture<T> reply = conn.async(timeout, codec, command, args);
        // A connection that closes cannot bring the reply: fail at once rather than at the
        // response timeout (Redisson's own executor waits for the timeout).
        io.netty.channel.ChannelFuture closing = conn.getChannel().closeFuture();
        io.netty.channel.ChannelFutureListener onClose = c -> reply.toCompletableFuture().completeExceptionally(
                new org.redisson.client.RedisConnectionException(command.getName() + ": the connection closed before its reply"));
        closing.addListener(onClose);
        reply.whenComplete((r, e) -> closing.removeListener(onClose));
        RedisClient node = conn.getRedisClient();
        return reply.handle((r, e) -> {
            entry.releaseWrite(conn);
            Throwable cause = cause(e);
            if (cause == null) {
                sent.reply = r;
                return CompletableFuture.completedFuture(sent);
            }
            if (nothingRan(cause)) {
                return throughExecutor(name, codec, command, args);
            }
            if (cause instanceof RedisException && !isTransport(cause)) {
                throw new CompletionException(cause); // the server's own refusal
            }
            sent.lost = cause;
            return fence(node, id).thenApply(fenced -> {
                sent.fenced = fenced;
                return sent;
            });
        }).thenCompose(f -> f);
    }

    /** Redisson's executor (redirects, retries), for a command that certainly did not run. */
    private <T> CompletionStage<Sent<T>> throughExecutor(String name, Codec codec, RedisCommand<T> command, Object[] args) {
        RFuture<T> f = executor.writeAsync(name, codec, command, args);
        return f.handle((r, e) -> {
            Throwable cause = cause(e);
            Sent<T> sent = new Sent<>();
            if (cause == null) {
                sent.reply = r;
            } else if (cause instanceof RedisException && !isTransport(cause)) {
                throw new CompletionException(cause);
            } else {
                sent.lost = cause; // not fenced: Redisson's executor does not say which connection
            }
            return sent;
        });
    }

    /** {@code CLIENT KILL ID id} on {@code node}: whether that connection is now certainly gone. */
    private CompletionStage<Boolean> fence(RedisClient node, long id) {
        if (id == NO_ID) {
            return CompletableFuture.completedFuture(false);
        }
        RFuture<Long> f = executor.writeAsync(node, LongCodec.INSTANCE, Commands.CLIENT_KILL, "ID", id);
        return f.handle((n, e) -> e == null); // 1 killed, 0 already gone; an error (NOPERM): not fenced
    }

    private static Throwable cause(Throwable e) {
        while (e instanceof CompletionException && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    /** A refusal that proves the command did not run: Redisson's executor deals with these. */
    private static boolean nothingRan(Throwable e) {
        return e instanceof RedisRedirectException || e instanceof RedisRetryException || e instanceof RedisReadonlyException;
    }

    /** No reply came: the command may have run. */
    static boolean isTransport(Throwable e) {
        return !(e instanceof RedisException)
                || e instanceof org.redisson.client.RedisTimeoutException
                || e instanceof org.redisson.client.RedisConnectionException
                || e instanceof org.redisson.client.RedisReconnectedException
                || e instanceof org.redisson.client.RedisNodeNotFoundException;
    }
}
