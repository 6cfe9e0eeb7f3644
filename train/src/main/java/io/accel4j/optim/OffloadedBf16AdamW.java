package io.accel4j.optim;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.HalfParameters;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * {@link Bf16StoreAdamW} run on the host (ZeRO-Offload's layout, {@code --bf16-params --offload-optimizer}): the fp32
 * master weights and the moments live in host memory ({@link DeviceMemory#hostArena()}: page-locked on a GPU) and are
 * updated by the host backend's fused {@code adamwBf16}; the backend's memory keeps only the bf16 working weights
 * ({@link HalfParameters}) and the gradients. A step moves, for each piece of at most {@link #CHUNK} elements, the
 * fp32 gradients down into a host chunk, updates it on the host, and copies the stochastically rounded bf16 values up
 * into the store — 4 + 2 bytes a parameter over the link instead of fp32 offload's 4 + 4. The update is element-wise
 * with the same random bits as {@link Bf16StoreAdamW}'s, so on a CPU backend the two are the same bits.
 *
 * <p>Host memory: master, m, v (12 bytes a parameter) and the chunks (4 + 2 bytes × {@code min(CHUNK, Ψ)}):
 * {@link #hostBytes(long)}. Not overlapped with the forward (as {@link Offload}). The whole vector only.
 */
public final class OffloadedBf16AdamW implements Optimizer {

    /** Elements moved at a time: 64 Ki. */
    public static final long CHUNK = 1 << 16;

    private final Bf16AdamW.Spec spec;
    private final Ops host;
    private final DeviceMemory device;
    private final HalfParameters params;
    private final Bf16StoreAdamW.Gradients grads;
    private final Groups groups;
    private final DeviceArena arena;
    private final Map<String, MemorySegment> state = new LinkedHashMap<>();
    private final MemorySegment hostGrads;
    private final MemorySegment hostBf16;

    /**
     * AdamW of {@code spec} on {@code host} (a host backend) writing {@code params}, which live in {@code device}'s
     * memory with the gradients {@code grads}; the master starts as the store's values.
     *
     * @throws IllegalArgumentException when {@code host} is not a host backend or the store is not the table's size
     */
    public OffloadedBf16AdamW(Bf16AdamW.Spec spec, Ops device, Ops host, ParameterTable table, HalfParameters params,
                              Bf16StoreAdamW.Gradients grads) {
        this.spec = Objects.requireNonNull(spec, "spec");
        this.host = Objects.requireNonNull(host, "host");
        this.device = device.memory();
        this.params = Objects.requireNonNull(params, "params");
        this.grads = Objects.requireNonNull(grads, "grads");
        if (!host.memory().hostAccessible()) {
            throw new IllegalArgumentException("an offloaded optimizer runs on a host backend, got " + host.describe());
        }
        long n = table.count();
        if (params.count() != n) {
            throw new IllegalArgumentException("the bf16 store holds " + params.count() + " parameters, the table "
                    + "covers " + n);
        }
        this.groups = Groups.of(table, spec.decayAll(), 0, n);
        this.arena = this.device.hostArena();
        try {
            for (String s : new String[] {"master", "m", "v"}) {
                MemorySegment b = arena.allocate(n * Float.BYTES);
                b.fill((byte) 0);
                state.put(s, b);
            }
            long chunk = Math.min(CHUNK, n);
            this.hostGrads = arena.allocate(chunk * Float.BYTES);
            this.hostBf16 = arena.allocate(chunk * 2);
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
        params.readToHost(state.get("master"));
    }

    /** Host bytes of {@code count} parameters: master, m, v and the two chunks. */
    public static long hostBytes(long count) {
        return 12 * count + 6 * Math.min(CHUNK, count);
    }

    @Override
    public void step(int t, float lr, float gradScale) {
        MemorySegment master = state.get("master"), m = state.get("m"), v = state.get("v");
        long seed = spec.seed(t);
        groups.forEachRange(lr, spec.beta1(), spec.beta2(), spec.eps(), spec.weightDecay(), (r, rc) -> {
            long end = r.offset() + r.length();
            for (long from = r.offset(); from < end; from += CHUNK) {
                grads.chunks(from, Math.min(CHUNK, end - from), (o, g, n) -> {
                    device.copyToHost(g, hostGrads.asSlice(0, n * Float.BYTES));
                    params.update(o, n, (po, bf16, pn) -> {
                        MemorySegment h = hostBf16.asSlice(0, pn * 2);
                        host.adamwBf16(h, slice(master, po, pn), hostGrads.asSlice((po - o) * Float.BYTES,
                                pn * Float.BYTES), slice(m, po, pn), slice(v, po, pn), po, pn, rc, t, gradScale,
                                seed);
                        device.copyToDevice(h, bf16);
                    });
                });
            }
        });
    }

    private static MemorySegment slice(MemorySegment s, long offset, long n) {
        return s.asSlice(offset * Float.BYTES, n * Float.BYTES);
    }

    /** The rounding seed of step {@code t} ({@link Bf16AdamW.Spec#seed}). */
    public long seed(int t) {
        return spec.seed(t);
    }

    @Override
    public Map<String, MemorySegment> state() {
        return java.util.Collections.unmodifiableMap(state);
    }

    /** Host memory. */
    @Override
    public DeviceMemory stateMemory() {
        return host.memory();
    }

    /** The two chunks. */
    @Override
    public long hostScratchBytes() {
        return hostGrads.byteSize() + hostBf16.byteSize();
    }

    @Override
    public String describe() {
        return "AdamW with fp32 master weights writing bf16 working weights (stochastic rounding), offloaded to host "
                + "memory (beta1=" + spec.beta1() + ", beta2=" + spec.beta2() + ", eps=" + spec.eps()
                + ", weight_decay=" + spec.weightDecay() + ", seed=" + spec.seed() + ")";
    }

    @Override
    public void close() {
        arena.close();
    }
}
