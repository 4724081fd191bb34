package io.github.redislock.redisson;

import java.util.Iterator;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The hold counts this library knows, per Redisson client: for each lock hash and field
 * ({@code <owner>} or {@code <owner>:write}), how many holds the owner has, as the server last
 * showed it and as the library's own commands changed it since. Nothing is sent to learn
 * them: {@link Counted} reads a count it lacks in the same round trip as the command.
 *
 * <p><b>What they decide.</b> A command whose reply is lost may or may not have run, and
 * resending one that ran would count twice. After a lost reply the server's count is read
 * back and compared with the known one (the Rust client's rule): the old count + 1 (an
 * acquire) or - 1 (a release) means the command ran; the old count means it did not. A known
 * count also makes the plain try before a wait unnecessary (the try proved the owner held
 * nothing, so a hold found after a lost wait reply came from the wait).
 *
 * <p><b>When they are wrong.</b> Holds change without the library: a lease ends, {@code
 * forceUnlock} deletes the lock, or the same thread takes the same lock through Redisson's
 * own object (owners are shared with Redisson). The first two only lower the server's count,
 * which makes a later decision refuse to guess (a mismatch is an error, never an undo). The
 * third raises it unseen: the next release notices (the module answers "holds left" where the
 * library counted the last one) and the count is forgotten, but a reply lost in between
 * could be misjudged. A thread that mixes the two kinds of object on one lock is rare; it is
 * documented as a limit.
 *
 * <p>Counts of zero are kept, so that a thread's next acquire needs no try; the table is
 * bounded ({@link #LIMIT} entries: zeros are dropped first, then everything), and a count
 * forgotten only costs one read, never a wrong decision.
 */
final class Holds {

    /** The most entries kept per client. */
    static final int LIMIT = 10_000;

    private static final Map<Object, Holds> BY_CLIENT = new WeakHashMap<>();

    private final ConcurrentHashMap<String, Integer> counts = new ConcurrentHashMap<>();

    /** The one table of a Redisson client ({@code client} is its service manager: shared by
     * the sync, Reactive and Rx executors, as the owners are). */
    static Holds of(Object client) {
        synchronized (BY_CLIENT) {
            return BY_CLIENT.computeIfAbsent(client, c -> new Holds());
        }
    }

    private static String key(String name, String field) {
        return name + '\u0000' + field;
    }

    /** The known count, or null. */
    Integer known(String name, String field) {
        return counts.get(key(name, field));
    }

    /** The server showed {@code count} (a read back, a refused acquire: 0, a last release: 0). */
    void set(String name, String field, int count) {
        if (counts.size() >= LIMIT) {
            trim();
        }
        counts.put(key(name, field), count);
    }

    /** The count is no longer known. */
    void forget(String name, String field) {
        counts.remove(key(name, field));
    }

    /** One more hold (a grant), if the count is known. */
    void granted(String name, String field) {
        counts.computeIfPresent(key(name, field), (k, n) -> n + 1);
    }

    /**
     * A release answered {@code last}: true, the last hold went, or null, the owner held
     * nothing (either way the server shows 0); false, holds are left (one fewer, or, where
     * the library counted only this one, another object of the same owner holds the rest:
     * the count is forgotten).
     */
    void released(String name, String field, Boolean last) {
        if (last == null || last) {
            set(name, field, 0);
            return;
        }
        counts.computeIfPresent(key(name, field), (k, n) -> n <= 1 ? null : n - 1);
    }

    /** {@code LOCK.FORCE} deleted the lock: every owner's count of it is 0. */
    void forced(String name) {
        String prefix = name + '\u0000';
        for (Map.Entry<String, Integer> e : counts.entrySet()) {
            if (e.getKey().startsWith(prefix)) {
                e.setValue(0);
            }
        }
    }

    private void trim() {
        for (Iterator<Integer> it = counts.values().iterator(); it.hasNext(); ) {
            if (it.next() == 0) {
                it.remove();
            }
        }
        if (counts.size() >= LIMIT) {
            counts.clear();
        }
    }
}
