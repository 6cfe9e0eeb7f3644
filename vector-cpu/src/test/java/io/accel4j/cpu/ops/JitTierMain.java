package io.accel4j.cpu.ops;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.testing.Buffers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Prints a digest of LayerNorm's forward and backward outputs on fixed inputs, for {@link JitTierTest}, which runs it
 * in JVMs that execute the kernels in different JIT tiers.
 */
public final class JitTierMain {

    private JitTierMain() {
    }

    public static void main(String[] args) {
        int N = 3, C = 301;
        SplittableRandom rnd = new SplittableRandom(20261202);
        try (Arena arena = Arena.ofShared(); Parallel pool = new Parallel(1)) {
            MemorySegment inp = Buffers.floats(arena, Buffers.uniform(rnd, N * C, 3));
            MemorySegment weight = Buffers.floats(arena, Buffers.uniform(rnd, C, 1.5));
            MemorySegment bias = Buffers.floats(arena, Buffers.uniform(rnd, C, 1));
            MemorySegment dout = Buffers.floats(arena, Buffers.uniform(rnd, N * C, 1));
            MemorySegment out = arena.allocate(4L * N * C), mean = arena.allocate(4L * N), rstd = arena.allocate(4L * N);
            MemorySegment dinp = arena.allocate(4L * N * C), dw = arena.allocate(4L * C), db = arena.allocate(4L * C);
            int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 1;
            for (int round = 1; round <= rounds; round++) { // later rounds run in ever higher JIT tiers
                dinp.fill((byte) 0);
                LayerNorm.forward(pool, out, mean, rstd, inp, weight, bias, N, C);
                LayerNorm.backward(pool, dinp, dw, db, dout, inp, weight, mean, rstd, N, C);
                if (round == 1 || round == rounds) {
                    int h = 1;
                    for (MemorySegment s : new MemorySegment[] {out, mean, rstd, dinp}) {
                        h = 31 * h + Arrays.hashCode(s.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
                    }
                    System.out.println("digest " + Integer.toHexString(h));
                }
            }
        }
    }
}
