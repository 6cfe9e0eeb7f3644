package io.accel4j.collectives;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.BindException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.TreeSet;
import java.util.concurrent.locks.LockSupport;

/**
 * The rendezvous of a {@link TcpCommunicator} (torchrun's static {@code env://} rendezvous): it connects every pair of
 * ranks once and returns the links. Rank 0 listens at {@code host:port}; every other rank opens a listening socket
 * of its own (any free port), connects to rank 0 (retrying with backoff, 50 ms doubling to 1 s, while nobody listens
 * yet) and says hello; once all have, rank 0 answers each with the table of listening addresses, and rank {@code r}
 * connects to ranks {@code 1 … r−1} and accepts ranks {@code r+1 … N−1}. Messages, big-endian:
 * <pre>
 *   rank r → rank 0:  HELLO "A4TH" (int), r (int), N (int), configuration hash (long), listening port (int)
 *   rank 0 → rank r:  TABLE "A4TT" (int), then for q = 1 … N−1: host (UTF), port (int)
 *                 or  REFUSE "A4TR" (int), the reason (UTF): a different N or configuration, a rank seen twice
 *   rank r → rank q:  LINK "A4TL" (int), r (int), N (int)      (q in 1 … r−1)
 * </pre>
 * Rank 0 compares every rank's world size and configuration hash with its own and refuses the job, naming the rank,
 * when they differ: every rank that says hello within a short grace (2 s) after that fails with the same message. The whole exchange gives up at
 * the timeout, naming the ranks that never came (or rank 0 when it never answered). Every failure is a
 * {@link CollectiveException} for the collective {@value #WHAT}; every socket opened is closed on failure.
 */
final class TcpMesh {

    static final String WHAT = "rendezvous";
    static final int HELLO = 0x41345448; // "A4TH"
    static final int TABLE = 0x41345454; // "A4TT"
    static final int REFUSE = 0x41345452; // "A4TR"
    static final int LINK = 0x4134544c; // "A4TL"

    private static final long FIRST_BACKOFF_NANOS = 50_000_000L;
    private static final long MAX_BACKOFF_NANOS = 1_000_000_000L;
    /** After refusing one rank, how long rank 0 still waits for the others, to tell them why. */
    private static final long REFUSE_GRACE_NANOS = 2_000_000_000L;

    private final InetSocketAddress address;
    private final int rank;
    private final int size;
    private final long configHash;
    private final long start = System.nanoTime();
    private final long deadline;
    private final List<AutoCloseable> opened = new ArrayList<>();

    private TcpMesh(InetSocketAddress address, int rank, int size, long configHash, Duration timeout) {
        this.address = Objects.requireNonNull(address, "address");
        this.rank = rank;
        this.size = size;
        this.configHash = configHash;
        this.deadline = start + timeout.toNanos();
    }

    /** Links to every other rank, indexed by rank (this rank's entry is null). */
    static TcpLink[] connect(String hostPort, int rank, int size, long configHash, Duration timeout) {
        if (size < 1 || rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " of " + size + " ranks");
        }
        TcpMesh m = new TcpMesh(TcpRendezvous.parse(hostPort), rank, size, configHash, timeout);
        TcpLink[] links = new TcpLink[size];
        boolean ok = false;
        try {
            if (rank == 0) {
                m.serve(links);
            } else {
                m.join(links);
            }
            ok = true;
            return links;
        } catch (IOException e) {
            throw m.fail(List.of(), "rank " + rank + ": rendezvous at " + m.where() + " failed: " + e, e);
        } finally {
            if (!ok) {
                m.closeAll();
            }
        }
    }

    private String where() {
        return address.getHostString() + ":" + address.getPort();
    }

    // ---------------------------------------------------------------- rank 0

    private void serve(TcpLink[] links) throws IOException {
        if (size == 1) {
            return;
        }
        ServerSocket server = new ServerSocket();
        opened.add(server);
        server.setReuseAddress(true);
        try {
            server.bind(resolved());
        } catch (BindException e) {
            throw fail(List.of(0), "rank 0 cannot listen at " + where() + ": " + e.getMessage() + " (another job "
                    + "or program uses this port? pick another port, e.g. --rdzv " + address.getHostString()
                    + ":" + (address.getPort() == 65535 ? 29500 : address.getPort() + 1) + ")", e);
        }
        TreeSet<Integer> missing = new TreeSet<>();
        for (int r = 1; r < size; r++) {
            missing.add(r);
        }
        String[] hosts = new String[size];
        int[] ports = new int[size];
        Socket[] sockets = new Socket[size];
        String problem = null;
        List<Integer> culprits = List.of();
        long refuseBy = deadline; // after a problem: a short grace for the others to arrive and be told why
        while (!missing.isEmpty()) {
            int waitMs = problem == null ? remainingMillis() : remainingMillis(refuseBy);
            if (waitMs <= 0 && problem != null) {
                break;
            }
            if (waitMs <= 0) {
                throw fail(new ArrayList<>(missing), "rank 0 at " + where() + ": rank(s) " + missing + " of " + size
                        + " did not check in within " + CollectiveException.seconds(System.nanoTime() - start));
            }
            server.setSoTimeout(waitMs);
            Socket s;
            try {
                s = server.accept();
            } catch (SocketTimeoutException e) {
                continue;
            }
            opened.add(s);
            s.setSoTimeout(Math.max(1, remainingMillis()));
            DataInputStream in = new DataInputStream(s.getInputStream());
            int magic, from, theirSize, port;
            long hash;
            try {
                magic = in.readInt();
                if (magic != HELLO) {
                    s.close(); // a stranger (a port scanner, another program): not one of ours
                    continue;
                }
                from = in.readInt();
                theirSize = in.readInt();
                hash = in.readLong();
                port = in.readInt();
            } catch (EOFException | SocketTimeoutException e) {
                s.close();
                continue;
            }
            String now = null;
            List<Integer> nowCulprits = List.of();
            if (theirSize != size) {
                now = "rank " + from + " was started with a world size of " + theirSize + ", rank 0 with "
                        + size + ": every rank needs the same WORLD_SIZE";
                nowCulprits = from >= 1 && from < size ? List.of(from) : List.of();
            } else if (from < 1 || from >= size || !missing.contains(from)) {
                now = s.getRemoteSocketAddress() + " claims rank " + from + ", which is "
                        + (from < 1 || from >= size ? "out of [1, " + size + ")" : "already checked in")
                        + ": two processes have the same RANK?";
            } else if (hash != configHash) {
                now = String.format("rank %d's training configuration differs from rank 0's (hash %016x, rank 0"
                        + " %016x): start every rank with the same flags", from, hash, configHash);
                nowCulprits = List.of(from);
            }
            if (now != null || problem != null) {
                refuse(s, now != null ? now : problem);
                if (problem == null) {
                    problem = now;
                    culprits = nowCulprits;
                    refuseBy = Math.min(deadline, System.nanoTime() + REFUSE_GRACE_NANOS);
                }
                if (now == null || missing.contains(from)) {
                    missing.remove(from);
                }
                continue;
            }
            missing.remove(from);
            sockets[from] = s;
            hosts[from] = s.getInetAddress().getHostAddress();
            ports[from] = port;
        }
        if (problem != null) {
            for (Socket other : sockets) {
                refuse(other, problem);
            }
            throw fail(culprits, "rank 0 at " + where() + ": " + problem);
        }
        for (int r = 1; r < size; r++) {
            DataOutputStream out = new DataOutputStream(sockets[r].getOutputStream());
            out.writeInt(TABLE);
            for (int q = 1; q < size; q++) {
                out.writeUTF(hosts[q]);
                out.writeInt(ports[q]);
            }
            out.flush();
            links[r] = link(r, sockets[r]);
        }
        server.close();
    }

    private static void refuse(Socket s, String problem) {
        if (s == null) {
            return;
        }
        try {
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            out.writeInt(REFUSE);
            out.writeUTF(problem);
            out.flush();
        } catch (IOException ignored) {
            // it left already; it fails on its own
        }
    }

    // ---------------------------------------------------------------- rank r > 0

    private void join(TcpLink[] links) throws IOException {
        ServerSocket mine = new ServerSocket();
        opened.add(mine);
        mine.bind(new InetSocketAddress(0));
        Socket master = connectWithRetry(resolved(), 0, "rank 0 at " + where());
        DataOutputStream out = new DataOutputStream(master.getOutputStream());
        out.writeInt(HELLO);
        out.writeInt(rank);
        out.writeInt(size);
        out.writeLong(configHash);
        out.writeInt(mine.getLocalPort());
        out.flush();
        master.setSoTimeout(Math.max(1, remainingMillis()));
        DataInputStream in = new DataInputStream(master.getInputStream());
        String[] hosts = new String[size];
        int[] ports = new int[size];
        try {
            int magic = in.readInt();
            if (magic == REFUSE) {
                throw fail(List.of(0), "rank " + rank + ": rank 0 at " + where() + " refused the job: "
                        + in.readUTF());
            }
            if (magic != TABLE) {
                throw fail(List.of(0), String.format("rank %d: corrupt answer from %s (magic 0x%08x): is another "
                        + "program listening there?", rank, where(), magic));
            }
            for (int q = 1; q < size; q++) {
                hosts[q] = in.readUTF();
                ports[q] = in.readInt();
            }
        } catch (EOFException e) {
            throw fail(List.of(0), "rank " + rank + ": rank 0 at " + where() + " closed the rendezvous before "
                    + "answering (it failed, or refused another rank)");
        } catch (SocketTimeoutException e) {
            throw fail(List.of(0), "rank " + rank + ": rank 0 at " + where() + " did not answer within "
                    + CollectiveException.seconds(System.nanoTime() - start) + " (other ranks missing?)");
        }
        links[0] = link(0, master);
        for (int q = 1; q < rank; q++) {
            Socket s = connectWithRetry(new InetSocketAddress(hosts[q], ports[q]), q,
                    "rank " + q + " at " + hosts[q] + ":" + ports[q]);
            DataOutputStream o = new DataOutputStream(s.getOutputStream());
            o.writeInt(LINK);
            o.writeInt(rank);
            o.writeInt(size);
            o.flush();
            links[q] = link(q, s);
        }
        for (int k = rank + 1; k < size; k++) {
            int waitMs = remainingMillis();
            List<Integer> late = new ArrayList<>();
            for (int q = rank + 1; q < size; q++) {
                if (links[q] == null) {
                    late.add(q);
                }
            }
            if (waitMs <= 0) {
                throw fail(late, "rank " + rank + ": rank(s) " + late + " did not connect within "
                        + CollectiveException.seconds(System.nanoTime() - start));
            }
            mine.setSoTimeout(waitMs);
            Socket s;
            try {
                s = mine.accept();
            } catch (SocketTimeoutException e) {
                k--;
                continue;
            }
            opened.add(s);
            s.setSoTimeout(Math.max(1, remainingMillis()));
            DataInputStream i = new DataInputStream(s.getInputStream());
            int magic = i.readInt(), from = i.readInt(), n = i.readInt();
            if (magic != LINK || n != size || from <= rank || from >= size || links[from] != null) {
                throw fail(List.of(), String.format("rank %d: unexpected connection from %s (magic 0x%08x, rank %d"
                        + " of %d)", rank, s.getRemoteSocketAddress(), magic, from, n));
            }
            links[from] = link(from, s);
        }
        mine.close();
    }

    private Socket connectWithRetry(InetSocketAddress to, int culprit, String who) throws IOException {
        long backoff = FIRST_BACKOFF_NANOS;
        int attempts = 0;
        IOException last = null;
        while (true) {
            int waitMs = remainingMillis();
            if (waitMs <= 0) {
                throw fail(List.of(culprit), "rank " + rank + ": " + who + " did not answer within "
                        + CollectiveException.seconds(System.nanoTime() - start) + " (" + attempts + " attempts"
                        + (last == null ? "" : ", last: " + last) + "): is it running, at this address?");
            }
            attempts++;
            Socket s = new Socket();
            try {
                s.connect(to, Math.min(waitMs, 1000));
                opened.add(s);
                return s;
            } catch (ConnectException | NoRouteToHostException | SocketTimeoutException e) {
                last = e; // nobody listens yet (or the connect timed out): retry
                s.close();
            } catch (IOException e) {
                s.close();
                throw e;
            }
            long pause = Math.min(backoff, deadline - System.nanoTime());
            if (pause > 0) {
                LockSupport.parkNanos(pause);
            }
            backoff = Math.min(2 * backoff, MAX_BACKOFF_NANOS);
        }
    }

    // ---------------------------------------------------------------- shared

    private TcpLink link(int peer, Socket s) throws IOException {
        s.setSoTimeout(0);
        return new TcpLink(peer, s);
    }

    private InetSocketAddress resolved() {
        InetSocketAddress a = new InetSocketAddress(address.getHostString(), address.getPort());
        if (a.isUnresolved()) {
            throw fail(List.of(), "rank " + rank + ": cannot resolve the rendezvous host of " + where(),
                    new UnknownHostException(address.getHostString()));
        }
        return a;
    }

    private void closeAll() {
        for (AutoCloseable c : opened) {
            try {
                c.close();
            } catch (Exception ignored) {
                // failing already
            }
        }
    }

    private CollectiveException fail(List<Integer> culprits, String message) {
        return fail(culprits, message, null);
    }

    private CollectiveException fail(List<Integer> culprits, String message, Throwable cause) {
        return new CollectiveException(WHAT, culprits, Duration.ofNanos(System.nanoTime() - start), message, cause);
    }

    private int remainingMillis() {
        return remainingMillis(deadline);
    }

    private static int remainingMillis(long until) {
        long ns = until - System.nanoTime();
        return ns <= 0 ? 0 : (int) Math.min(Integer.MAX_VALUE, Math.max(1, ns / 1_000_000));
    }
}
