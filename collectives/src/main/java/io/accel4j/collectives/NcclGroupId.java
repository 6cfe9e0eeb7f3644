package io.accel4j.collectives;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * How the ranks of an NCCL split agree on their new group: the host communicator is split by the same color and key
 * ({@link Communicator#split}), the new group's rank 0 makes an NCCL unique id and broadcasts its bytes within the
 * group, so that every member then joins the same new NCCL communicator ({@code ncclCommInitRank}) with its host
 * group's rank and size. Kept apart from {@link NcclCommunicator} so that the agreement runs (and is tested) without
 * a GPU.
 *
 * @param hostGroup the host communicator of the new group (the NCCL communicator built on it owns it)
 * @param id        the group's NCCL unique id, the same bytes on every member
 */
public record NcclGroupId(Communicator hostGroup, byte[] id) {

    /** The size of an NCCL unique id ({@code NCCL_UNIQUE_ID_BYTES}). */
    public static final int ID_BYTES = 128;

    /**
     * Splits {@code host} by {@code color} and {@code key} and hands the id {@code uniqueId} makes on the new group's
     * rank 0 to its other members; a collective of {@code host}.
     */
    public static NcclGroupId agree(Communicator host, int color, int key, Supplier<byte[]> uniqueId) {
        Objects.requireNonNull(uniqueId, "uniqueId");
        Communicator group = host.split(color, key);
        try (Arena a = Arena.ofShared()) {
            MemorySegment buf = a.allocate(ID_BYTES, 64);
            if (group.rank() == 0) {
                byte[] id = uniqueId.get();
                if (id.length != ID_BYTES) {
                    throw new IllegalStateException("an NCCL unique id has " + ID_BYTES + " bytes, got " + id.length);
                }
                MemorySegment.copy(id, 0, buf, ValueLayout.JAVA_BYTE, 0, ID_BYTES);
            }
            group.broadcast(buf, ID_BYTES, DType.FP8_E4M3, 0); // one-byte elements: the bytes as they are
            return new NcclGroupId(group, buf.toArray(ValueLayout.JAVA_BYTE));
        } catch (RuntimeException | Error e) {
            group.close();
            throw e;
        }
    }
}
