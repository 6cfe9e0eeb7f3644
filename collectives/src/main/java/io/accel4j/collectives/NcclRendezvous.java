package io.accel4j.collectives;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * How the ranks of an NCCL communicator agree on its 128-byte unique id before {@code ncclCommInitRank}: rank 0
 * makes it ({@code ncclGetUniqueId}), every other rank receives it. Two ways:
 * <ul>
 *   <li>{@link #over(Communicator)}: a broadcast from rank 0 on a host communicator that already exists (the Open MPI
 *       backend under {@code mpirun}, or the in-process group);</li>
 *   <li>{@link #tcp(String, int, int, Duration)}: torchrun's way, a small TCP exchange at {@code host:port} where
 *       rank 0 listens and the others connect, retrying until the timeout (see {@link TcpRendezvous}).</li>
 * </ul>
 */
public interface NcclRendezvous {

    /** Bytes of an NCCL unique id ({@code NCCL_UNIQUE_ID_BYTES}). */
    int ID_BYTES = 128;

    /**
     * Returns the id on every rank: rank 0 calls {@code makeId} (once) and hands the result out; the other ranks
     * never call it.
     *
     * @throws CollectiveException when the id cannot be exchanged in time, naming the rank(s) missing and where
     */
    byte[] exchange(Supplier<byte[]> makeId);

    /** A broadcast of the id from rank 0 over {@code hostComm} (host memory; the communicator stays the caller's). */
    static NcclRendezvous over(Communicator hostComm) {
        Objects.requireNonNull(hostComm, "hostComm");
        return makeId -> {
            try (Arena arena = Arena.ofShared()) {
                MemorySegment buf = arena.allocate(ID_BYTES);
                if (hostComm.rank() == 0) {
                    buf.copyFrom(MemorySegment.ofArray(checkId(makeId.get())));
                }
                hostComm.broadcast(buf, ID_BYTES, DType.FP8_E4M3, 0); // one-byte elements: only moves bytes
                return buf.toArray(ValueLayout.JAVA_BYTE);
            }
        };
    }

    /**
     * The TCP rendezvous at {@code hostPort} ({@code "host:port"}, e.g. {@code "10.0.0.1:29500"}) for {@code rank} of
     * {@code size}: rank 0 listens there, the others connect; each gives up after {@code timeout}.
     */
    static NcclRendezvous tcp(String hostPort, int rank, int size, Duration timeout) {
        return new TcpRendezvous(TcpRendezvous.parse(hostPort), rank, size, timeout);
    }

    /** {@code id} when it is {@value #ID_BYTES} bytes; otherwise an exception saying how long it is. */
    static byte[] checkId(byte[] id) {
        Objects.requireNonNull(id, "id");
        if (id.length != ID_BYTES) {
            throw new IllegalArgumentException("an NCCL unique id is " + ID_BYTES + " bytes, got " + id.length);
        }
        return id;
    }
}
