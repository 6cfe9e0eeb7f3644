package io.accel4j.train;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Host memory that counts the bytes its arenas hold ({@link #live}) and their peak ({@link #peak}), for tests that
 * check a memory plan or a schedule against what is really allocated. {@link #ops} hands a backend allocating
 * from it.
 */
public final class CountingMemory implements DeviceMemory {

    public final AtomicLong live = new AtomicLong();
    public final AtomicLong peak = new AtomicLong();

    @Override
    public DeviceArena arena() {
        DeviceArena inner = HostMemory.INSTANCE.arena();
        return new DeviceArena() {
            long mine;

            @Override
            public MemorySegment allocate(long bytes) {
                MemorySegment s = inner.allocate(bytes);
                mine += bytes;
                peak.accumulateAndGet(live.addAndGet(bytes), Math::max);
                return s;
            }

            @Override
            public void close() {
                live.addAndGet(-mine);
                mine = 0;
                inner.close();
            }
        };
    }

    @Override
    public void copyToDevice(MemorySegment host, MemorySegment device) {
        HostMemory.INSTANCE.copyToDevice(host, device);
    }

    @Override
    public void copyToHost(MemorySegment device, MemorySegment host) {
        HostMemory.INSTANCE.copyToHost(device, host);
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
        return true;
    }

    @Override
    public String describe() {
        return "counting host memory";
    }

    /** {@code delegate} with this memory as its {@code memory()}. */
    public Ops ops(Ops delegate) {
        return (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("memory") && method.getParameterCount() == 0) {
                        return this;
                    }
                    try {
                        return method.invoke(delegate, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }
}
