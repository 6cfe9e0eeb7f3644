package io.accel4j.collectives;

import io.accel4j.core.Bf16;
import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;

/**
 * Run under {@code mpirun -np N}: every collective of {@link MpiCommunicator} on values whose sums are exact in fp32
 * and bf16 (small integers), checked against closed forms, and the NCCL id rendezvous over it; prints {@code OK rank r of N} and exits 0, or prints the
 * first difference and exits 1.
 */
public final class MpiSmokeMain {

    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED;

    private MpiSmokeMain() {}

    /** Rank r's element i: small integers, so every sum is exact whatever the order. */
    static float value(int r, long i) {
        return (float) ((i % 13) + 3 * r - 5);
    }

    public static void main(String[] args) {
        int count = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_003;
        try (MpiCommunicator comm = MpiCommunicator.world(Duration.ofSeconds(60)); Arena arena = Arena.ofShared()) {
            int r = comm.rank(), n = comm.size();
            // all-reduce fp32 and bf16, SUM / AVG / MAX
            for (DType dtype : new DType[] {DType.FP32, DType.BF16}) {
                for (ReduceOp op : ReduceOp.values()) {
                    MemorySegment buf = fill(arena, r, 0, count, dtype);
                    comm.allReduce(buf, count, dtype, op);
                    for (long i = 0; i < count; i++) {
                        expect("allReduce " + dtype + " " + op, i, get(buf, i, dtype), reduced(n, i, op));
                    }
                }
            }
            // reduce-scatter: chunk r of the sum
            MemorySegment send = fill(arena, r, 0, count, DType.FP32);
            long from = Chunks.start(count, n, r), len = Chunks.length(count, n, r);
            MemorySegment recv = arena.allocate(Math.max(1, len) * 4);
            comm.reduceScatter(send, recv, count, DType.FP32, ReduceOp.SUM);
            for (long j = 0; j < len; j++) {
                expect("reduceScatter", j, recv.getAtIndex(F32, j), reduced(n, from + j, ReduceOp.SUM));
            }
            // all-gather: chunk q from rank q
            MemorySegment all = arena.allocate(Math.max(1, (long) count) * 4);
            comm.allGather(fill(arena, r, from, len, DType.FP32), all, count, DType.FP32);
            for (int q = 0; q < n; q++) {
                for (long i = Chunks.start(count, n, q); i < Chunks.start(count, n, q + 1); i++) {
                    expect("allGather", i, all.getAtIndex(F32, i), value(q, i));
                }
            }
            // broadcast from the last rank, barrier, send/recv around the ring
            MemorySegment b = fill(arena, r, 0, count, DType.FP32);
            comm.broadcast(b, count, DType.FP32, n - 1);
            for (long i = 0; i < count; i++) {
                expect("broadcast", i, b.getAtIndex(F32, i), value(n - 1, i));
            }
            comm.barrier();
            if (n > 1) {
                MemorySegment in = arena.allocate(Math.max(1, (long) count) * 4);
                if (r % 2 == 0) {
                    comm.send(fill(arena, r, 0, count, DType.FP32), count, DType.FP32, (r + 1) % n);
                    comm.recv(in, count, DType.FP32, (r - 1 + n) % n);
                } else {
                    comm.recv(in, count, DType.FP32, (r - 1 + n) % n);
                    comm.send(fill(arena, r, 0, count, DType.FP32), count, DType.FP32, (r + 1) % n);
                }
                for (long i = 0; i < count; i++) {
                    expect("send/recv", i, in.getAtIndex(F32, i), value((r - 1 + n) % n, i));
                }
            }
            // the NCCL unique-id rendezvous over MPI: rank 0's 128 bytes reach every rank (no NCCL needed)
            byte[] id = NcclRendezvous.over(comm).exchange(() -> {
                byte[] made = new byte[NcclRendezvous.ID_BYTES];
                for (int i = 0; i < made.length; i++) {
                    made[i] = (byte) (7 * i + 1);
                }
                return made;
            });
            for (int i = 0; i < id.length; i++) {
                expect("NcclRendezvous.over", i, id[i], (byte) (7 * i + 1));
            }
            // a failed status code becomes an exception carrying MPI_Error_string (6 = MPI_ERR_RANK)
            try {
                MpiCommunicator.check("MPI_Send", 6, r);
                throw new IllegalStateException("status 6 was not reported");
            } catch (CollectiveException e) {
                if (!e.getMessage().contains("MPI_Send failed on rank " + r + ": MPI error 6: ")
                        || !e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("rank")) {
                    throw new IllegalStateException("unexpected message: " + e.getMessage());
                }
                if (r == 0) {
                    System.out.println("error message: " + e.getMessage());
                }
            }
            System.out.println("OK rank " + r + " of " + n);
        } catch (RuntimeException e) {
            System.out.println("FAILED: " + e);
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }

    static float reduced(int n, long i, ReduceOp op) {
        float sum = 0, max = Float.NEGATIVE_INFINITY;
        for (int q = 0; q < n; q++) {
            sum += value(q, i);
            max = Math.max(max, value(q, i));
        }
        return switch (op) {
            case SUM -> sum;
            case AVG -> n > 1 ? sum / n : sum;
            case MAX -> max;
        };
    }

    static MemorySegment fill(Arena arena, int r, long from, long count, DType dtype) {
        MemorySegment s = arena.allocate(Math.max(1, count) * dtype.byteSize(), 64);
        for (long i = 0; i < count; i++) {
            if (dtype == DType.FP32) {
                s.setAtIndex(F32, i, value(r, from + i));
            } else {
                s.setAtIndex(I16, i, Bf16.fromFloat(value(r, from + i)));
            }
        }
        return s;
    }

    static float get(MemorySegment s, long i, DType dtype) {
        return dtype == DType.FP32 ? s.getAtIndex(F32, i) : Bf16.toFloat(s.getAtIndex(I16, i));
    }

    static void expect(String what, long i, float got, float want) {
        // bf16 AVG rounds sum/N to bf16; compare through the same rounding when the value is not exact in bf16
        if (got != want && got != Bf16.toFloat(Bf16.fromFloat(want))) {
            throw new IllegalStateException(what + ": element " + i + " is " + got + ", expected " + want);
        }
    }
}
