package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * Where a network's parameter tensors and their gradients are, tensor by tensor ({@link ParamRef#index()}): by default
 * slices of the network's two flat buffers ({@link #flat}); a sharded source (ZeRO-3) hands out a tensor's slice of
 * the unit it gathered, valid between the {@link Units} brackets a {@link UnitScope} makes.
 */
public interface ParameterSource {

    /** Tensor {@code index}'s parameters. */
    MemorySegment param(int index);

    /** Tensor {@code index}'s gradient (backward adds into it). */
    MemorySegment grad(int index);

    /** Slices of {@code params} and {@code grads} at the table's offsets. */
    static ParameterSource flat(ParameterTable table, MemorySegment params, MemorySegment grads) {
        int n = table.entries().size();
        long[] off = new long[n], cnt = new long[n];
        for (int i = 0; i < n; i++) {
            off[i] = table.entries().get(i).offset() * Float.BYTES;
            cnt[i] = table.entries().get(i).count() * Float.BYTES;
        }
        return new ParameterSource() {
            @Override
            public MemorySegment param(int i) {
                return params.asSlice(off[i], cnt[i]);
            }

            @Override
            public MemorySegment grad(int i) {
                return grads.asSlice(off[i], cnt[i]);
            }
        };
    }
}
