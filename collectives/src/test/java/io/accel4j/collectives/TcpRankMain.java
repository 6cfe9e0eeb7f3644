package io.accel4j.collectives;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;

/**
 * One rank of {@link TcpKilledProcessTest} in a process of its own: {@code host:port rank size}, configuration hash
 * 7 like {@link TcpCommunicatorTest}'s ranks; it all-reduces forever (printing "ready" after the first), until killed.
 */
public final class TcpRankMain {

    private TcpRankMain() {}

    public static void main(String[] args) {
        int rank = Integer.parseInt(args[1]), size = Integer.parseInt(args[2]);
        try (TcpCommunicator c = TcpCommunicator.connect(args[0], rank, size, 7, Duration.ofSeconds(30));
             Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(4L * 10_000);
            for (long i = 0; ; i++) {
                c.allReduce(buf, 10_000, DType.FP32, ReduceOp.SUM);
                if (i == 0) {
                    System.out.println("ready");
                    System.out.flush();
                }
            }
        }
    }
}
