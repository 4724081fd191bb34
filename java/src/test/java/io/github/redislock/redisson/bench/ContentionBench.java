package io.github.redislock.redisson.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.redislock.redisson.ModuleLocks;
import io.github.redislock.redisson.support.Clients;
import io.github.redislock.redisson.support.RedisServer;
import io.github.redislock.redisson.support.Resp;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * Contention, side by side in one JVM against one server, in one run: Redisson's own RLock,
 * RReadWriteLock and RSemaphore against this library's on the same server, at 8 and 32
 * threads, on one Redisson client and spread over four.
 *
 * <p>Each thread loops acquire, a one-counter critical section, release, for {@code
 * BENCH_SECONDS} (default 3) per row. Reported: sections per second, the wait for each
 * acquire (p50, p99, max; for the read-write lock also the writers' longest wait, counting a
 * wait that was only granted after the row ended), Jain's fairness
 * index over the threads' section counts, the re-takes (the share of sections whose thread
 * also ran the section before: for a lock, sections with no hand-off between threads, which
 * is how a lock that lets the releasing thread barge back in runs fast), the server's own time per section
 * ({@code INFO commandstats}: every command's usec, summed, over the run, per section), and
 * this JVM's CPU time per section (every thread: the workers, Redisson's netty threads,
 * the timers), which is what the client side costs on a machine with few cores.
 *
 * <p>{@code BENCH_KINDS}, {@code BENCH_THREADS}, {@code BENCH_CLIENTS} and {@code BENCH_SIDES}
 * ({@code Redisson,module}) narrow the rows, e.g. to profile one of them; {@code
 * BENCH_WARMUP} (seconds, default 2) is each side's unreported warm-up per kind; {@code
 * BENCH_COMMANDS} (any value) adds, under each console line, every command's calls and server
 * usec per section: which commands a side sends per section, and what each costs.
 *
 * <p>Run by {@code make bench} ({@code make bench-java}); writes {@code .cache/bench/java-bench.md}.
 */
public final class ContentionBench {

    private ContentionBench() {
    }

    /** One side's objects on one client. */
    interface Side {
        Section lock(String name);

        Section readWrite(String name, boolean writer);

        Section semaphore(String name);
    }

    /** One acquire/release pair. */
    interface Section {
        void acquire() throws InterruptedException;

        void release();
    }

    static final class Row {
        String kind;
        String side;
        int threads;
        int clients;
        double perSecond;
        double p50;
        double p99;
        double max;
        double writerMax = Double.NaN;
        double jain;
        /** The share of sections whose thread also held the previous one (for a lock: no hand-off). */
        double retakes;
        double serverUsPerSection;
        double clientUsPerSection;
        long violations;
        /** Per section, each command's calls and server usec (the console line, with {@code BENCH_COMMANDS}). */
        String commands = "";
    }

    public static void main(String[] args) throws Exception {
        long seconds = Long.parseLong(System.getenv().getOrDefault("BENCH_SECONDS", "3"));
        Path out = Paths.get(System.getenv().getOrDefault("BENCH_OUT", ".cache/bench/java-bench.md"));
        List<Row> rows = new ArrayList<>();
        try (RedisServer server = RedisServer.start()) {
            List<RedissonClient> clients = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                clients.add(Clients.single(server, c -> {
                    c.useSingleServer().setConnectionPoolSize(64).setConnectionMinimumIdleSize(8)
                            .setSubscriptionConnectionPoolSize(50);
                    c.setNettyThreads(NETTY_THREADS);
                }));
            }
            try {
                List<Side> redisson = new ArrayList<>();
                List<Side> module = new ArrayList<>();
                for (RedissonClient c : clients) {
                    redisson.add(redissonSide(c));
                    module.add(moduleSide(ModuleLocks.wrap(c)));
                }
                int n = 0;
                String sides = System.getenv().getOrDefault("BENCH_SIDES", "Redisson,module");
                // Warm both sides up, not reported: the JIT compiles each side's paths (a
                // second or two of a core on a small machine, which would otherwise fall in
                // the first rows), and the connection pools grow to 32 waiting threads.
                long warm = Long.parseLong(System.getenv().getOrDefault("BENCH_WARMUP", "2"));
                for (String kind : System.getenv().getOrDefault("BENCH_KINDS", "lock,rwlock,semaphore").split(",")) {
                    for (int s = 0; s < 2 && warm > 0; s++) {
                        if (sides.contains(s == 0 ? "Redisson" : "module")) {
                            run(server, kind + ":warm" + (n++), s == 0 ? redisson : module, 32, 1, warm, new Row());
                            run(server, kind + ":warm" + (n++), s == 0 ? redisson : module, 32, 4, 1, new Row());
                        }
                    }
                }
                for (String kind : System.getenv().getOrDefault("BENCH_KINDS", "lock,rwlock,semaphore").split(",")) {
                    for (int threads : ints("BENCH_THREADS", "8,32")) {
                        for (int spread : ints("BENCH_CLIENTS", "1,4")) {
                            for (int s = 0; s < 2; s++) {
                                if (!sides.contains(s == 0 ? "Redisson" : "module")) {
                                    continue;
                                }
                                Row row = new Row();
                                row.kind = kind;
                                row.side = s == 0 ? "Redisson" : "module";
                                row.threads = threads;
                                row.clients = spread;
                                run(server, kind + ":" + (n++), s == 0 ? redisson : module, threads, spread, seconds, row);
                                rows.add(row);
                                System.out.println(line(row));
                            }
                        }
                    }
                }
            } finally {
                for (RedissonClient c : clients) {
                    c.shutdown();
                }
            }
            String table = table(rows, seconds, server);
            System.out.println();
            System.out.println(table);
            Files.createDirectories(out.toAbsolutePath().getParent());
            Files.write(out, table.getBytes(StandardCharsets.UTF_8));
            System.out.println("written to " + out.toAbsolutePath().normalize());
        }
    }

    /** A comma-separated list of numbers from the environment, or {@code dflt}. */
    private static int[] ints(String env, String dflt) {
        return Arrays.stream(System.getenv().getOrDefault(env, dflt).split(",")).mapToInt(Integer::parseInt).toArray();
    }

    private static Side redissonSide(RedissonClient c) {
        return new Side() {
            @Override
            public Section lock(String name) {
                return wrap(c.getLock(name));
            }

            @Override
            public Section readWrite(String name, boolean writer) {
                RReadWriteLock rw = c.getReadWriteLock(name);
                return wrap(writer ? rw.writeLock() : rw.readLock());
            }

            @Override
            public Section semaphore(String name) {
                return wrap(c.getSemaphore(name));
            }
        };
    }

    private static Side moduleSide(ModuleLocks locks) {
        return new Side() {
            @Override
            public Section lock(String name) {
                return wrap(locks.getLock(name));
            }

            @Override
            public Section readWrite(String name, boolean writer) {
                RReadWriteLock rw = locks.getReadWriteLock(name);
                return wrap(writer ? rw.writeLock() : rw.readLock());
            }

            @Override
            public Section semaphore(String name) {
                return wrap(locks.getSemaphore(name));
            }
        };
    }

    static Section wrap(RLock lock) {
        return new Section() {
            @Override
            public void acquire() {
                lock.lock();
            }

            @Override
            public void release() {
                lock.unlock();
            }
        };
    }

    static Section wrap(RSemaphore sem) {
        return new Section() {
            @Override
            public void acquire() throws InterruptedException {
                sem.acquire();
            }

            @Override
            public void release() {
                sem.release();
            }
        };
    }

    /** Each client's netty event loops ({@code BENCH_NETTY}, default 8; Redisson's own default is 32). */
    static final int NETTY_THREADS = Integer.parseInt(System.getenv().getOrDefault("BENCH_NETTY", "8"));

    /** The semaphore's permits in the semaphore rows. */
    static final int PERMITS = 4;

    private static void run(RedisServer server, String kindAndName, List<Side> sides, int threads, int spread,
                            long seconds, Row row) throws Exception {
        String kind = kindAndName.contains(":") ? kindAndName.substring(0, kindAndName.indexOf(':')) : kindAndName;
        String name = "bench:" + kindAndName + ":" + System.nanoTime();
        if (kind.equals("semaphore")) {
            server.call("SET", name, String.valueOf(PERMITS));
        }
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger readers = new AtomicInteger();
        AtomicInteger writers = new AtomicInteger();
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger lastHolder = new AtomicInteger(-1);
        int[] retakes = new int[threads];
        long[] violations = new long[1];
        long[][] waits = new long[threads][];
        long[] lastWaits = new long[threads];
        int[] counts = new int[threads];
        boolean[] isWriter = new boolean[threads];
        CountDownLatch ready = new CountDownLatch(threads);
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            Side side = sides.get(t % spread);
            boolean writer = kind.equals("rwlock") && t % 4 == 0;
            isWriter[t] = writer;
            Section section = kind.equals("lock") ? side.lock(name)
                    : kind.equals("rwlock") ? side.readWrite(name, writer) : side.semaphore(name);
            Thread w = new Thread(() -> {
                long[] mine = new long[1 << 12];
                int n = 0;
                ready.countDown();
                try {
                    go.await();
                    while (!stop.get()) {
                        long t0 = System.nanoTime();
                        section.acquire();
                        long waited = System.nanoTime() - t0;
                        if (stop.get()) {
                            // Granted after the run: not a section, but a wait that long
                            // happened (a starved writer's shows here).
                            lastWaits[id] = waited;
                            section.release();
                            break;
                        }
                        if (n == mine.length) {
                            mine = Arrays.copyOf(mine, n * 2);
                        }
                        mine[n++] = waited;
                        if (lastHolder.getAndSet(id) == id) {
                            retakes[id]++;
                        }
                        check(kind, writer, readers, writers, inside, violations);
                        section.release();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                waits[id] = Arrays.copyOf(mine, n);
                counts[id] = n;
            });
            workers.add(w);
            w.start();
        }
        ready.await();
        Map<String, long[]> statsBefore = commandStats(server);
        long cpuBefore = processCpuNanos();
        long start = System.nanoTime();
        go.countDown();
        Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
        stop.set(true);
        long elapsed = System.nanoTime() - start;
        Map<String, long[]> statsAfter = commandStats(server);
        long cpuAfter = processCpuNanos();
        for (Thread w : workers) {
            w.join(60_000);
        }
        long total = 0;
        long retaken = 0;
        List<Long> all = new ArrayList<>();
        List<Long> writerWaits = new ArrayList<>();
        double sum = 0;
        double squares = 0;
        for (int t = 0; t < threads; t++) {
            total += counts[t];
            retaken += retakes[t];
            sum += counts[t];
            squares += (double) counts[t] * counts[t];
            for (long w : waits[t]) {
                all.add(w);
                if (isWriter[t]) {
                    writerWaits.add(w);
                }
            }
            if (isWriter[t] && lastWaits[t] > 0) {
                writerWaits.add(lastWaits[t]);
            }
        }
        all.sort(null);
        row.perSecond = total / (elapsed / 1e9);
        row.p50 = ms(percentile(all, 0.50));
        row.p99 = ms(percentile(all, 0.99));
        row.max = ms(all.isEmpty() ? 0 : all.get(all.size() - 1));
        if (!writerWaits.isEmpty()) {
            writerWaits.sort(null);
            row.writerMax = ms(writerWaits.get(writerWaits.size() - 1));
        }
        row.retakes = total == 0 ? 0 : (double) retaken / total;
        row.jain = squares == 0 ? 0 : sum * sum / (threads * squares);
        long usec = 0;
        StringBuilder perCommand = new StringBuilder();
        for (Map.Entry<String, long[]> e : statsAfter.entrySet()) {
            long[] before = statsBefore.getOrDefault(e.getKey(), new long[2]);
            long calls = e.getValue()[0] - before[0];
            long spent = e.getValue()[1] - before[1];
            usec += spent;
            if (calls > 0 && total > 0) {
                perCommand.append(String.format(Locale.ROOT, "  %s %.2f calls %.1f us", e.getKey(),
                        (double) calls / total, (double) spent / total));
            }
        }
        row.commands = perCommand.toString();
        row.serverUsPerSection = total == 0 ? 0 : (double) usec / total;
        row.clientUsPerSection = total == 0 ? 0 : (cpuAfter - cpuBefore) / 1e3 / total;
        row.violations = violations[0];
    }

    /** The section: nobody else inside a lock, no writer with anyone, at most PERMITS on the semaphore. */
    private static void check(String kind, boolean writer, AtomicInteger readers, AtomicInteger writers,
                              AtomicInteger inside, long[] violations) {
        if (kind.equals("lock") || kind.equals("semaphore")) {
            int limit = kind.equals("lock") ? 1 : PERMITS;
            if (inside.incrementAndGet() > limit) {
                violations[0]++;
            }
            inside.decrementAndGet();
            return;
        }
        if (writer) {
            if (writers.incrementAndGet() > 1 || readers.get() > 0) {
                violations[0]++;
            }
            writers.decrementAndGet();
        } else {
            readers.incrementAndGet();
            if (writers.get() > 0) {
                violations[0]++;
            }
            readers.decrementAndGet();
        }
    }

    private static long percentile(List<Long> sorted, double p) {
        if (sorted.isEmpty()) {
            return 0;
        }
        int i = (int) Math.min(sorted.size() - 1, Math.ceil(p * sorted.size()) - 1);
        return sorted.get(Math.max(0, i));
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    /** The CPU time this JVM has used (every thread: the workers, Redisson's netty threads, the rest). */
    private static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean
                ? ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() : 0;
    }

    /** INFO commandstats: each command's calls and usec, by name. */
    private static Map<String, long[]> commandStats(RedisServer server) {
        Map<String, long[]> stats = new TreeMap<>();
        try (Resp r = server.connect()) {
            for (String line : r.string("INFO", "commandstats").split("\r\n")) {
                int colon = line.indexOf(':');
                if (!line.startsWith("cmdstat_") || colon < 0) {
                    continue;
                }
                long[] callsAndUsec = new long[2];
                for (String field : line.substring(colon + 1).split(",")) {
                    if (field.startsWith("calls=")) {
                        callsAndUsec[0] = Long.parseLong(field.substring(6));
                    } else if (field.startsWith("usec=")) {
                        callsAndUsec[1] = Long.parseLong(field.substring(5));
                    }
                }
                stats.put(line.substring("cmdstat_".length(), colon), callsAndUsec);
            }
        }
        return stats;
    }

    private static String line(Row r) {
        return String.format(Locale.ROOT, "%-9s %-8s %2d threads %d client(s): %9.0f/s  p50 %7.2f  p99 %8.2f  max %8.2f ms  jain %.4f  re-takes %3.0f%%  server %6.1f  client %6.1f us/section%s",
                r.kind, r.side, r.threads, r.clients, r.perSecond, r.p50, r.p99, r.max, r.jain, 100 * r.retakes, r.serverUsPerSection,
                r.clientUsPerSection,
                r.violations > 0 ? "  VIOLATIONS " + r.violations : "")
                + (System.getenv("BENCH_COMMANDS") != null ? "\n   " + r.commands : "");
    }

    private static String table(List<Row> rows, long seconds, RedisServer server) {
        StringBuilder sb = new StringBuilder();
        String version = String.valueOf(server.call("INFO", "server")).lines()
                .filter(l -> l.startsWith("redis_version:") || l.startsWith("valkey_version:")).findFirst().orElse("?");
        sb.append(String.format(Locale.ROOT,
                "Java contention benchmark: Redisson %s vs this library, %s s per row, %s, JDK %s, %d cores.%n%n",
                org.redisson.Version.class.getPackage().getImplementationVersion(), seconds, version.trim(),
                System.getProperty("java.version"), Runtime.getRuntime().availableProcessors()));
        sb.append("| object | threads | clients | side | sections/s | p50 wait ms | p99 wait ms | max wait ms | writer max ms | Jain | re-takes | server us/section | client CPU us/section |\n");
        sb.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %s | %.0f | %.2f | %.2f | %.2f | %s | %.4f | %.0f%% | %.1f | %.1f |%s%n",
                    r.kind.equals("semaphore") ? "semaphore (" + PERMITS + " permits)" : r.kind.equals("rwlock") ? "rwlock (1 writer in 4)" : "lock",
                    r.threads, r.clients, r.side, r.perSecond, r.p50, r.p99, r.max,
                    Double.isNaN(r.writerMax) ? "" : String.format(Locale.ROOT, "%.2f", r.writerMax),
                    r.jain, 100 * r.retakes, r.serverUsPerSection, r.clientUsPerSection, r.violations > 0 ? " VIOLATIONS: " + r.violations : ""));
        }
        return sb.toString();
    }
}
