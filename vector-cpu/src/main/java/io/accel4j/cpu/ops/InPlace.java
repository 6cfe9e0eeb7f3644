package io.accel4j.cpu.ops;

import java.lang.foreign.MemorySegment;

/**
 * The aliasing rule of the element-wise forwards ({@link Gelu#forward}, {@link Residual#forward}): element i of the
 * output depends only on element i of the inputs, and every element's inputs are loaded before it is stored, so the
 * output may be exactly an input (same first byte: in place). Any other overlap would read elements already
 * overwritten, and is refused.
 */
final class InPlace {

    private InPlace() {}

    /** {@code out} and {@code in} (each {@code bytes} long) are the same memory or do not overlap. */
    static void sameOrDisjoint(String outName, MemorySegment out, String inName, MemorySegment in, long bytes) {
        if (bytes == 0) {
            return;
        }
        MemorySegment o = out.asSlice(0, bytes);
        MemorySegment i = in.asSlice(0, bytes);
        if (o.asOverlappingSlice(i).isPresent() && o.address() != i.address()) {
            throw new IllegalArgumentException(outName + " partly overlaps " + inName + " (" + (i.address()
                    - o.address()) + " bytes apart): an output may be exactly an input (in place), no other overlap");
        }
    }
}
