package io.github.redislock.redisson.support;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real redis-server (or valkey-server) the tests start on a free loopback port, in its own
 * temporary directory, with the lock module loaded; stopped (killed) by {@link #close}.
 *
 * <p>The same convention as the project's other tests: {@code REDIS_SERVER} names the binary
 * (default {@code redis-server} on PATH), {@code LOCK_MODULE_PATH} the module (default: the
 * repository's {@code target/release/libredis_lock.so}).
 */
public final class RedisServer implements AutoCloseable {

    private final Process process;
    public final int port;
    private final Path dir;
    private final List<String> args;

    private RedisServer(Process process, int port, Path dir, List<String> args) {
        this.process = process;
        this.port = port;
        this.dir = dir;
        this.args = args;
    }

    public static String binary() {
        String b = System.getenv("REDIS_SERVER");
        return b == null || b.isEmpty() ? "redis-server" : b;
    }

    public static String cli() {
        String c = System.getenv("REDIS_CLI");
        return c == null || c.isEmpty() ? "redis-cli" : c;
    }

    public static String modulePath() {
        String m = System.getenv("LOCK_MODULE_PATH");
        if (m != null && !m.isEmpty()) {
            return m;
        }
        for (Path d = Paths.get("").toAbsolutePath(); d != null; d = d.getParent()) {
            Path candidate = d.resolve("target/release/libredis_lock.so");
            if (Files.isRegularFile(candidate)) {
                return candidate.toString();
            }
        }
        throw new IllegalStateException("set LOCK_MODULE_PATH to the module (make build makes target/release/libredis_lock.so)");
    }

    public static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A server with the module and {@code extra} arguments ({@code --name value ...}). */
    public static RedisServer start(String... extra) {
        return start(true, extra);
    }

    /** A server without the module. */
    public static RedisServer startWithoutModule(String... extra) {
        return start(false, extra);
    }

    public static RedisServer start(boolean module, String... extra) {
        Path dir;
        try {
            dir = Files.createTempDirectory("redis-lock-java-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        IllegalStateException last = null;
        for (int attempt = 0; attempt < 8; attempt++) {
            int port = freePort();
            List<String> cmd = new ArrayList<>(Arrays.asList(binary(),
                    "--port", String.valueOf(port), "--bind", "127.0.0.1", "--dir", dir.toString(),
                    "--logfile", dir.resolve("redis.log").toString(), "--daemonize", "no", "--save", "",
                    "--appendonly", "no", "--repl-diskless-sync-delay", "0"));
            if (module) {
                cmd.add("--loadmodule");
                cmd.add(modulePath());
            }
            cmd.addAll(Arrays.asList(extra));
            try {
                return launch(cmd, port, dir);
            } catch (IllegalStateException e) {
                last = e;
            }
        }
        throw last;
    }

    private static RedisServer launch(List<String> cmd, int port, Path dir) {
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(new File("/dev/null")).start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + cmd.get(0) + " (set REDIS_SERVER)", e);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            if (!p.isAlive()) {
                throw new IllegalStateException("server exited at startup on port " + port + ": " + log(dir));
            }
            try (Resp r = new Resp(port, 2000)) {
                String pid = r.info("server", "process_id");
                if (String.valueOf(p.pid()).equals(pid)) {
                    return new RedisServer(p, port, dir, cmd);
                }
                p.destroyForcibly();
                throw new IllegalStateException("port " + port + " answered by another server");
            } catch (UncheckedIOException | Resp.Error e) {
                sleep(10);
            }
        }
        p.destroyForcibly();
        throw new IllegalStateException("server did not answer on port " + port + ": " + log(dir));
    }

    static String log(Path dir) {
        try {
            return new String(Files.readAllBytes(dir.resolve("redis.log")), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(no log)";
        }
    }

    public String address() {
        return "redis://127.0.0.1:" + port;
    }

    public Resp connect() {
        return new Resp(port);
    }

    /** One command on a fresh connection. */
    public Object call(Object... args) {
        try (Resp r = connect()) {
            return r.call(args);
        }
    }

    public Path dir() {
        return dir;
    }

    public String log() {
        return log(dir);
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** Sends {@code signal} (e.g. {@code STOP}, {@code CONT}) to the server process. */
    public void signal(String signal) {
        try {
            Process k = new ProcessBuilder("kill", "-" + signal, String.valueOf(process.pid())).start();
            if (!k.waitFor(10, TimeUnit.SECONDS) || k.exitValue() != 0) {
                throw new IllegalStateException("kill -" + signal + " failed");
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** SIGKILL: a crash (the directory stays until {@link #close}). */
    public void kill() {
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public void close() {
        kill();
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        } catch (IOException e) {
            // a leftover temp directory is harmless
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
