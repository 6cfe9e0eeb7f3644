package io.accel4j.core.fp8;

import io.accel4j.core.DType;
import io.accel4j.core.ops.CastOps;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Objects;

/**
 * One tensor's delayed-scaling state (see {@link DelayedScaling}): a window of the amaxes of its last {@code length}
 * steps and the scale its next cast uses. Not thread-safe.
 *
 * <p>A step: cast the tensor with {@link #scale()} (or {@link #quantize}), {@link #record} the amax the cast
 * returns (several casts in one step, e.g. micro-batches, keep their maximum), then at the end of the step
 * {@link #update()}: the new scale is computed from the window and the window moves on by one step, the oldest amax
 * dropped. Before the first update the scale is 1.
 *
 * <p>A backend's FP8 matmuls may record their amaxes later than the cast: the GPU's keep them on the device until
 * {@link io.accel4j.core.ops.MatmulOps#flushAmaxes()}. Whoever owns a history flushes that backend before reading or
 * updating it ({@link #update()}, {@link #amaxes()}, a checkpoint); since a step's slot keeps the maximum of what is
 * recorded, a deferred record gives the same window as one at the call.
 *
 * <p><b>When the amax gives no scale.</b> {@code update()} keeps the previous scale when the amax it uses (the
 * window's maximum, or the last step's) is 0 (nothing recorded, or an all-zero tensor), +inf or NaN (an overflowed
 * tensor: with {@link DelayedScaling.Algorithm#MAX} such a step freezes the scale until it leaves the window). A
 * finite positive amax whose scale would exceed {@code 2^126} (a tensor of magnitude below about
 * {@code fp8Max·2^-126}) gets {@code 2^126}, so that {@link #scaleInv()} stays a normal float.
 */
public final class AmaxHistory {

    /** The largest scale: its inverse, {@code 2^-126}, is the smallest normal float. */
    public static final float MAX_SCALE = 0x1p126f;

    private final DType format;
    private final int margin;
    private final DelayedScaling.Algorithm algorithm;
    private final float[] window;
    private int current;
    private float scale = 1f;

    /**
     * An empty history (every amax 0, scale 1) for a tensor cast to {@code format} (FP8_E4M3 or FP8_E5M2); see
     * {@link DelayedScaling} for {@code length}, {@code margin} and {@code algorithm}.
     */
    public AmaxHistory(DType format, int length, int margin, DelayedScaling.Algorithm algorithm) {
        Objects.requireNonNull(format, "format");
        Objects.requireNonNull(algorithm, "algorithm");
        if (!format.isFp8()) {
            throw new IllegalArgumentException("format must be FP8_E4M3 or FP8_E5M2, got " + format);
        }
        if (length < 1) {
            throw new IllegalArgumentException("length must be >= 1, got " + length);
        }
        if (margin < 0 || margin > DelayedScaling.MAX_MARGIN) {
            throw new IllegalArgumentException("margin must be in [0, " + DelayedScaling.MAX_MARGIN + "], got "
                    + margin);
        }
        this.format = format;
        this.margin = margin;
        this.algorithm = algorithm;
        this.window = new float[length];
    }

    /** The FP8 type this tensor is cast to. */
    public DType format() {
        return format;
    }

    /** What to multiply the tensor by before encoding it this step (finite, > 0). */
    public float scale() {
        return scale;
    }

    /** {@code 1/scale}: what a GEMM multiplies its product by for this operand (the dequantisation factor). */
    public float scaleInv() {
        return 1f / scale;
    }

    /**
     * Adds the amax of one cast of this step ({@code max |x|} over the unscaled tensor, as {@link CastOps#castToFp8}
     * returns it): the step's slot keeps the largest recorded; NaN and +inf are kept (see the class comment).
     *
     * @throws IllegalArgumentException for a negative amax
     */
    public void record(float amax) {
        if (amax < 0) {
            throw new IllegalArgumentException("amax must be >= 0 (a max of |x|), got " + amax);
        }
        window[current] = Math.max(window[current], amax); // NaN if either is NaN
    }

    /**
     * Ends the step: computes the scale the next step's casts use from the window (the class comment says when the
     * previous scale is kept), then moves the window on, the new step's slot starting at 0.
     */
    public void update() {
        float amax = window[current];
        if (algorithm == DelayedScaling.Algorithm.MAX) {
            for (float a : window) {
                amax = Math.max(amax, a);
            }
        }
        if (amax > 0 && amax < Float.POSITIVE_INFINITY) {
            float s = Math.scalb(format.maxFinite() / amax, -margin);
            scale = s > MAX_SCALE ? MAX_SCALE : s;
        }
        current = (current + 1) % window.length;
        window[current] = 0f;
    }

    /**
     * Casts {@code src} (n fp32) to {@code dst} (n codes of {@link #format()}) with this step's scale through
     * {@code ops} (CPU or GPU), records the amax the cast returns, and returns the {@link #scaleInv()} the GEMM must
     * use with {@code dst}. Does not {@link #update()}.
     */
    public float quantize(CastOps ops, MemorySegment dst, MemorySegment src, long n) {
        Objects.requireNonNull(ops, "ops");
        float inv = scaleInv();
        record(ops.castToFp8(dst, format, src, n, scale));
        return inv;
    }

    /** Steps of amax the window holds. */
    public int length() {
        return window.length;
    }

    /**
     * Puts this history back into a saved state (a checkpoint): {@code scale} and the window {@code amaxes}, oldest
     * first, this step's slot last, as {@link #scale()} and {@link #amaxes()} returned them. The steps that follow
     * behave bit for bit as they would have in the history that was saved.
     *
     * @throws IllegalArgumentException when {@code amaxes} is not {@link #length()} long, holds a negative value,
     *                                  or {@code scale} is not in (0, {@link #MAX_SCALE}]
     */
    public void restore(float scale, float[] amaxes) {
        Objects.requireNonNull(amaxes, "amaxes");
        if (amaxes.length != window.length) {
            throw new IllegalArgumentException("amaxes holds " + amaxes.length + " steps, the window " + window.length);
        }
        if (!(scale > 0 && scale <= MAX_SCALE)) {
            throw new IllegalArgumentException("scale must be in (0, 2^126], got " + scale);
        }
        for (int i = 0; i < amaxes.length; i++) {
            if (amaxes[i] < 0) {
                throw new IllegalArgumentException("amaxes[" + i + "] must be >= 0, got " + amaxes[i]);
            }
        }
        System.arraycopy(amaxes, 0, window, 0, window.length);
        current = window.length - 1;
        this.scale = scale;
    }

    /** The window, oldest first, this step's slot last. */
    public float[] amaxes() {
        float[] out = new float[window.length];
        for (int i = 0; i < window.length; i++) {
            out[i] = window[(current + 1 + i) % window.length];
        }
        return out;
    }

    @Override
    public String toString() {
        return "AmaxHistory[" + format + ", scale " + scale + ", margin " + margin + ", " + algorithm + ", window "
                + Arrays.toString(amaxes()) + "]";
    }
}
