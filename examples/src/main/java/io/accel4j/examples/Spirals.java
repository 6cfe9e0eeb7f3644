package io.accel4j.examples;

import io.accel4j.fit.DataSource;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

/**
 * The two-spirals problem (Lang and Witbrock, 1988): two interleaved spirals of points in the plane, one per class,
 * with Gaussian noise; no straight line separates them, so a linear model stays near chance (50 %). Points are
 * {@code (x, y)} fp32 features with labels 0 and 1, generated from a seed.
 */
public final class Spirals {

    private final float[] xy;
    private final int[] label;

    /** {@code n} points (half per class) with noise of standard deviation {@code noise}, drawn from {@code seed}. */
    public Spirals(int n, double noise, long seed) {
        Random r = new Random(seed);
        xy = new float[2 * n];
        label = new int[n];
        for (int i = 0; i < n; i++) {
            int c = i % 2;
            double t = 0.25 + 3.0 * r.nextDouble(); // how far along the spiral: 0.25 … 3.25 turns of π
            double angle = Math.PI * t + c * Math.PI;
            double radius = t / 3.25;
            xy[2 * i] = (float) (radius * Math.cos(angle) + noise * r.nextGaussian());
            xy[2 * i + 1] = (float) (radius * Math.sin(angle) + noise * r.nextGaussian());
            label[i] = c;
        }
    }

    /** The number of points. */
    public int size() {
        return label.length;
    }

    /** Copies points {@code [from, from + count)} (wrapping around) into host buffers: features and labels. */
    public void copy(int from, int count, MemorySegment features, MemorySegment labels) {
        for (int j = 0; j < count; j++) {
            int i = Math.floorMod(from + j, label.length);
            features.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 2L * j, xy[2 * i]);
            features.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 2L * j + 1, xy[2 * i + 1]);
            labels.setAtIndex(ValueLayout.JAVA_INT_UNALIGNED, j, label[i]);
        }
    }

    /** The label of point {@code i}. */
    public int label(int i) {
        return label[i];
    }

    /**
     * Rank {@code rank}'s batches: global batch s is points {@code [s·ranks·B, (s+1)·ranks·B)} (wrapping), of which the
     * rank reads its own B; so N ranks of B see exactly what one rank of N·B does.
     */
    public DataSource.Factory batches() {
        return (rank, ranks, B, T) -> new DataSource.Resumable() {
            private long next = (long) rank * B * T;

            @Override
            public void skip(long batches) {
                next += batches * ranks * B * T;
            }

            @Override
            public void next(MemorySegment inputs, MemorySegment targets) {
                copy((int) (next % size()), B * T, inputs, targets);
                next += (long) ranks * B * T;
            }
        };
    }
}
