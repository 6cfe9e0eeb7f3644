package io.accel4j.collectives;

import io.accel4j.core.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * Who is in which group of a {@link Communicator#split}: every rank's {@code (color, key)} gathered over the parent
 * (one all-gather of two ints a rank, so a collective), then the ranks of this rank's color ordered by key and, for
 * equal keys, by their parent rank (MPI_Comm_split's rule).
 *
 * @param members the parent ranks of this rank's group, in the new group's rank order
 * @param rank    this rank's place in {@code members}
 * @param color   the group's color
 */
public record SplitPlan(int[] members, int rank, int color) {

    /** Gathers every rank's color and key over {@code parent} (host buffers) and returns this rank's group. */
    public static SplitPlan exchange(Communicator parent, int color, int key) {
        if (color < 0) {
            throw new IllegalArgumentException("split: color must be >= 0, got " + color + " on rank "
                    + parent.rank());
        }
        if (parent.deviceBuffers()) {
            throw new IllegalArgumentException("split: the colors are exchanged over a host communicator, "
                    + parent.getClass().getSimpleName() + " takes device buffers");
        }
        int n = parent.size();
        int[] colors = new int[n];
        int[] keys = new int[n];
        try (Arena a = Arena.ofShared()) {
            MemorySegment all = a.allocate(2L * n * Integer.BYTES, 64);
            MemorySegment mine = all.asSlice(2L * parent.rank() * Integer.BYTES, 2L * Integer.BYTES);
            mine.setAtIndex(ValueLayout.JAVA_INT, 0, color);
            mine.setAtIndex(ValueLayout.JAVA_INT, 1, key);
            // 4-byte elements moved as bytes: two "FP32" slots a rank (the data collectives only move bytes)
            parent.allGather(mine, all, 2L * n, DType.FP32);
            for (int r = 0; r < n; r++) {
                colors[r] = all.getAtIndex(ValueLayout.JAVA_INT, 2L * r);
                keys[r] = all.getAtIndex(ValueLayout.JAVA_INT, 2L * r + 1);
            }
        }
        return of(colors, keys, parent.rank());
    }

    /** The group of {@code me} given every rank's color and key (no communication). */
    public static SplitPlan of(int[] colors, int[] keys, int me) {
        List<Integer> same = new ArrayList<>();
        for (int r = 0; r < colors.length; r++) {
            if (colors[r] == colors[me]) {
                same.add(r);
            }
        }
        same.sort(Comparator.<Integer>comparingInt(r -> keys[r]).thenComparingInt(r -> r));
        int[] members = same.stream().mapToInt(Integer::intValue).toArray();
        return new SplitPlan(members, same.indexOf(me), colors[me]);
    }

    /** The new group's size. */
    public int size() {
        return members.length;
    }

    /** A short description for messages: {@code "color 1 (parent ranks [1, 3])"}. */
    public String describe() {
        return "color " + color + " (parent ranks " + Arrays.toString(members) + ")";
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof SplitPlan p && p.rank == rank && p.color == color && Arrays.equals(p.members, members);
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(members) + rank;
    }

    @Override
    public String toString() {
        return "SplitPlan[rank " + rank + " of " + describe() + "]";
    }
}
