package io.accel4j.core.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.ops.Ops;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** {@link HostMemory}: zeroed aligned allocations, copies that move exactly the bytes asked, checked sizes. */
class HostMemoryTest {

    private static final long SEED = 20261203L;
    private final DeviceMemory memory = HostMemory.INSTANCE;

    @Test
    void allocationsAreZeroedAlignedAndFreedWithTheirArena() {
        MemorySegment kept;
        try (DeviceArena arena = memory.arena()) {
            for (long n : new long[] {0, 1, 7, 4099}) {
                MemorySegment s = arena.allocate(n);
                assertThat(s.byteSize()).isEqualTo(n);
                assertThat(s.address() % 64).as("alignment of %d bytes", n).isZero();
                for (long i = 0; i < n; i++) {
                    assertThat(s.get(ValueLayout.JAVA_BYTE, i)).as("byte %d of %d", i, n).isZero();
                }
            }
            assertThatThrownBy(() -> arena.allocate(-1)).hasMessageContaining("bytes must be >= 0, got -1");
            kept = arena.allocate(8);
        }
        assertThat(kept.scope().isAlive()).as("freed by close").isFalse();
    }

    @Test
    void largeAllocationsAreZeroedWritableAndOnHugePagesWhereLinuxOffersThem() throws Exception {
        long n = HugePages.MIN_BYTES + 4099; // odd: the segment is exactly n bytes, the mapping whole 2 MiB pages
        MemorySegment kept;
        try (DeviceArena arena = memory.arena(); Arena host = Arena.ofConfined()) {
            MemorySegment s = arena.allocate(n), zeros = host.allocate(n);
            assertThat(s.byteSize()).isEqualTo(n);
            assertThat(s.address() % 64).isZero();
            assertThat(MemorySegment.mismatch(s, 0, n, zeros, 0, n)).as("first nonzero byte").isEqualTo(-1L);
            s.set(ValueLayout.JAVA_BYTE, 0, (byte) 7);
            s.set(ValueLayout.JAVA_BYTE, n - 1, (byte) 9);
            assertThat(s.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 7);
            assertThat(s.get(ValueLayout.JAVA_BYTE, n - 1)).isEqualTo((byte) 9);
            if (HugePages.available()) {
                assertThat(s.address() % HugePages.PAGE).as("2 MiB aligned").isZero();
                String mode = Files.exists(THP_MODE) ? Files.readString(THP_MODE) : "[never]";
                if (!mode.contains("[never]")) { // the kernel marks the madvised range eligible for huge pages
                    assertThat(smapsField(s.address(), "THPeligible")).as("THPeligible, THP mode %s", mode.trim())
                            .isEqualTo("1");
                }
            }
            kept = s;
        }
        assertThat(kept.scope().isAlive()).as("unmapped by close").isFalse();
    }

    private static final Path THP_MODE = Path.of("/sys/kernel/mm/transparent_hugepage/enabled");

    /** A field of /proc/self/smaps for the mapping that holds {@code address}, or null. */
    private static String smapsField(long address, String field) throws Exception {
        boolean inside = false;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            int dash = line.indexOf('-');
            int space = line.indexOf(' ');
            if (dash > 0 && space > dash && line.substring(0, dash).matches("[0-9a-f]+")) {
                long from = Long.parseUnsignedLong(line.substring(0, dash), 16);
                long to = Long.parseUnsignedLong(line.substring(dash + 1, space), 16);
                inside = address >= from && address < to;
            } else if (inside && line.startsWith(field + ":")) {
                return line.substring(field.length() + 1).trim();
            }
        }
        return null;
    }

    @Test
    void copiesMoveExactlyTheBytesAskedAndZeroClearsASlice() {
        SplittableRandom r = new SplittableRandom(SEED);
        int n = 1 + r.nextInt(300);
        byte[] data = new byte[n];
        for (int i = 0; i < n; i++) {
            data[i] = (byte) r.nextInt(1, 256);
        }
        try (DeviceArena arena = memory.arena(); Arena host = Arena.ofConfined()) {
            MemorySegment in = host.allocate(n), out = host.allocate(n + 5);
            MemorySegment.copy(data, 0, in, ValueLayout.JAVA_BYTE, 0, n);
            out.fill((byte) 0x55); // poison: the last 5 bytes must survive a copy of n
            MemorySegment a = arena.allocate(n + 3), b = arena.allocate(n + 3);
            memory.copyToDevice(in, a);
            memory.copy(a.asSlice(0, n), b);
            memory.copyToHost(b, out.asSlice(0, n));
            assertThat(out.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE)).as("seed %d", SEED).containsExactly(data);
            assertThat(out.asSlice(n, 5).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 0x55);
            assertThat(b.get(ValueLayout.JAVA_BYTE, n)).as("dst beyond the copy").isZero();

            memory.zero(b.asSlice(1, n - 1));
            assertThat(b.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo(data[0]);
            assertThat(b.asSlice(1, n - 1).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 0);

            assertThatThrownBy(() -> memory.copyToDevice(host.allocate(n + 4), a))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("device holds " + (n + 3) + " bytes, the copy from host to device is " + (n + 4));
            assertThatThrownBy(() -> memory.copyToHost(a, host.allocate(n + 4)))
                    .hasMessage("device holds " + (n + 3) + " bytes, the copy from device to host is " + (n + 4));
            assertThatThrownBy(() -> memory.copy(a, b.asSlice(0, n)))
                    .hasMessage("dst holds " + n + " bytes, the copy from src to dst is " + (n + 3));
        }
    }

    @Test
    void readableOnHostIsTheSegmentItselfInHostMemoryAndACopyElsewhere() {
        try (DeviceArena arena = memory.arena(); Arena staging = Arena.ofConfined()) {
            MemorySegment d = arena.allocate(12);
            d.set(ValueLayout.JAVA_INT, 4, 0x1234_5678);
            assertThat(memory.readableOnHost(d, staging)).isSameAs(d);
            MemorySegment copy = elsewhere().readableOnHost(d, staging);
            assertThat(copy).isNotSameAs(d);
            assertThat(copy.byteSize()).isEqualTo(12);
            assertThat(copy.mismatch(d)).isEqualTo(-1L);
            assertThat(copy.address() % 64).isZero();
        }
    }

    @Test
    void writableOnHostIsTheSegmentItselfInHostMemoryAndAStagedCopyElsewhere() {
        try (DeviceArena arena = memory.arena(); Arena staging = Arena.ofConfined()) {
            MemorySegment d = arena.allocate(12);
            MemorySegment in = memory.writableOnHost(d, staging);
            assertThat(in).isSameAs(d);
            in.set(ValueLayout.JAVA_INT, 8, 42);
            memory.writeBack(in, d.asSlice(0)); // an equal slice: written in place, nothing to copy
            assertThat(d.get(ValueLayout.JAVA_INT, 8)).isEqualTo(42);

            DeviceMemory elsewhere = elsewhere();
            MemorySegment host = elsewhere.writableOnHost(d, staging);
            assertThat(host.address()).isNotEqualTo(d.address());
            assertThat(host.byteSize()).isEqualTo(12);
            assertThat(host.address() % 64).isZero();
            host.set(ValueLayout.JAVA_INT, 4, 0x0bad_cafe);
            host.set(ValueLayout.JAVA_INT, 8, 7);
            assertThat(d.get(ValueLayout.JAVA_INT, 8)).as("not on the device before writeBack").isEqualTo(42);
            elsewhere.writeBack(host, d);
            assertThat(d.get(ValueLayout.JAVA_INT, 4)).isEqualTo(0x0bad_cafe);
            assertThat(d.get(ValueLayout.JAVA_INT, 8)).isEqualTo(7);
        }
    }

    /** Host memory that claims to be a device's: its segments must be staged. */
    private DeviceMemory elsewhere() {
        return new DeviceMemory() {
            @Override public DeviceArena arena() { return memory.arena(); }
            @Override public void copyToDevice(MemorySegment h, MemorySegment dv) { memory.copyToDevice(h, dv); }
            @Override public void copyToHost(MemorySegment dv, MemorySegment h) { memory.copyToHost(dv, h); }
            @Override public void copy(MemorySegment src, MemorySegment dst) { memory.copy(src, dst); }
            @Override public void zero(MemorySegment dv) { memory.zero(dv); }
            @Override public boolean hostAccessible() { return false; }
            @Override public String describe() { return "test"; }
        };
    }

    @Test
    void aBackendComputesInHostMemoryUnlessItSaysOtherwise() {
        Ops ops = (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, method, args) -> java.lang.reflect.InvocationHandler.invokeDefault(proxy, method, args));
        assertThat(ops.memory()).isSameAs(HostMemory.INSTANCE);
        assertThat(HostMemory.INSTANCE.hostAccessible()).isTrue();
    }
}
