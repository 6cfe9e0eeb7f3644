package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A {@link TcpCommunicator} rank in another process, killed with {@code SIGKILL} in the middle of all-reduces: the
 * ranks in this JVM fail promptly (the 30 s timeout is not what stops them), at least one naming it.
 */
class TcpKilledProcessTest {

    @Test
    void aKilledProcessFailsTheOtherRanksPromptlyNamingIt() throws Exception {
        int n = 3, victim = 2;
        String at = "127.0.0.1:" + TcpCommunicatorTest.freePort();
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        for (String f : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (!f.startsWith("-agentlib:") && !f.startsWith("-javaagent:")) {
                cmd.add(f);
            }
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), TcpRankMain.class.getName(), at,
                Integer.toString(victim), Integer.toString(n)));
        Process child = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        try {
            Thread killer = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(),
                        StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        if (line.equals("ready")) {
                            Thread.sleep(300);
                            child.destroyForcibly(); // SIGKILL: no goodbye, the OS closes its sockets
                        }
                    }
                } catch (Exception e) {
                    // the child is gone
                }
            });
            killer.setDaemon(true);
            killer.start();
            long t0 = System.nanoTime();
            List<Object> res = TcpCommunicatorTest.groupOf(at, n, 2, Duration.ofSeconds(30), comm -> {
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment buf = arena.allocate(4L * 10_000);
                    while (true) {
                        comm.allReduce(buf, 10_000, DType.FP32, ReduceOp.SUM);
                    }
                }
            });
            double s = (System.nanoTime() - t0) / 1e9;
            assertThat(child.waitFor(10, TimeUnit.SECONDS)).isTrue();
            assertThat(s).as("failing took far less than the 30 s timeout").isLessThan(15);
            for (int r = 0; r < 2; r++) {
                assertThat(res.get(r)).as("rank %d", r).isInstanceOf(CollectiveException.class);
            }
            // rank 0 reads from the killed rank 2, rank 1 writes to it: at least one sees it go; the other may
            // instead see its neighbour give up (killed mid-step, which one notices first is a race)
            String both = ((Throwable) res.get(0)).getMessage() + "\n" + ((Throwable) res.get(1)).getMessage();
            assertThat(both).contains("lost the connection to rank 2");
        } finally {
            child.destroyForcibly();
        }
    }
}
