package io.accel4j.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Checks that data-parallel replicas hold the same parameters: a 64-bit FNV-1a hash of the fp32 words, split in four
 * 16-bit pieces (exact in fp32), whose maximum and minimum over the ranks (one {@code allReduce(MAX)} of the pieces
 * and their negations) must agree.
 */
final class ReplicaCheck {

    private ReplicaCheck() {}

    /** Throws an {@link IllegalStateException} on every rank unless all ranks' first {@code count} floats agree. */
    static void check(Communicator comm, MemorySegment p, long count) {
        long h = 0xcbf29ce484222325L;
        for (long i = 0; i < count; i++) {
            h ^= p.getAtIndex(ValueLayout.JAVA_INT_UNALIGNED, i) & 0xFFFF_FFFFL;
            h *= 0x100000001b3L;
        }
        try (Arena tmp = Arena.ofShared()) {
            MemorySegment pieces = tmp.allocate(8 * Float.BYTES, 64);
            for (int k = 0; k < 4; k++) {
                float piece = (h >>> (16 * k)) & 0xFFFF;
                pieces.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, k, piece);
                pieces.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 4 + k, -piece);
            }
            comm.allReduce(pieces, 8, DType.FP32, ReduceOp.MAX);
            for (int k = 0; k < 4; k++) {
                float max = pieces.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, k);
                float min = -pieces.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 4 + k);
                if (max != min) {
                    throw new IllegalStateException("the ranks' parameters differ (rank " + comm.rank()
                            + "'s checksum is " + Long.toHexString(h) + "): every rank must start from the same "
                            + "parameters (the same --seed or model file)");
                }
            }
        }
    }
}
