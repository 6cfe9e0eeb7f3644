package io.accel4j.kernels;

import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Where {@link GpuMatmul}'s FP8 casts leave their amaxes until the host asks for them
 * ({@link io.accel4j.core.ops.MatmulOps#flushAmaxes}): one device slot per {@link AmaxHistory}, so that a cast
 * queues its amax instead of waiting for it (a device→host copy per cast would stall the queue several times per
 * linear layer and step). Not thread-safe.
 *
 * <p>A slot is two 32-bit words: the bit pattern of the largest amax of this history's casts since the last
 * {@link #flush} (a non-negative float or +inf, never NaN: the casts leave NaN out), and the bits of the
 * {@code scaleInv} of its latest cast, which cuBLASLt reads through {@link #scaleInvAddress} in stream order (so the
 * dequantisation factors are kernel arguments, never uploads). Slots are assigned in first-use order and kept for
 * this object's life (it holds on to the histories); the buffer doubles when full, its contents copied.
 *
 * <p>{@link #record} queues cast.cu's {@code fp8_amax_to_slot}: the cast's per-block partials reduced on the
 * device, the slot overwritten by the first cast after a flush and max-ed into by the later ones. {@link #flush}
 * copies every slot to the host in one copy (waiting for the work queued before) and
 * {@link AmaxHistory#record records} the pending ones, in slot order: since a history keeps the maximum of what it
 * is given, the result is what recording each cast at once would have given.
 */
final class Fp8AmaxSlots implements AutoCloseable {

    /** Bytes per slot: the amax bits, then the scaleInv. */
    static final int SLOT_BYTES = 8;
    /** Slots of the first buffer (5 blocks' histories; a 12-block GPT-2's 144 take two doublings, once). */
    private static final int INITIAL_SLOTS = 64;
    /** fp8_amax_to_slot's one block. */
    static final int REDUCE_BLOCK = 256;

    private final CudaContext context;
    private final CudaKernel reduce;
    private final Map<AmaxHistory, Integer> slots = new IdentityHashMap<>();
    private final List<AmaxHistory> histories = new ArrayList<>();
    /** Whether each slot holds an amax the host has not recorded yet. */
    private boolean[] pending = new boolean[0];
    private int pendingCount;
    private DeviceBuffer buffer;

    Fp8AmaxSlots(CudaContext context, CudaKernel reduce) {
        this.context = Objects.requireNonNull(context, "context");
        this.reduce = Objects.requireNonNull(reduce, "reduce");
    }

    /** {@code h}'s slot, assigned (and the buffer grown) on its first use. */
    int slot(AmaxHistory h) {
        Objects.requireNonNull(h, "history");
        Integer s = slots.get(h);
        if (s != null) {
            return s;
        }
        int i = histories.size();
        if (buffer == null || (long) (i + 1) * SLOT_BYTES > buffer.byteSize()) {
            grow(buffer == null ? INITIAL_SLOTS : 2 * pending.length);
        }
        histories.add(h);
        slots.put(h, i);
        return i;
    }

    /**
     * Queues the amax of a cast for {@code h}: the maximum of its {@code n} per-block partials ({@code partials},
     * |x| bit patterns) into {@code h}'s slot (max-ed with the slot's since the last {@link #flush}), and
     * {@code scaleInv} as the slot's dequantisation factor ({@link #scaleInvAddress}: ask for it after the last
     * record before the GEMM, since a new slot may move the buffer).
     */
    void record(AmaxHistory h, MemorySegment partials, int n, float scaleInv) {
        int s = slot(h);
        MemorySegment slot = GpuOps.device(buffer).asSlice((long) s * SLOT_BYTES, SLOT_BYTES);
        Kernels.FP8_AMAX_TO_SLOT.launch(reduce, Dim.of(1), Dim.of(REDUCE_BLOCK), 0, null, slot, partials, n,
                scaleInv, pending[s] ? 0 : 1);
        if (!pending[s]) {
            pending[s] = true;
            pendingCount++;
        }
    }

    /**
     * The device address of {@code h}'s dequantisation factor, as its latest {@link #record} wrote it; valid until
     * a history gets a new slot.
     */
    long scaleInvAddress(AmaxHistory h) {
        int s = slot(h);
        return buffer.address() + (long) s * SLOT_BYTES + Float.BYTES;
    }

    /** Histories whose amaxes wait for a {@link #flush}. */
    int pending() {
        return pendingCount;
    }

    /**
     * Records every pending amax into its history (see the class comment): one device→host copy, after the work
     * queued so far; nothing at all when none is pending.
     */
    void flush() {
        if (pendingCount == 0) {
            return;
        }
        int n = histories.size();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate((long) n * SLOT_BYTES, Float.BYTES);
            buffer.copyTo(host); // synchronous: after the casts
            for (int i = 0; i < n; i++) {
                if (pending[i]) {
                    histories.get(i).record(host.getAtIndex(ValueLayout.JAVA_FLOAT, 2L * i));
                }
            }
        }
        Arrays.fill(pending, false);
        pendingCount = 0;
    }

    /** A buffer of {@code capacity} slots holding the current one's (the queued work done before the old is freed). */
    private void grow(int capacity) {
        DeviceBuffer bigger = context.allocate((long) capacity * SLOT_BYTES);
        if (buffer != null) {
            try {
                bigger.copyFrom(buffer, buffer.byteSize());
                context.synchronize(); // queued casts and GEMMs may still use the old slots
            } catch (RuntimeException e) {
                bigger.close();
                throw e;
            }
            buffer.close();
        }
        buffer = bigger;
        pending = Arrays.copyOf(pending, capacity);
    }

    @Override
    public void close() {
        if (buffer != null) {
            buffer.close();
            buffer = null;
        }
    }
}
