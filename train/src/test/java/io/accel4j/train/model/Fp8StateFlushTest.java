package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.MatmulOps;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link Fp8State} with a backend that defers its amaxes until {@link MatmulOps#flushAmaxes()} (as the GPU's does):
 * every read or change of the histories flushes it first, so the windows, scales and encoded state are bit for bit
 * those of a backend that records at the call, and a validation's restore forgets the casts made since its encode.
 */
class Fp8StateFlushTest {

    private static final DelayedScaling RECIPE = new DelayedScaling(DelayedScaling.Format.HYBRID, 3, 0,
            DelayedScaling.Algorithm.MAX);
    private static final int L = 2;
    private static final int N = 5, C = 3, OC = 7;

    /**
     * A linear layer's FP8 bookkeeping without the arithmetic: each cast's amax (max |x|, NaN left out, as
     * CastOps.castToFp8) is queued, or recorded at once when {@code eager}; {@link #flushAmaxes} records the queue.
     */
    private static final class Backend implements MatmulOps {
        final boolean eager;
        final PendingAmaxes pending = new PendingAmaxes();

        Backend(boolean eager) {
            this.eager = eager;
        }

        private void cast(AmaxHistory h, MemorySegment x, long n) {
            float amax = 0;
            for (long i = 0; i < n; i++) {
                float v = Math.abs(x.getAtIndex(ValueLayout.JAVA_FLOAT, i));
                amax = v > amax ? v : amax;
            }
            if (eager) {
                h.record(amax);
            } else {
                pending.add(h, amax);
            }
        }

        @Override
        public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                                  int n, int c, int oc, Fp8Scaling fp8) {
            cast(fp8.input(), inp, (long) n * c);
            cast(fp8.weight(), weight, (long) oc * c);
        }

        @Override
        public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias,
                                   MemorySegment dout, MemorySegment inp, MemorySegment weight, int n, int c, int oc,
                                   Fp8Scaling fp8) {
            cast(fp8.gradOutput(), dout, (long) n * oc);
            cast(fp8.weight(), weight, (long) oc * c);
            cast(fp8.input(), inp, (long) n * c);
        }

        @Override
        public void flushAmaxes() {
            pending.flush();
        }

        @Override
        public void matmulForward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias,
                                  int n, int c, int oc, DType operands) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void matmulBackward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias,
                                   MemorySegment dout, MemorySegment inp, MemorySegment weight, int n, int c, int oc,
                                   DType operands) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void matmulForwardGelu(MemorySegment out, MemorySegment pre, MemorySegment inp, MemorySegment weight,
                                      MemorySegment bias, int n, int c, int oc, DType operands) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void matmulBackwardGelu(MemorySegment dpre, MemorySegment dpreBias, MemorySegment dweight,
                                       MemorySegment dbias, MemorySegment dout, MemorySegment inp, MemorySegment pre,
                                       MemorySegment weight, int n, int c, int oc, DType operands) {
            throw new UnsupportedOperationException();
        }
    }

    private final SplittableRandom rnd = new SplittableRandom(17);

    /** One training step's casts of every linear layer on {@code ops}, from the same random tensors for both. */
    private static void step(MatmulOps[] ops, Fp8State[] states, SplittableRandom rnd) {
        for (int l = 0; l < L; l++) {
            for (Fp8State.Linear which : Fp8State.Linear.values()) {
                MemorySegment inp = tensor(rnd, N * C), w = tensor(rnd, OC * C), dout = tensor(rnd, N * OC);
                for (int k = 0; k < ops.length; k++) {
                    ops[k].matmulForward(null, inp, w, null, N, C, OC, states[k].linear(l, which));
                    ops[k].matmulBackward(null, null, null, dout, inp, w, N, C, OC, states[k].linear(l, which));
                }
            }
        }
    }

    /** n floats of magnitudes 2^-12 … 2^12, either sign, with a NaN now and then (left out of the amax). */
    private static MemorySegment tensor(SplittableRandom rnd, int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) (rnd.nextDouble(-1, 1) * Math.scalb(1.0, rnd.nextInt(-12, 13)));
        }
        if (rnd.nextInt(4) == 0) {
            x[rnd.nextInt(n)] = Float.NaN;
        }
        return MemorySegment.ofArray(x);
    }

    @Test
    void deferredAmaxesGiveTheEagerHistoriesBitForBit() {
        Backend eager = new Backend(true), deferred = new Backend(false);
        Fp8State e = new Fp8State(RECIPE, L, eager), d = new Fp8State(RECIPE, L, deferred);
        for (int s = 0; s < 6; s++) {
            step(new MatmulOps[] {eager, deferred}, new Fp8State[] {e, d}, rnd);
            AmaxHistory h = d.linear(1, Fp8State.Linear.FC).gradOutput();
            assertThat(h.amaxes()[RECIPE.historyLength() - 1]).as("step %d: not recorded before a flush", s)
                    .isZero();
            assertThat(deferred.pending.pending()).isEqualTo(L * 4 * 5);
            if (s % 2 == 0) { // the amax exchange of several ranks reads them first
                assertThat(d.stepAmaxes()).as("step %d amaxes", s).containsExactly(e.stepAmaxes());
            }
            int before = deferred.pending.flushes();
            d.update();
            e.update();
            assertThat(deferred.pending.flushes()).as("update flushes").isGreaterThan(before);
            assertThat(deferred.pending.pending()).isZero();
            assertThat(d.encode()).as("state after step %d", s).containsExactly(e.encode());
        }
        assertThat(d.linear(0, Fp8State.Linear.QKV).input().scale()).isNotEqualTo(1f);
    }

    @Test
    void aCheckpointMidStepHoldsTheDeferredAmaxes() {
        Backend eager = new Backend(true), deferred = new Backend(false);
        Fp8State e = new Fp8State(RECIPE, L, eager), d = new Fp8State(RECIPE, L, deferred);
        step(new MatmulOps[] {eager, deferred}, new Fp8State[] {e, d}, rnd);
        byte[] saved = d.encode();
        assertThat(saved).containsExactly(e.encode());
        Fp8State resumed = new Fp8State(RECIPE, L, new Backend(false));
        resumed.restore(saved);
        resumed.update();
        e.update();
        assertThat(resumed.encode()).containsExactly(e.encode());
    }

    @Test
    void restoreForgetsTheCastsSinceTheEncode() {
        Backend deferred = new Backend(false);
        Fp8State d = new Fp8State(RECIPE, L, deferred);
        step(new MatmulOps[] {deferred}, new Fp8State[] {d}, rnd);
        d.update();
        byte[] before = d.encode();
        step(new MatmulOps[] {deferred}, new Fp8State[] {d}, rnd); // a validation's forwards (and more)
        d.restore(before);
        assertThat(deferred.pending.pending()).as("flushed by restore, not left for the next step").isZero();
        assertThat(d.encode()).containsExactly(before);
    }
}
