package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The rendezvous messages fuzzed, both ways, on the loopback interface: replies of random length and content (a
 * valid magic now and then, so that lengths around a whole message are tried too) from a fake rank 0, and hellos of
 * random length and content to a real rank 0. Property: a rank either gets exactly the id a well-formed message
 * carries, or fails with a {@link CollectiveException} naming the peer at fault — no other exception, no hang. The
 * seed is printed on failure.
 */
class TcpRendezvousFuzzTest {

    private static final String HOST = TcpRendezvousTest.HOST;
    private static final Duration SHORT = Duration.ofMillis(1500);
    private static final int TRIES = 25;

    @Test
    void randomRepliesFromRankZero() throws Exception {
        long seed = System.nanoTime();
        Random r = new Random(seed);
        for (int k = 0; k < TRIES; k++) {
            int i = k;
            byte[] reply = randomMessage(r, TcpRendezvous.ID_MESSAGE_BYTES, TcpRendezvous.ID_MAGIC);
            try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getByName(HOST))) {
                Future<?> f = TcpRendezvousTest.fakeRankZero(server, reply);
                Throwable t = catchThrowable(() -> {
                    byte[] id = NcclRendezvous.tcp(HOST + ":" + server.getLocalPort(), 1, 2, SHORT)
                            .exchange(() -> null);
                    // the protocol reads a fixed 132 bytes: what follows a whole message is never read
                    assertThat(reply.length).as("seed %d, try %d: accepted %d bytes", seed, i, reply.length)
                            .isGreaterThanOrEqualTo(TcpRendezvous.ID_MESSAGE_BYTES);
                    assertThat(ByteBuffer.wrap(reply).getInt()).isEqualTo(TcpRendezvous.ID_MAGIC);
                    assertThat(id).isEqualTo(Arrays.copyOfRange(reply, 4, TcpRendezvous.ID_MESSAGE_BYTES));
                });
                if (t != null) {
                    assertThat(t).as("seed %d, try %d (%d bytes)", seed, i, reply.length)
                            .isInstanceOf(CollectiveException.class).hasMessageContaining("rank 1");
                    assertThat(((CollectiveException) t).culprits()).containsExactly(0);
                }
                f.get(30, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void randomHellosToRankZero() throws Exception {
        long seed = System.nanoTime();
        Random r = new Random(seed);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            for (int i = 0; i < TRIES; i++) {
                int port = TcpRendezvousTest.freePort();
                byte[] hello = randomMessage(r, 12, TcpRendezvous.HELLO_MAGIC);
                Future<?> intruder = pool.submit(() -> send(port, hello));
                Throwable t = catchThrowable(() -> NcclRendezvous.tcp(HOST + ":" + port, 0, 3, SHORT)
                        .exchange(() -> TcpRendezvousTest.randomId(7)));
                // a hello can at best be one rank's: the other never comes, so rank 0 always fails; the culprits it
                // names are its own ranks only, never a number a stranger sent
                assertThat(t).as("seed %d, try %d (%d bytes)", seed, i, hello.length)
                        .isInstanceOf(CollectiveException.class).hasMessageContaining("rank 0");
                assertThat(((CollectiveException) t).culprits()).as("seed %d, try %d", seed, i)
                        .allMatch(c -> c == 1 || c == 2);
                intruder.get(30, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /** Random bytes of a random length around {@code whole}; half the time with {@code magic} in front. */
    private static byte[] randomMessage(Random r, int whole, int magic) {
        int len = switch (r.nextInt(4)) {
            case 0 -> r.nextInt(whole);
            case 1 -> whole;
            case 2 -> whole + 1 + r.nextInt(8);
            default -> r.nextInt(2 * whole + 1);
        };
        byte[] m = new byte[len];
        r.nextBytes(m);
        if (len >= 4 && r.nextBoolean()) {
            ByteBuffer.wrap(m).putInt(magic);
            if (magic == TcpRendezvous.HELLO_MAGIC && len >= 12 && r.nextBoolean()) {
                ByteBuffer.wrap(m, 4, 8).putInt(1 + r.nextInt(2)).putInt(r.nextBoolean() ? 3 : r.nextInt());
            }
        }
        return m;
    }

    /** Connects to rank 0 (retrying until it listens), writes {@code m}, reads until it hangs up. */
    private static Void send(int port, byte[] m) throws Exception {
        for (int k = 0; k < 200; k++) {
            Socket s;
            try {
                s = new Socket(HOST, port);
            } catch (java.net.ConnectException e) {
                Thread.sleep(10);
                continue;
            }
            try (s) {
                s.getOutputStream().write(m);
                s.shutdownOutput();
                s.getInputStream().readAllBytes();
            } catch (IOException hungUp) {
                // rank 0 closed the connection on us
            }
            return null;
        }
        throw new AssertionError("rank 0 never listened on " + port);
    }
}
