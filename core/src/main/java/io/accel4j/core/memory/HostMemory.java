package io.accel4j.core.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * The CPU's {@link DeviceMemory}: device segments are native host memory from a shared {@link Arena} (64-byte
 * aligned, the widest vector; from 8 MiB on, 2 MiB aligned on transparent huge pages where Linux offers them, see
 * {@link HugePages}), and every copy is a {@link MemorySegment#copy}. Stateless; one instance serves all.
 */
public final class HostMemory implements DeviceMemory {

    /** The instance. */
    public static final HostMemory INSTANCE = new HostMemory();

    /** Alignment of every allocation: a cache line, the widest vector (AVX-512). */
    private static final long ALIGNMENT = 64;

    private HostMemory() {}

    @Override
    public DeviceArena arena() {
        Arena arena = Arena.ofShared();
        return new DeviceArena() {
            @Override
            public MemorySegment allocate(long bytes) {
                if (bytes < 0) {
                    throw new IllegalArgumentException("bytes must be >= 0, got " + bytes);
                }
                MemorySegment huge = HugePages.allocate(arena, bytes); // 8 MiB and up: zero-filled by the kernel
                return huge != null ? huge : arena.allocate(bytes, ALIGNMENT); // zero-filled
            }

            @Override
            public void close() {
                if (arena.scope().isAlive()) {
                    arena.close();
                }
            }
        };
    }

    @Override
    public void copyToDevice(MemorySegment host, MemorySegment device) {
        DeviceMemory.checkCopy("host", host, "device", device, host.byteSize());
        MemorySegment.copy(host, 0, device, 0, host.byteSize());
    }

    @Override
    public void copyToHost(MemorySegment device, MemorySegment host) {
        DeviceMemory.checkCopy("device", device, "host", host, host.byteSize());
        MemorySegment.copy(device, 0, host, 0, host.byteSize());
    }

    @Override
    public void copy(MemorySegment src, MemorySegment dst) {
        DeviceMemory.checkCopy("src", src, "dst", dst, src.byteSize());
        MemorySegment.copy(src, 0, dst, 0, src.byteSize());
    }

    @Override
    public void zero(MemorySegment device) {
        Objects.requireNonNull(device, "device").fill((byte) 0);
    }

    @Override
    public boolean hostAccessible() {
        return true;
    }

    @Override
    public String describe() {
        return "host memory";
    }
}
