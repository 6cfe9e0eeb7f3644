package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The TCP rendezvous for real, on the loopback interface: N ranks as threads, rank 0 arriving late (so the others
 * retry), rank 0 never coming, a rank never coming, and rank 0 or a rank talking to something that is not the
 * rendezvous (corrupt and short messages). Every failure names host:port, the rank and the culprits.
 */
class TcpRendezvousTest {

    /** Long enough for a loaded 2-core machine; the failure tests use a short one of their own. */
    static final Duration TIMEOUT = Duration.ofSeconds(30);
    static final Duration SHORT = Duration.ofMillis(600);
    static final String HOST = "127.0.0.1";

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName(HOST))) {
            return s.getLocalPort();
        }
    }

    static byte[] randomId(long seed) {
        byte[] id = new byte[NcclRendezvous.ID_BYTES];
        new Random(seed).nextBytes(id);
        return id;
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 4})
    void everyRankGetsRankZerosId(int n) throws Exception {
        int port = freePort();
        long seed = System.nanoTime();
        byte[] id = randomId(seed);
        AtomicInteger made = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Future<byte[]>> got = new ArrayList<>();
            for (int r = n - 1; r >= 0; r--) { // the others first: they must retry until rank 0 listens
                int rank = r;
                got.add(0, pool.submit(() -> {
                    if (rank == 0) {
                        Thread.sleep(300);
                    }
                    return NcclRendezvous.tcp(HOST + ":" + port, rank, n, TIMEOUT).exchange(() -> {
                        made.incrementAndGet();
                        return id.clone();
                    });
                }));
            }
            for (int r = 0; r < n; r++) {
                assertThat(got.get(r).get(60, TimeUnit.SECONDS)).as("rank %d, seed %d", r, seed).isEqualTo(id);
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(made).as("makeId is called once, on rank 0").hasValue(1);
        // rank 0 closed its listening socket: the port can be bound again at once
        try (ServerSocket again = new ServerSocket()) {
            again.setReuseAddress(true);
            again.bind(new java.net.InetSocketAddress(HOST, port));
        }
    }

    @Test
    void rankZeroNeverComes() throws Exception {
        int port = freePort();
        long t0 = System.nanoTime();
        assertThatThrownBy(() -> NcclRendezvous.tcp(HOST + ":" + port, 1, 2, SHORT).exchange(() -> {
            throw new AssertionError("only rank 0 makes the id");
        }))
                .isInstanceOfSatisfying(CollectiveException.class, e -> {
                    assertThat(e.collective()).isEqualTo("ncclRendezvous");
                    assertThat(e.culprits()).containsExactly(0);
                    assertThat(e.elapsed()).isGreaterThanOrEqualTo(SHORT);
                })
                .hasMessageContaining("rank 1: rank 0 did not answer at " + HOST + ":" + port)
                .hasMessageContaining("attempts");
        assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(SHORT.multipliedBy(10));
    }

    @Test
    void aRankNeverComes() throws Exception {
        int port = freePort();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            Future<byte[]> one = pool.submit(() -> NcclRendezvous.tcp(HOST + ":" + port, 1, 3, TIMEOUT)
                    .exchange(() -> null));
            assertThatThrownBy(() -> NcclRendezvous.tcp(HOST + ":" + port, 0, 3, Duration.ofSeconds(5))
                    .exchange(() -> randomId(1)))
                    .isInstanceOfSatisfying(CollectiveException.class,
                            e -> assertThat(e.culprits()).containsExactly(2))
                    .hasMessageContaining("rank 0 at " + HOST + ":" + port + ": rank(s) [2] of 3 did not check in");
            assertThat(one.get(60, TimeUnit.SECONDS)).isEqualTo(randomId(1)); // rank 1 got it before the timeout
        } finally {
            pool.shutdownNow();
        }
    }

    /** A fake rank 0 that answers every connection with {@code reply}, then closes it. */
    static Future<?> fakeRankZero(ServerSocket server, byte[] reply) {
        ExecutorService pool = Executors.newSingleThreadExecutor();
        Future<?> f = pool.submit(() -> {
            try (Socket s = server.accept()) {
                s.getInputStream().readNBytes(TcpRendezvous.HELLO_BYTES);
                s.getOutputStream().write(reply);
                s.getOutputStream().flush();
            }
            return null;
        });
        pool.shutdown();
        return f;
    }

    @Test
    void corruptMessageFromRankZero() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getByName(HOST))) {
            byte[] reply = new byte[TcpRendezvous.ID_MESSAGE_BYTES];
            reply[0] = 'H'; // "HTTP" rather than the id magic
            reply[1] = 'T';
            Future<?> f = fakeRankZero(server, reply);
            assertThatThrownBy(() -> NcclRendezvous.tcp(HOST + ":" + server.getLocalPort(), 3, 4, TIMEOUT)
                    .exchange(() -> null))
                    .isInstanceOfSatisfying(CollectiveException.class, e -> assertThat(e.culprits()).containsExactly(0))
                    .hasMessageContaining("rank 3: corrupt message from rank 0 at " + HOST + ":"
                            + server.getLocalPort())
                    .hasMessageContaining("magic 0x48540000, expected 0x41344e49");
            f.get(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void shortMessageFromRankZero() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getByName(HOST))) {
            Future<?> f = fakeRankZero(server, new byte[]{0x41, 0x34, 0x4e, 0x49, 1, 2, 3, 4, 5, 6});
            assertThatThrownBy(() -> NcclRendezvous.tcp(HOST + ":" + server.getLocalPort(), 1, 2, TIMEOUT)
                    .exchange(() -> null))
                    .isInstanceOf(CollectiveException.class)
                    .hasMessageContaining("rank 1: the id from rank 0 at " + HOST + ":" + server.getLocalPort()
                            + " is short: 10 of 132 bytes");
            f.get(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void corruptHelloToRankZero() throws Exception {
        int port = freePort();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            Future<?> intruder = pool.submit(() -> {
                for (int i = 0; i < 200; i++) { // until rank 0 listens
                    Socket s;
                    try {
                        s = new Socket(HOST, port);
                    } catch (java.net.ConnectException e) {
                        Thread.sleep(20);
                        continue;
                    }
                    try (s) {
                        // one write of exactly a hello's length; rank 0 then hangs up on us, which may reset the socket
                        s.getOutputStream().write("GET / HTTP/1".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                        s.getInputStream().readAllBytes();
                    } catch (java.net.SocketException hungUp) {
                        // expected: rank 0 closed the connection
                    }
                    return null;
                }
                throw new AssertionError("rank 0 never listened");
            });
            assertThatThrownBy(() -> NcclRendezvous.tcp(HOST + ":" + port, 0, 2, TIMEOUT).exchange(() -> randomId(2)))
                    .isInstanceOfSatisfying(CollectiveException.class, e -> assertThat(e.culprits()).containsExactly(1))
                    .hasMessageContaining("rank 0 at " + HOST + ":" + port + ": corrupt hello from")
                    .hasMessageContaining("magic 0x47455420, expected 0x41344e48");
            intruder.get(30, TimeUnit.SECONDS);
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void addressAndIdAreChecked() {
        assertThatThrownBy(() -> NcclRendezvous.tcp("nohost", 0, 2, TIMEOUT))
                .hasMessage("rendezvous address must be host:port, got 'nohost'");
        assertThatThrownBy(() -> NcclRendezvous.tcp("h:x", 0, 2, TIMEOUT))
                .hasMessage("rendezvous port must be a number, got 'h:x'");
        assertThatThrownBy(() -> NcclRendezvous.tcp("h:70000", 0, 2, TIMEOUT))
                .hasMessage("rendezvous port must be in [1, 65535], got 70000");
        assertThatThrownBy(() -> NcclRendezvous.tcp("h:1", 2, 2, TIMEOUT)).hasMessage("rank 2 of 2 ranks");
        assertThat(TcpRendezvous.parse("[::1]:29500").getHostString()).isEqualTo("::1");
        assertThatThrownBy(() -> NcclRendezvous.tcp("h:1", 0, 1, TIMEOUT).exchange(() -> new byte[127]))
                .hasMessage("an NCCL unique id is 128 bytes, got 127");
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 3})
    void overAHostCommunicator(int n) {
        byte[] id = randomId(n);
        try (InProcessGroup g = InProcessGroup.create(n, TIMEOUT)) {
            List<byte[]> got = g.run(comm -> NcclRendezvous.over(comm).exchange(() -> {
                assertThat(comm.rank()).isZero();
                return id.clone();
            }));
            assertThat(got).hasSize(n).allSatisfy(b -> assertThat(b).isEqualTo(id));
        }
    }
}
