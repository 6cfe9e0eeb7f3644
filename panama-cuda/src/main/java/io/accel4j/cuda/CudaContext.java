package io.accel4j.cuda;

import static io.accel4j.cuda.CudaException.check;

import io.accel4j.cuda.bindings.cuda_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The primary context of one device, retained on creation and released on {@link #close()}. Every owning object
 * made from it ({@link DeviceBuffer}, {@link Stream}, …) makes it current on the calling thread before each call,
 * so they may be used from any thread.
 */
public final class CudaContext extends NativeResource {

    private final int device;
    private final int ordinal;
    private final MemorySegment context;

    private CudaContext(int ordinal, int device, MemorySegment context) {
        this.ordinal = ordinal;
        this.device = device;
        this.context = context;
    }

    /** Initialises the driver, retains device {@code ordinal}'s primary context and makes it current. */
    public static CudaContext primary(int ordinal) {
        check("cuInit", cuda_h.cuInit(0));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dev = arena.allocate(ValueLayout.JAVA_INT);
            check("cuDeviceGet", cuda_h.cuDeviceGet(dev, ordinal));
            int device = dev.get(ValueLayout.JAVA_INT, 0);
            MemorySegment pctx = arena.allocate(ValueLayout.ADDRESS);
            check("cuDevicePrimaryCtxRetain", cuda_h.cuDevicePrimaryCtxRetain(pctx, device));
            CudaContext ctx = new CudaContext(ordinal, device, pctx.get(ValueLayout.ADDRESS, 0));
            ctx.makeCurrent();
            return ctx;
        }
    }

    /** Makes this context current on the calling thread. */
    public void makeCurrent() {
        ensureOpen();
        check("cuCtxSetCurrent", cuda_h.cuCtxSetCurrent(context));
    }

    /** The {@code CUdevice}. */
    public int device() {
        return device;
    }

    /** A {@code CU_DEVICE_ATTRIBUTE_*} value of this device. */
    public int attribute(int attribute) {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(ValueLayout.JAVA_INT);
            check("cuDeviceGetAttribute", cuda_h.cuDeviceGetAttribute(v, attribute, device));
            return v.get(ValueLayout.JAVA_INT, 0);
        }
    }

    /** The device's name, e.g. {@code "NVIDIA H100 80GB HBM3"}. */
    public String name() {
        ensureOpen();
        return Cuda.deviceName(device);
    }

    /** The compute capability as {@code major * 10 + minor} (90 for Hopper). */
    public int computeCapability() {
        return attribute(cuda_h.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10
                + attribute(cuda_h.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    }

    public int multiprocessors() {
        return attribute(cuda_h.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    }

    /** Waits for all work in this context. */
    public void synchronize() {
        makeCurrent();
        check("cuCtxSynchronize", cuda_h.cuCtxSynchronize());
    }

    public DeviceBuffer allocate(long bytes) {
        return DeviceBuffer.allocate(this, bytes);
    }

    public PinnedBuffer allocatePinned(long bytes) {
        return PinnedBuffer.allocate(this, bytes);
    }

    public Stream createStream() {
        return Stream.create(this);
    }

    /** An event that records time ({@code timing}) or only orders work. */
    public Event createEvent(boolean timing) {
        return Event.create(this, timing);
    }

    /** Loads a PTX module (JIT-compiled by the driver). */
    public CudaModule loadPtx(String ptx) {
        return CudaModule.loadPtx(this, ptx);
    }

    /** Loads a cubin (ptxas's ELF output for this device's architecture; no JIT). */
    public CudaModule loadCubin(byte[] cubin) {
        return CudaModule.loadCubin(this, cubin);
    }

    @Override
    String describe() {
        return "CudaContext(device " + ordinal + ")";
    }

    @Override
    void release() {
        check("cuDevicePrimaryCtxRelease_v2", cuda_h.cuDevicePrimaryCtxRelease_v2(device));
    }
}
