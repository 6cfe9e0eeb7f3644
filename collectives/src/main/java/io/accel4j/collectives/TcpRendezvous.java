package io.accel4j.collectives;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.TreeSet;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

/**
 * The TCP form of {@link NcclRendezvous} (torchrun's static rendezvous, reduced to one id). Rank 0 binds
 * {@code host:port} and accepts one connection per other rank; rank {@code r > 0} connects, retrying with backoff
 * (50 ms doubling to 1 s) while nobody listens yet, until the timeout. The messages, big-endian:
 * <pre>
 *   rank r → rank 0:  HELLO magic "A4NH" (int), r (int), size (int)            12 bytes
 *   rank 0 → rank r:  ID magic "A4NI" (int), the id (128 bytes)               132 bytes
 * </pre>
 * Rank 0 refuses a hello with the wrong magic, size, or a rank out of range or seen twice. Every failure is a
 * {@link CollectiveException} for the collective {@value #WHAT} naming {@code host:port}, this rank and the ranks at
 * fault (rank 0 when it never came, the ranks that never checked in). Every socket is closed before returning.
 */
final class TcpRendezvous implements NcclRendezvous {

    static final String WHAT = "ncclRendezvous";
    static final int HELLO_MAGIC = 0x41344e48; // "A4NH"
    static final int ID_MAGIC = 0x41344e49; // "A4NI"
    static final int HELLO_BYTES = 12;
    static final int ID_MESSAGE_BYTES = 4 + ID_BYTES;

    private static final long FIRST_BACKOFF_NANOS = 50_000_000L;
    private static final long MAX_BACKOFF_NANOS = 1_000_000_000L;

    private final InetSocketAddress address;
    private final int rank;
    private final int size;
    private final Duration timeout;

    TcpRendezvous(InetSocketAddress address, int rank, int size, Duration timeout) {
        this.address = Objects.requireNonNull(address, "address");
        if (size < 1 || rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " of " + size + " ranks");
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        this.rank = rank;
        this.size = size;
        this.timeout = timeout;
    }

    /** {@code "host:port"} (IPv6 as {@code "[::1]:29500"}); the host is resolved later, when used. */
    static InetSocketAddress parse(String hostPort) {
        Objects.requireNonNull(hostPort, "hostPort");
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0 || colon == hostPort.length() - 1) {
            throw new IllegalArgumentException("rendezvous address must be host:port, got '" + hostPort + "'");
        }
        String host = hostPort.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port;
        try {
            port = Integer.parseInt(hostPort.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("rendezvous port must be a number, got '" + hostPort + "'");
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("rendezvous port must be in [1, 65535], got " + port);
        }
        return InetSocketAddress.createUnresolved(host, port);
    }

    private String where() {
        return address.getHostString() + ":" + address.getPort();
    }

    @Override
    public byte[] exchange(Supplier<byte[]> makeId) {
        long start = System.nanoTime();
        long deadline = start + timeout.toNanos();
        if (rank == 0) {
            byte[] id = NcclRendezvous.checkId(makeId.get());
            if (size > 1) {
                serve(id, start, deadline);
            }
            return id;
        }
        return fetch(start, deadline);
    }

    // ---------------------------------------------------------------- rank 0

    private void serve(byte[] id, long start, long deadline) {
        TreeSet<Integer> missing = new TreeSet<>();
        for (int r = 1; r < size; r++) {
            missing.add(r);
        }
        try (ServerSocket server = new ServerSocket()) {
            server.setReuseAddress(true);
            server.bind(resolved(start));
            while (!missing.isEmpty()) {
                int waitMs = remainingMillis(deadline);
                if (waitMs <= 0) {
                    throw timedOut(start, missing);
                }
                server.setSoTimeout(waitMs);
                try (Socket s = server.accept()) {
                    s.setSoTimeout(Math.max(1, remainingMillis(deadline)));
                    int from = readHello(s, start, missing);
                    DataOutputStream out = new DataOutputStream(s.getOutputStream());
                    out.writeInt(ID_MAGIC);
                    out.write(id);
                    out.flush();
                    missing.remove(from);
                } catch (SocketTimeoutException e) {
                    throw timedOut(start, missing);
                }
            }
        } catch (IOException e) {
            throw fail(start, List.copyOf(missing), "rank 0 could not serve the NCCL id at " + where() + ": " + e, e);
        }
    }

    /** Reads and checks a hello; returns the sender's rank. */
    private int readHello(Socket s, long start, TreeSet<Integer> missing) throws IOException {
        String peer = s.getRemoteSocketAddress().toString();
        byte[] hello = readFully(s, HELLO_BYTES, start, List.copyOf(missing),
                "rank 0 at " + where() + ": the hello from " + peer);
        ByteBuffer b = ByteBuffer.wrap(hello);
        int magic = b.getInt(), from = b.getInt(), theirSize = b.getInt();
        if (magic != HELLO_MAGIC) {
            throw fail(start, List.copyOf(missing), String.format("rank 0 at %s: corrupt hello from %s (magic 0x%08x,"
                    + " expected 0x%08x): is another program using this port?", where(), peer, magic, HELLO_MAGIC),
                    null);
        }
        if (theirSize != size) { // a culprit only if it names one of our ranks
            throw fail(start, from >= 1 && from < size ? List.of(from) : List.of(), "rank 0 at " + where() + ": rank "
                    + from + " (" + peer + ") was started with " + theirSize + " ranks, this one with " + size, null);
        }
        if (from < 1 || from >= size || !missing.contains(from)) {
            throw fail(start, List.of(), "rank 0 at " + where() + ": " + peer + " claims rank " + from + ", which is "
                    + (from < 1 || from >= size ? "out of [1, " + size + ")" : "already checked in")
                    + ": two processes have the same rank?", null);
        }
        return from;
    }

    // ---------------------------------------------------------------- rank r > 0

    private byte[] fetch(long start, long deadline) {
        long backoff = FIRST_BACKOFF_NANOS;
        int attempts = 0;
        IOException last = null;
        while (true) {
            int waitMs = remainingMillis(deadline);
            if (waitMs <= 0) {
                throw fail(start, List.of(0), "rank " + rank + ": rank 0 did not answer at " + where() + " within "
                        + CollectiveException.seconds(System.nanoTime() - start) + " (" + attempts + " attempts"
                        + (last == null ? "" : ", last: " + last) + "): is rank 0 running, with this address?", last);
            }
            attempts++;
            try (Socket s = new Socket()) {
                s.connect(resolved(start), Math.min(waitMs, 1000));
                s.setSoTimeout(Math.max(1, remainingMillis(deadline)));
                DataOutputStream out = new DataOutputStream(s.getOutputStream());
                out.writeInt(HELLO_MAGIC);
                out.writeInt(rank);
                out.writeInt(size);
                out.flush();
                byte[] msg = readFully(s, ID_MESSAGE_BYTES, start, List.of(0),
                        "rank " + rank + ": the id from rank 0 at " + where());
                ByteBuffer b = ByteBuffer.wrap(msg);
                int magic = b.getInt();
                if (magic != ID_MAGIC) {
                    throw fail(start, List.of(0), String.format("rank %d: corrupt message from rank 0 at %s (magic"
                            + " 0x%08x, expected 0x%08x): is another program listening there?", rank, where(), magic,
                            ID_MAGIC), null);
                }
                byte[] id = new byte[ID_BYTES];
                b.get(id);
                return id;
            } catch (ConnectException | NoRouteToHostException | SocketTimeoutException e) {
                last = e; // nobody listens yet (or the connect timed out): retry
            } catch (IOException e) {
                throw fail(start, List.of(0), "rank " + rank + ": exchange with rank 0 at " + where() + " failed: "
                        + e, e);
            }
            long pause = Math.min(backoff, deadline - System.nanoTime());
            if (pause > 0) {
                LockSupport.parkNanos(pause);
            }
            backoff = Math.min(2 * backoff, MAX_BACKOFF_NANOS);
        }
    }

    // ---------------------------------------------------------------- shared

    /** Exactly {@code n} bytes, or a clear "short message" / timeout failure. */
    private byte[] readFully(Socket s, int n, long start, List<Integer> culprits, String what) throws IOException {
        byte[] buf = new byte[n];
        DataInputStream in = new DataInputStream(s.getInputStream());
        int got = 0;
        try {
            while (got < n) {
                int k = in.read(buf, got, n - got);
                if (k < 0) {
                    throw new EOFException();
                }
                got += k;
            }
        } catch (EOFException e) {
            throw fail(start, culprits, what + " is short: " + got + " of " + n + " bytes before the connection closed",
                    null);
        } catch (SocketTimeoutException e) {
            throw fail(start, culprits, what + " did not arrive in time: " + got + " of " + n + " bytes after "
                    + CollectiveException.seconds(System.nanoTime() - start), e);
        }
        return buf;
    }

    private InetSocketAddress resolved(long start) {
        InetSocketAddress a = new InetSocketAddress(address.getHostString(), address.getPort());
        if (a.isUnresolved()) {
            throw fail(start, List.of(), "rank " + rank + ": cannot resolve the rendezvous host of " + where(), null);
        }
        return a;
    }

    private CollectiveException timedOut(long start, TreeSet<Integer> missing) {
        return fail(start, new ArrayList<>(missing), "rank 0 at " + where() + ": rank(s) " + missing + " of " + size
                + " did not check in within " + CollectiveException.seconds(System.nanoTime() - start), null);
    }

    private CollectiveException fail(long start, List<Integer> culprits, String message, Throwable cause) {
        return new CollectiveException(WHAT, culprits, Duration.ofNanos(System.nanoTime() - start), message, cause);
    }

    private static int remainingMillis(long deadline) {
        long ns = deadline - System.nanoTime();
        return ns <= 0 ? 0 : (int) Math.min(Integer.MAX_VALUE, Math.max(1, ns / 1_000_000));
    }
}
