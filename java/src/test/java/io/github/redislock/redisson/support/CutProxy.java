package io.github.redislock.redisson.support;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A TCP proxy in front of a test server that loses one reply on purpose, as the Python
 * tests' {@code Proxy} does: {@link #cutBefore} closes the connection that is about to send
 * a command containing a word, without forwarding it (the command never ran); {@link
 * #dropReply} forwards it, then drops what the server answers next on that connection and
 * closes it (the command ran, its reply is lost). Every connection a client opens goes
 * through; each rule fires once.
 */
public final class CutProxy implements AutoCloseable {

    private enum Rule { BEFORE, DROP_REPLY }

    private final ServerSocket listener;
    private final int target;
    private volatile Rule rule;
    private volatile byte[] word;
    private volatile CountDownLatch fired = new CountDownLatch(1);
    private volatile boolean closed;

    public CutProxy(int targetPort) {
        this.target = targetPort;
        try {
            listener = new ServerSocket(0, 64, InetAddress.getLoopbackAddress());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Thread accept = new Thread(this::accept, "cut-proxy-accept");
        accept.setDaemon(true);
        accept.start();
    }

    public String address() {
        return "redis://127.0.0.1:" + listener.getLocalPort();
    }

    /** The next command containing {@code word} is not forwarded: its connection closes. */
    public void cutBefore(String word) {
        arm(Rule.BEFORE, word);
    }

    /** The next command containing {@code word} runs; the reply that follows is dropped and the connection closes. */
    public void dropReply(String word) {
        arm(Rule.DROP_REPLY, word);
    }

    private synchronized void arm(Rule r, String w) {
        fired = new CountDownLatch(1);
        word = w.getBytes(StandardCharsets.UTF_8);
        rule = r;
    }

    /** Whether the armed rule fired within {@code ms}. */
    public boolean fired(long ms) throws InterruptedException {
        return fired.await(ms, TimeUnit.MILLISECONDS);
    }

    /** The armed rule, taken (it fires once) if {@code data} contains its word. */
    private synchronized Rule take(byte[] data, int n) {
        if (rule == null || !contains(data, n, word)) {
            return null;
        }
        Rule r = rule;
        rule = null;
        return r;
    }

    private static boolean contains(byte[] data, int n, byte[] w) {
        outer:
        for (int i = 0; i + w.length <= n; i++) {
            for (int j = 0; j < w.length; j++) {
                if (Character.toUpperCase(data[i + j]) != Character.toUpperCase(w[j])) {
                    continue outer;
                }
            }
            return true;
        }
        return false;
    }

    private void accept() {
        while (!closed) {
            Socket client;
            try {
                client = listener.accept();
            } catch (IOException e) {
                return;
            }
            try {
                Socket server = new Socket(InetAddress.getLoopbackAddress(), target);
                server.setTcpNoDelay(true);
                client.setTcpNoDelay(true);
                Pair pair = new Pair(client, server);
                start(() -> pair.up(), "cut-proxy-up");
                start(() -> pair.down(), "cut-proxy-down");
            } catch (IOException e) {
                close(client);
            }
        }
    }

    private static void start(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
    }

    /** One proxied connection. */
    private final class Pair {
        private final Socket client;
        private final Socket server;
        private volatile boolean dropNextReply;

        Pair(Socket client, Socket server) {
            this.client = client;
            this.server = server;
        }

        /** Client to server. */
        void up() {
            byte[] buf = new byte[65536];
            try (InputStream in = client.getInputStream(); OutputStream out = server.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) > 0) {
                    Rule r = take(buf, n);
                    if (r == Rule.BEFORE) {
                        fired.countDown();
                        break;
                    }
                    if (r == Rule.DROP_REPLY) {
                        dropNextReply = true;
                    }
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException e) {
                // closed
            } finally {
                closeBoth();
            }
        }

        /** Server to client. */
        void down() {
            byte[] buf = new byte[65536];
            try (InputStream in = server.getInputStream(); OutputStream out = client.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) > 0) {
                    if (dropNextReply) {
                        fired.countDown();
                        break;
                    }
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException e) {
                // closed
            } finally {
                closeBoth();
            }
        }

        private void closeBoth() {
            close(client);
            close(server);
        }
    }

    private static void close(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // already closed
        }
    }

    @Override
    public void close() {
        closed = true;
        try {
            listener.close();
        } catch (IOException e) {
            // already closed
        }
    }
}
