package io.accel4j.optim;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A CPU "device" for tests: its segments are native memory of their own, but it says it is not host-accessible, so
 * code written against {@link DeviceMemory} must move every byte through {@link #copyToHost}/{@link #copyToDevice},
 * which this counts (as a GPU's memory would make it). {@link #ops} gives a CPU backend computing in it.
 */
public final class SeparateMemory implements DeviceMemory {

    /** Bytes copied device → host and host → device so far. */
    public final AtomicLong down = new AtomicLong(), up = new AtomicLong();

    /** {@code cpu}'s kernels with this memory as the backend's ({@link Ops#memory()}); every other call forwarded. */
    public Ops ops(Ops cpu) {
        return (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("memory") && method.getParameterCount() == 0) {
                        return this;
                    }
                    if (method.getName().equals("describe") && method.getParameterCount() == 0) {
                        return cpu.describe() + " on separate memory";
                    }
                    try {
                        return method.invoke(cpu, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    @Override
    public DeviceArena arena() {
        return HostMemory.INSTANCE.arena();
    }

    @Override
    public void copyToDevice(MemorySegment host, MemorySegment device) {
        HostMemory.INSTANCE.copyToDevice(host, device);
        up.addAndGet(host.byteSize());
    }

    @Override
    public void copyToHost(MemorySegment device, MemorySegment host) {
        HostMemory.INSTANCE.copyToHost(device, host);
        down.addAndGet(host.byteSize());
    }

    @Override
    public void copy(MemorySegment src, MemorySegment dst) {
        HostMemory.INSTANCE.copy(src, dst);
    }

    @Override
    public void zero(MemorySegment device) {
        HostMemory.INSTANCE.zero(device);
    }

    @Override
    public boolean hostAccessible() {
        return false;
    }

    @Override
    public String describe() {
        return "separate test memory";
    }
}
