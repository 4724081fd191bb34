package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import io.github.redislock.redisson.support.ServerTest;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFuture;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * The module's kept places and {@code LOCK.CANCEL} under Redisson's executor
 * (docs/waiting.md): a wait sliced into pieces keeps its place between them, and a wait
 * given up (an interrupt, a cancelled future, its own timeout) is cancelled on the server,
 * leaving no waiter, no kept place and no grant held by nobody.
 */
class KeptPlaceTest extends ServerTest {

    /** Slices short enough that every test here sees several of them. */
    private static final Duration SLICE = Duration.ofMillis(200);

    private ModuleLocks sliced;
    private RedissonClient slicedClient;
    /** The holders and newcomers: a client of the test's own, whose holds end with it. */
    private ModuleLocks others;
    private RedissonClient othersClient;

    @BeforeEach
    void clients() {
        slicedClient = client();
        sliced = ModuleLocks.wrap(slicedClient, ModuleLocks.Options.defaults().waitSlice(SLICE));
        othersClient = client();
        others = ModuleLocks.wrap(othersClient);
    }

    // ---- slices keep their place

    @Test
    @Smoke
    void aSlicedLockWaitIsNotOvertakenByANewcomer() throws Exception {
        others.getLock("lock").lock();
        String first = LockTest.ownerOf(slicedClient, 71);
        RFuture<Void> slicing = sliced.getLock("lock").lockAsync(-1, null, 71);
        Thread.sleep(3 * SLICE.toMillis()); // several slices, each taking its place back
        RFuture<Void> newcomer = others.getLock("lock").lockAsync(-1, null, 72);
        LockTest.waitForWaiters("lock", 2);
        // Whenever the slicing waiter is present (not between two slices), it is first.
        for (int i = 0; i < 20; i++) {
            List<String> order = field("LOCK.INFO", "lock", "waiters", "owner");
            if (order.size() == 2) {
                assertEquals(first, order.get(0), "queue " + order);
            }
            Thread.sleep(SLICE.toMillis() / 7);
        }
        String holder = LockTest.ownerOf(othersClient, Thread.currentThread().getId());
        whilePresent("LOCK.INFO", "lock", 2, "LOCK.RELEASE", "lock", holder);
        slicing.get(5, TimeUnit.SECONDS);
        assertFalse(newcomer.isDone(), "the newcomer waits behind the sliced waiter");
        sliced.getLock("lock").unlockAsync(71).get(5, TimeUnit.SECONDS);
        newcomer.get(5, TimeUnit.SECONDS);
        others.getLock("lock").unlockAsync(72).get(5, TimeUnit.SECONDS);
    }

    @Test
    void aSlicedSemaphoreWaitKeepsItsPlaceByItsWaiterId() throws Exception {
        RSemaphore s = others.getSemaphore("sem");
        s.trySetPermits(0);
        RFuture<Void> slicing = sliced.getSemaphore("sem").acquireAsync(1);
        Thread.sleep(3 * SLICE.toMillis());
        RFuture<Void> newcomer = others.getSemaphore("sem").acquireAsync(1);
        // The waiter that came first (waited longest, across its slices) stays first.
        for (int i = 0; i < 20; i++) {
            List<String> waited = field("LOCK.SEMINFO", "sem", "waiters", "waited_ms");
            if (waited.size() == 2) {
                assertTrue(Long.parseLong(waited.get(0)) > Long.parseLong(waited.get(1)), "waited " + waited);
            }
            Thread.sleep(SLICE.toMillis() / 7);
        }
        whilePresent("LOCK.SEMINFO", "sem", 2, "LOCK.SEMRELEASE", "sem", 1);
        slicing.get(5, TimeUnit.SECONDS);
        assertFalse(newcomer.isDone(), "the newcomer waits behind the sliced waiter");
        s.release(1);
        newcomer.get(5, TimeUnit.SECONDS);
    }

    // ---- a wait given up is cancelled

    @Test
    @Smoke
    void anInterruptedLockWaitLeavesNothingAndItsPlaceIsGone() throws Exception {
        RLock lock = others.getLock("lock");
        lock.lock();
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        AtomicReference<List<String>> left = new AtomicReference<>();
        Thread waiter = new Thread(() -> {
            try {
                sliced.getLock("lock").lockInterruptibly();
            } catch (Throwable e) {
                thrown.set(e);
                // Read at once: the interrupt is reported only once the cancel is answered.
                List<String> owners = new ArrayList<>(field("LOCK.INFO", "lock", "waiters", "owner"));
                owners.addAll(field("LOCK.INFO", "lock", "kept", "owner"));
                left.set(owners);
            }
        });
        waiter.start();
        Thread.sleep(2 * SLICE.toMillis()); // past a slice: a place to keep
        waiter.interrupt();
        waiter.join(5000);
        assertTrue(thrown.get() instanceof InterruptedException, "thrown " + thrown.get());
        assertEquals(List.of(), left.get(), "waiters and kept places after the interrupt");
        lock.unlock();
        assertEquals(0L, server.call("EXISTS", "lock"), "nobody holds the lock");
    }

    @Test
    void anInterruptedSemaphoreWaitLeavesNothingAndItsPlaceIsGone() throws Exception {
        RSemaphore s = others.getSemaphore("sem");
        s.trySetPermits(0);
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        AtomicReference<List<String>> left = new AtomicReference<>();
        Thread waiter = new Thread(() -> {
            try {
                sliced.getSemaphore("sem").acquire(1);
            } catch (Throwable e) {
                thrown.set(e);
                List<String> ids = new ArrayList<>(field("LOCK.SEMINFO", "sem", "waiters", "waited_ms"));
                ids.addAll(field("LOCK.SEMINFO", "sem", "kept", "waiter"));
                left.set(ids);
            }
        });
        waiter.start();
        Thread.sleep(2 * SLICE.toMillis());
        waiter.interrupt();
        waiter.join(5000);
        assertTrue(thrown.get() instanceof InterruptedException, "thrown " + thrown.get());
        assertEquals(List.of(), left.get(), "waiters and kept places after the interrupt");
        s.release(1);
        assertEquals(1, s.availablePermits(), "the permit released stays free");
    }

    @Test
    @Smoke
    void aTimedOutSlicedWaitLeavesNoKeptPlace() throws Exception {
        others.getLock("lock").lock();
        long start = System.nanoTime();
        assertFalse(sliced.getLock("lock").tryLockAsync(2 * SLICE.toMillis() + 50, -1, TimeUnit.MILLISECONDS, 71)
                .get(5, TimeUnit.SECONDS));
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 2 * SLICE.toMillis());
        assertEquals(List.of(), field("LOCK.INFO", "lock", "kept", "owner"));
        assertEquals(List.of(), field("LOCK.INFO", "lock", "waiters", "owner"));

        RSemaphore s = others.getSemaphore("sem");
        s.trySetPermits(0);
        assertFalse(sliced.getSemaphore("sem").tryAcquire(1, Duration.ofMillis(2 * SLICE.toMillis() + 50)));
        assertEquals(List.of(), field("LOCK.SEMINFO", "sem", "kept", "waiter"));
    }

    // ---- a cancel racing a grant: exactly one outcome, never a grant held by nobody

    @Test
    @Smoke
    void aCancelRacingALockGrantLeavesTheLockFree() throws Exception {
        for (int i = 0; i < 30; i++) {
            RLock holder = others.getLock("race");
            holder.lockAsync(-1, null, 1).get(5, TimeUnit.SECONDS);
            RFuture<Void> waiting = sliced.getLock("race").lockAsync(-1, null, 2);
            LockTest.waitForWaiters("race", 1);
            CompletableFuture<Void> go = new CompletableFuture<>();
            Future<?> release = pool(1).submit(() -> {
                go.join();
                return holder.unlockAsync(1).get();
            });
            go.complete(null);
            if (!waiting.cancel(false)) {
                // The grant came first and was told to the caller, who holds the lock.
                waiting.get(5, TimeUnit.SECONDS);
                sliced.getLock("race").unlockAsync(2).get(5, TimeUnit.SECONDS);
            }
            release.get(5, TimeUnit.SECONDS);
            LockTest.eventuallyFree("race");
            assertEquals(List.of(), field("LOCK.INFO", "race", "kept", "owner"), "round " + i);
        }
    }

    @Test
    void aCancelRacingPermitGrantsGivesThemBack() throws Exception {
        RSemaphore s = others.getSemaphore("sem");
        s.trySetPermits(0);
        RPermitExpirableSemaphore p = others.getPermitExpirableSemaphore("permits");
        p.trySetPermits(0);
        for (int i = 0; i < 30; i++) {
            RFuture<Void> sem = sliced.getSemaphore("sem").acquireAsync(1);
            RFuture<String> permit = sliced.getPermitExpirableSemaphore("permits").acquireAsync();
            waitFor(() -> field("LOCK.SEMINFO", "sem", "waiters", "waited_ms").size() == 1
                    && field("LOCK.SEMINFO", "permits", "waiters", "waited_ms").size() == 1);
            CompletableFuture<Void> go = new CompletableFuture<>();
            Future<?> release = pool(1).submit(() -> {
                go.join();
                s.release(1);
                p.addPermits(1);
                return null;
            });
            go.complete(null);
            boolean semCancelled = sem.cancel(false);
            boolean permitCancelled = permit.cancel(false);
            release.get(5, TimeUnit.SECONDS);
            // A grant that came first was told to the caller, who gives it back.
            if (!semCancelled) {
                sem.get(5, TimeUnit.SECONDS);
                s.release(1);
            }
            if (!permitCancelled) {
                p.release(permit.get(5, TimeUnit.SECONDS));
            }
            waitFor(() -> s.availablePermits() == 1 && p.availablePermits() == 1);
            assertEquals(List.of(), field("LOCK.SEMINFO", "sem", "kept", "waiter"), "round " + i);
            assertEquals(List.of(), field("LOCK.SEMINFO", "permits", "kept", "waiter"), "round " + i);
            assertTrue(s.tryAcquire(1, Duration.ofSeconds(5)), "round " + i);
            // Taken for good: none available for the next round.
            assertTrue(p.tryAcquire(5, TimeUnit.SECONDS) != null, "round " + i);
        }
    }

    // ---- helpers

    /** Waits up to 5 s for {@code condition}. */
    private static void waitFor(java.util.function.BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 5 s");
            }
            Thread.sleep(5);
        }
    }

    /** {@link #whilePresent}'s check and command, in one script: nothing comes between. */
    private static final String WHILE_PRESENT = String.join("\n",
            "local info = redis.call(ARGV[1], KEYS[1])",
            "for i = 1, #info, 2 do",
            "  local k = info[i]",
            "  if type(k) == 'table' then k = k.ok end",
            "  if k == 'waiters' then",
            "    if #info[i + 1] ~= tonumber(ARGV[2]) then return false end",
            "    return redis.call(unpack(ARGV, 3))",
            "  end",
            "end",
            "return false");

    /**
     * Runs {@code command} at a moment when {@code key} has {@code waiters} waiters present.
     * A sliced waiter is absent for the moment between two of its slices, and what frees then
     * goes to the next waiter present (by design: README, "Slices keep their place"); the
     * tests of order free the object inside a slice, where the order is the module's promise.
     */
    static Object whilePresent(String info, String key, int waiters, Object... command)
            throws InterruptedException {
        List<Object> args = new ArrayList<>(List.of("EVAL", WHILE_PRESENT, 1, key, info, waiters));
        args.addAll(List.of(command));
        for (int i = 0; i < 2000; i++) {
            Object done = server.call(args.toArray());
            if (done != null) {
                return done;
            }
            Thread.sleep(1);
        }
        throw new AssertionError(key + " never had " + waiters + " waiters present");
    }

    /** The {@code entry} of every map in the info command's {@code list} field, in order. */
    @SuppressWarnings("unchecked")
    static List<String> field(String command, String key, String list, String entry) {
        List<Object> info = (List<Object>) server.call(command, key);
        List<String> out = new ArrayList<>();
        for (int i = 0; i + 1 < info.size(); i += 2) {
            if (list.equals(String.valueOf(info.get(i)))) {
                for (Object m : (List<Object>) info.get(i + 1)) {
                    List<Object> map = (List<Object>) m;
                    for (int j = 0; j + 1 < map.size(); j += 2) {
                        if (entry.equals(String.valueOf(map.get(j)))) {
                            out.add(String.valueOf(map.get(j + 1)));
                        }
                    }
                }
            }
        }
        return out;
    }
}
