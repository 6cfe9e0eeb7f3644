package io.accel4j.train;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A test device that behaves like a GPU's memory towards host code, on the CPU: each allocation's data lives in a
 * host "shadow" buffer, and what is handed out is a view of the same address whose scope is already closed, so
 * any direct host access to it (get, set, fill, {@link MemorySegment#copy}, mismatch, …) throws
 * {@link IllegalStateException} ("Already closed"), while slicing, {@code address()} and {@code byteSize()} work as
 * on a device view. Only this memory's copies and the {@link #ops} wrapper translate a view into its shadow, after
 * checking that it lies inside a live allocation; a host segment passed where a device one belongs, or a view
 * used after its arena closed, is an error naming it. Counts the bytes copied each way.
 */
public final class StrictMemory implements DeviceMemory {

    /** Live allocations: the view's address → its shadow. */
    private final ConcurrentSkipListMap<Long, MemorySegment> shadows = new ConcurrentSkipListMap<>();
    private final AtomicLong bytesIn = new AtomicLong(), bytesOut = new AtomicLong(), bytesMoved = new AtomicLong();

    @Override
    public DeviceArena arena() {
        DeviceArena host = HostMemory.INSTANCE.arena();
        return new DeviceArena() {
            private final java.util.List<Long> mine = new java.util.ArrayList<>();

            @Override
            public MemorySegment allocate(long bytes) {
                MemorySegment shadow = host.allocate(Math.max(1, bytes)).asSlice(0, bytes); // distinct addresses
                Arena poison = Arena.ofConfined();
                MemorySegment view = MemorySegment.ofAddress(shadow.address()).reinterpret(bytes, poison, null);
                poison.close(); // the view (and every slice of it) now refuses host access
                shadows.put(shadow.address(), shadow);
                mine.add(shadow.address());
                return view;
            }

            @Override
            public void close() {
                mine.forEach(shadows::remove);
                mine.clear();
                host.close();
            }
        };
    }

    /** The shadow of device segment {@code s} (a view of this memory or a slice of one), or an error naming it. */
    MemorySegment shadow(String name, MemorySegment s) {
        Objects.requireNonNull(s, name);
        Map.Entry<Long, MemorySegment> e = shadows.floorEntry(s.address());
        if (e == null || s.scope().isAlive()
                || s.address() + s.byteSize() > e.getKey() + e.getValue().byteSize()) {
            throw new IllegalArgumentException(name + " (" + s.byteSize() + " bytes at 0x"
                    + Long.toHexString(s.address()) + ") is not in a live allocation of this device memory: a host "
                    + "segment where a device one belongs, or a device segment used after its arena closed");
        }
        return e.getValue().asSlice(s.address() - e.getKey(), s.byteSize());
    }

    @Override
    public void copyToDevice(MemorySegment host, MemorySegment device) {
        DeviceMemory.checkCopy("host", host, "device", device, host.byteSize());
        MemorySegment.copy(host, 0, shadow("device", device), 0, host.byteSize());
        bytesIn.addAndGet(host.byteSize());
    }

    @Override
    public void copyToHost(MemorySegment device, MemorySegment host) {
        DeviceMemory.checkCopy("device", device, "host", host, host.byteSize());
        MemorySegment.copy(shadow("device", device), 0, host, 0, host.byteSize());
        bytesOut.addAndGet(host.byteSize());
    }

    @Override
    public void copy(MemorySegment src, MemorySegment dst) {
        DeviceMemory.checkCopy("src", src, "dst", dst, src.byteSize());
        MemorySegment.copy(shadow("src", src), 0, shadow("dst", dst), 0, src.byteSize());
        bytesMoved.addAndGet(src.byteSize());
    }

    @Override
    public void zero(MemorySegment device) {
        shadow("device", device).fill((byte) 0);
    }

    @Override
    public boolean hostAccessible() {
        return false;
    }

    @Override
    public String describe() {
        return "strict test device memory";
    }

    /** Bytes copied host → device so far. */
    public long bytesIn() {
        return bytesIn.get();
    }

    /** Bytes copied device → host so far. */
    public long bytesOut() {
        return bytesOut.get();
    }

    /** Live allocations. */
    public int allocations() {
        return shadows.size();
    }

    /**
     * {@code delegate} (a CPU backend) computing in this memory: every segment argument must be one of this memory's
     * device segments (null stays null) and reaches the delegate as its shadow; {@link Ops#memory()} is this memory.
     */
    public Ops ops(Ops delegate) {
        Objects.requireNonNull(delegate, "delegate");
        return (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("memory") && method.getParameterCount() == 0) {
                        return this;
                    }
                    if (method.getName().equals("describe") && method.getParameterCount() == 0) {
                        return "strict(" + delegate.describe() + ")";
                    }
                    Object[] real = args == null ? null : args.clone();
                    for (int i = 0; real != null && i < real.length; i++) {
                        if (real[i] instanceof MemorySegment s) {
                            real[i] = shadow(method.getName() + " argument " + i, s);
                        }
                    }
                    try {
                        return method.invoke(delegate, real);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }
}
