package io.github.redislock.redisson.support;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A raw RESP2 connection for the tests' own look at the server (HGETALL, PTTL, INFO,
 * SUBSCRIBE...), independent of the library under test and of Redisson.
 */
public final class Resp implements Closeable {

    /** An error reply. */
    public static final class Error extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Error(String message) {
            super(message);
        }
    }

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    public Resp(int port) {
        this(port, 10_000);
    }

    public Resp(int port, int readTimeoutMs) {
        try {
            socket = new Socket();
            socket.connect(new InetSocketAddress("127.0.0.1", port), 2000);
            socket.setSoTimeout(readTimeoutMs);
            socket.setTcpNoDelay(true);
            in = new BufferedInputStream(socket.getInputStream());
            out = socket.getOutputStream();
        } catch (IOException e) {
            throw new UncheckedIOException("connect to 127.0.0.1:" + port, e);
        }
    }

    /** Sends one command and reads its reply: String, Long, List, null; an error throws. */
    public Object call(Object... args) {
        send(args);
        return read();
    }

    public void send(Object... args) {
        try {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            buf.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.UTF_8));
            for (Object a : args) {
                byte[] b = a instanceof byte[] ? (byte[]) a : String.valueOf(a).getBytes(StandardCharsets.UTF_8);
                buf.write(("$" + b.length + "\r\n").getBytes(StandardCharsets.UTF_8));
                buf.write(b);
                buf.write("\r\n".getBytes(StandardCharsets.UTF_8));
            }
            out.write(buf.toByteArray());
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Reads one reply (for SUBSCRIBE's messages, or a reply to {@link #send}). */
    public Object read() {
        try {
            Object reply = readReply();
            if (reply instanceof Error) {
                throw (Error) reply;
            }
            return reply;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Object readReply() throws IOException {
        int type = in.read();
        String line = readLine();
        switch (type) {
            case '+':
                return line;
            case '-':
                return new Error(line);
            case ':':
                return Long.parseLong(line);
            case '$': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return null;
                }
                byte[] b = new byte[n];
                int off = 0;
                while (off < n) {
                    int r = in.read(b, off, n - off);
                    if (r < 0) {
                        throw new IOException("connection closed");
                    }
                    off += r;
                }
                readLine();
                return new String(b, StandardCharsets.UTF_8);
            }
            case '*': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return null;
                }
                List<Object> items = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    Object item = readReply();
                    items.add(item);
                }
                return items;
            }
            case -1:
                throw new IOException("connection closed");
            default:
                throw new IOException("unexpected reply type " + (char) type);
        }
    }

    private String readLine() throws IOException {
        StringBuilder sb = new StringBuilder();
        while (true) {
            int c = in.read();
            if (c < 0) {
                throw new IOException("connection closed");
            }
            if (c == '\r') {
                in.read();
                return sb.toString();
            }
            sb.append((char) c);
        }
    }

    public long integer(Object... args) {
        Object r = call(args);
        return r instanceof Long ? (Long) r : Long.parseLong(String.valueOf(r));
    }

    public String string(Object... args) {
        Object r = call(args);
        return r == null ? null : String.valueOf(r);
    }

    /** One field of an INFO section. */
    public String info(String section, String field) {
        for (String line : string("INFO", section).split("\r\n")) {
            if (line.startsWith(field + ":")) {
                return line.substring(field.length() + 1);
            }
        }
        return null;
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException e) {
            // closing a test connection: nothing to do
        }
    }
}
