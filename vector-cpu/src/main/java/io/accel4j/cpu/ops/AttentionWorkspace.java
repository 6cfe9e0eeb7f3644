package io.accel4j.cpu.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;

/**
 * {@link FlashAttention}'s scratch arrays kept per thread across calls, so that a call's setup does not grow with
 * its tiles: a worker takes its arrays in the same order every call of one shape, and gets back the arrays it had
 * the last time. The tiles' zero padding (columns past the head size) is never written, so arrays are reused only
 * for the same {@code key} (the call's sizes and mode); a new key starts over with fresh, zeroed arrays.
 * Arrays live as long as the thread (a {@link io.accel4j.cpu.Parallel}'s workers end with the pool).
 */
final class AttentionWorkspace implements IntFunction<float[]> {

    /** Marks "take the calling thread's workspace" where a scratch source is passed ({@link #of}). */
    static final IntFunction<float[]> PER_THREAD = n -> {
        throw new IllegalStateException("PER_THREAD is a marker, not a source");
    };

    /** The slots of a thread: one for the forward, one for the backward (so that alternating calls both reuse). */
    static final int FORWARD = 0, BACKWARD = 1;

    private static final ThreadLocal<AttentionWorkspace[]> LOCAL = ThreadLocal.withInitial(
            () -> new AttentionWorkspace[] {new AttentionWorkspace(), new AttentionWorkspace()});

    private final List<float[]> arrays = new ArrayList<>();
    private Object key;
    private int next;

    private AttentionWorkspace() {}

    /**
     * The source a worker takes its arrays from: {@code scratch} itself, or for {@link #PER_THREAD} this thread's
     * workspace in {@code slot}, rewound for a call with {@code key}.
     */
    static IntFunction<float[]> of(IntFunction<float[]> scratch, int slot, Object key) {
        if (scratch != PER_THREAD) {
            return scratch;
        }
        AttentionWorkspace w = LOCAL.get()[slot];
        if (!key.equals(w.key)) {
            w.arrays.clear();
            w.key = key;
        }
        w.next = 0;
        return w;
    }

    /** The array taken at this position the last time if it has length n, else a new one in its place. */
    @Override
    public float[] apply(int n) {
        if (next < arrays.size() && arrays.get(next).length == n) {
            return arrays.get(next++);
        }
        float[] a = new float[n];
        if (next < arrays.size()) {
            arrays.set(next, a);
        } else {
            arrays.add(a);
        }
        next++;
        return a;
    }
}
