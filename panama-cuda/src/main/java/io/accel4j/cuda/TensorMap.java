package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/**
 * A TMA descriptor ({@code CUtensorMap}: 128 opaque bytes, 128-byte aligned) encoded by the driver's
 * {@code cuTensorMapEncodeTiled}: a tiled view of a global tensor that {@code cp.async.bulk.tensor} copies boxes of.
 * It owns no native resource (the bytes live in the caller's arena) and is passed to a kernel by value, as a
 * {@code const __grid_constant__ CUtensorMap} parameter ({@link CudaKernel#launch} copies the 128 bytes). It holds
 * the tensor's device address: encode it again for another buffer.
 */
public final class TensorMap {

    private final MemorySegment bytes;

    private TensorMap(MemorySegment bytes) {
        this.bytes = bytes;
    }

    /**
     * A bf16 tensor of {@code dims.length} (1 … 5) dimensions, innermost first, at device address {@code address}
     * (16-byte aligned): {@code strides[i]} is the byte distance between consecutive indices of dimension i + 1
     * (multiples of 16), {@code box} the extent of a copy in each dimension (≤ 256; box[0]·2 bytes a multiple of 16,
     * at most the swizzle span); element strides 1, no interleave, L2 promotion 128 bytes, out-of-bounds elements
     * zero. {@code swizzle} is a {@code CU_TENSOR_MAP_SWIZZLE_*} value.
     *
     * @throws CudaException if the driver refuses the description (its checks are the documented ones)
     */
    public static TensorMap bf16Tiled(CudaContext context, Arena arena, long address, long[] dims, long[] strides,
                                      int[] box, int swizzle) {
        int rank = dims.length;
        if (rank < 1 || rank > 5 || strides.length != rank - 1 || box.length != rank) {
            throw new IllegalArgumentException("a rank-" + rank + " tensor map takes " + (rank - 1) + " strides and "
                    + rank + " box extents, got " + strides.length + " and " + box.length);
        }
        MemorySegment map = arena.allocate(cuda_h.CUtensorMap);
        int[] ones = new int[rank];
        Arrays.fill(ones, 1);
        context.makeCurrent();
        try (Arena scratch = Arena.ofConfined()) {
            check("cuTensorMapEncodeTiled(dims " + Arrays.toString(dims) + ", strides " + Arrays.toString(strides)
                    + ", box " + Arrays.toString(box) + ", swizzle " + swizzle + ")",
                    cuda_h.cuTensorMapEncodeTiled(map, cuda_h.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank,
                            MemorySegment.ofAddress(address), scratch.allocateFrom(ValueLayout.JAVA_LONG, dims),
                            scratch.allocateFrom(ValueLayout.JAVA_LONG, strides.length == 0 ? new long[1] : strides),
                            scratch.allocateFrom(ValueLayout.JAVA_INT, box),
                            scratch.allocateFrom(ValueLayout.JAVA_INT, ones), cuda_h.CU_TENSOR_MAP_INTERLEAVE_NONE,
                            swizzle, cuda_h.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            cuda_h.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
        }
        return new TensorMap(map);
    }

    /** A map from its 128 bytes as the driver encoded them (tests; the bytes are not copied). */
    static TensorMap of(MemorySegment bytes) {
        if (bytes.byteSize() != cuda_h.CUtensorMap.byteSize()) {
            throw new IllegalArgumentException("a CUtensorMap is " + cuda_h.CUtensorMap.byteSize() + " bytes, got "
                    + bytes.byteSize());
        }
        return new TensorMap(bytes);
    }

    /** The 128 bytes (read-only view). */
    public MemorySegment bytes() {
        return bytes.asReadOnly();
    }
}
