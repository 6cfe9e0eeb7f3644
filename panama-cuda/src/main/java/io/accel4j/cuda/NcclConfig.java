package io.accel4j.cuda;

import io.accel4j.cuda.bindings.nccl_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The settings of {@code ncclCommInitRankConfig} that accel4j uses; every other member of {@code ncclConfig_t} is
 * left undefined ({@code NCCL_CONFIG_UNDEF_INT} / {@code NULL}: NCCL's default or its {@code NCCL_*} environment
 * variable). {@link #write(Arena)} is {@code NCCL_CONFIG_INITIALIZER} for the bound layout ({@link nccl_h#ncclConfig_t},
 * NCCL 2.28): {@code size} = 80, {@code magic} = {@value #MAGIC_HEX}, {@code version} = {@value #LAYOUT_VERSION}.
 * An older library copies only its own prefix of the struct and resets the members newer than its release.
 *
 * @param blocking  1: calls block until done; 0: non-blocking (calls may return {@code ncclInProgress}), or
 *                  {@link nccl_h#NCCL_CONFIG_UNDEF_INT}
 * @param minCTAs   the fewest CTAs (channels) NCCL uses, or undefined
 * @param maxCTAs   the most CTAs NCCL uses, or undefined
 * @param commName  a name for NCCL's logs, or null
 */
public record NcclConfig(int blocking, int minCTAs, int maxCTAs, String commName) {

    /** {@code NCCL_API_MAGIC}. */
    public static final int MAGIC = 0xcafebeef;
    static final String MAGIC_HEX = "0xcafebeef";
    /** {@code NCCL_VERSION(2, 28, 0)}: the release whose {@code ncclConfig_t} is bound. */
    public static final int LAYOUT_VERSION = 22800;

    private static final int UNDEF = nccl_h.NCCL_CONFIG_UNDEF_INT;

    public NcclConfig {
        if (blocking != UNDEF && blocking != 0 && blocking != 1) {
            throw new IllegalArgumentException("blocking must be 0, 1 or undefined, got " + blocking);
        }
        if (minCTAs != UNDEF && maxCTAs != UNDEF && minCTAs > maxCTAs) {
            throw new IllegalArgumentException("minCTAs " + minCTAs + " > maxCTAs " + maxCTAs);
        }
    }

    /** Every member undefined: what {@code NCCL_CONFIG_INITIALIZER} gives. */
    public static NcclConfig defaults() {
        return new NcclConfig(UNDEF, UNDEF, UNDEF, null);
    }

    /** A copy with {@code blocking} set. */
    public NcclConfig withBlocking(boolean blocking) {
        return new NcclConfig(blocking ? 1 : 0, minCTAs, maxCTAs, commName);
    }

    /** A copy with {@code commName} set. */
    public NcclConfig withCommName(String name) {
        return new NcclConfig(blocking, minCTAs, maxCTAs, name);
    }

    /** A new {@code ncclConfig_t} in {@code arena} (the name's string too), initialised as described above. */
    public MemorySegment write(Arena arena) {
        MemorySegment c = arena.allocate(nccl_h.ncclConfig_t);
        for (var member : nccl_h.ncclConfig_t.memberLayouts()) {
            long at = offset(member.name().orElseThrow());
            if (member instanceof ValueLayout.OfInt) {
                c.set(ValueLayout.JAVA_INT, at, UNDEF);
            } else if (member instanceof ValueLayout.OfLong) {
                c.set(ValueLayout.JAVA_LONG, at, 0);
            } else {
                c.set(ValueLayout.ADDRESS, at, MemorySegment.NULL);
            }
        }
        c.set(ValueLayout.JAVA_LONG, offset("size"), nccl_h.ncclConfig_t.byteSize());
        c.set(ValueLayout.JAVA_INT, offset("magic"), MAGIC);
        c.set(ValueLayout.JAVA_INT, offset("version"), LAYOUT_VERSION);
        c.set(ValueLayout.JAVA_INT, offset("blocking"), blocking);
        c.set(ValueLayout.JAVA_INT, offset("minCTAs"), minCTAs);
        c.set(ValueLayout.JAVA_INT, offset("maxCTAs"), maxCTAs);
        if (commName != null) {
            c.set(ValueLayout.ADDRESS, offset("commName"), arena.allocateFrom(commName));
        }
        return c;
    }

    /** The byte offset of member {@code name} of {@code ncclConfig_t}. */
    static long offset(String name) {
        return nccl_h.ncclConfig_t.byteOffset(PathElement.groupElement(name));
    }
}
