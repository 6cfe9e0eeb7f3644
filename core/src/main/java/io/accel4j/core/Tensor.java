package io.accel4j.core;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Objects;

/**
 * A dtype, a shape, strides and an off-heap {@link MemorySegment} whose lifetime is its {@link Arena}'s: closing the
 * arena frees the memory, and every later access fails with {@link IllegalStateException}. Nothing is freed by the GC.
 *
 * <p>Row-major by default; strides are in elements, so a transposed or sliced view shares the memory. Kernels take
 * the segment and explicit sizes ({@link #data()}, {@link #dim(int)}); this class only checks and describes.
 */
public final class Tensor {

    private final DType dtype;
    private final long[] shape;
    private final long[] strides;
    private final long offset; // elements from the start of data to element (0, …, 0)
    private final MemorySegment data;

    private Tensor(DType dtype, long[] shape, long[] strides, long offset, MemorySegment data) {
        this.dtype = dtype;
        this.shape = shape;
        this.strides = strides;
        this.offset = offset;
        this.data = data;
    }

    /** A new zero-filled row-major tensor allocated in {@code arena} (64-byte aligned, for vector loads). */
    public static Tensor allocate(Arena arena, DType dtype, long... shape) {
        Objects.requireNonNull(arena, "arena");
        Objects.requireNonNull(dtype, "dtype");
        long n = checkShape(shape);
        MemorySegment seg = arena.allocate(Math.multiplyExact(n, dtype.byteSize()), 64);
        return new Tensor(dtype, shape.clone(), rowMajorStrides(shape), 0, seg);
    }

    /** A row-major tensor over existing memory, which must hold at least {@code product(shape)} elements. */
    public static Tensor wrap(MemorySegment data, DType dtype, long... shape) {
        Objects.requireNonNull(data, "data");
        Objects.requireNonNull(dtype, "dtype");
        long n = checkShape(shape);
        long need = Math.multiplyExact(n, dtype.byteSize());
        if (data.byteSize() < need) {
            throw new IllegalArgumentException("a " + dtype + " tensor of shape " + Arrays.toString(shape) + " needs "
                    + need + " bytes, the segment has " + data.byteSize());
        }
        return new Tensor(dtype, shape.clone(), rowMajorStrides(shape), 0, data);
    }

    private static long checkShape(long[] shape) {
        Objects.requireNonNull(shape, "shape");
        long n = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has a negative dimension");
            }
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    private static long[] rowMajorStrides(long[] shape) {
        long[] s = new long[shape.length];
        long stride = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            s[i] = stride;
            stride *= Math.max(1, shape[i]);
        }
        return s;
    }

    public DType dtype() {
        return dtype;
    }

    public int rank() {
        return shape.length;
    }

    /** Size of dimension {@code i}; negative {@code i} counts from the end. */
    public long dim(int i) {
        return shape[axis(i)];
    }

    /** Stride of dimension {@code i} in elements. */
    public long stride(int i) {
        return strides[axis(i)];
    }

    public long[] shape() {
        return shape.clone();
    }

    public long[] strides() {
        return strides.clone();
    }

    /** Number of elements. */
    public long size() {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    /** True when the elements are laid out row-major without gaps, so {@link #data()} can be read flat. */
    public boolean isContiguous() {
        return Arrays.equals(strides, rowMajorStrides(shape));
    }

    /**
     * The memory from element (0, …, 0) on. For a contiguous tensor it holds exactly {@link #size()} elements in
     * row-major order. Fails if the arena is closed.
     */
    public MemorySegment data() {
        checkAlive();
        long bytes = size() == 0 ? 0 : (lastOffset() + 1) * dtype.byteSize();
        return data.asSlice(offset * dtype.byteSize(), bytes);
    }

    /** Element at {@code index} (one index per dimension), decoded to float. */
    public float getFloat(long... index) {
        checkAlive();
        return dtype.getFloat(data, elementOffset(index));
    }

    /** Writes {@code v} at {@code index}, rounded to nearest-even (FP8_E4M3 saturating). */
    public void setFloat(float v, long... index) {
        checkAlive();
        dtype.setFloat(data, elementOffset(index), v, true);
    }

    /** A view with dimensions {@code a} and {@code b} swapped (no copy). */
    public Tensor transpose(int a, int b) {
        int i = axis(a);
        int j = axis(b);
        long[] sh = shape.clone();
        long[] st = strides.clone();
        sh[i] = shape[j];
        sh[j] = shape[i];
        st[i] = strides[j];
        st[j] = strides[i];
        return new Tensor(dtype, sh, st, offset, data);
    }

    /** The same elements with another shape of equal size; the tensor must be contiguous. */
    public Tensor reshape(long... newShape) {
        long n = checkShape(newShape);
        if (n != size()) {
            throw new IllegalArgumentException("cannot reshape " + Arrays.toString(shape) + " (" + size()
                    + " elements) to " + Arrays.toString(newShape) + " (" + n + " elements)");
        }
        if (!isContiguous()) {
            throw new IllegalArgumentException("cannot reshape a non-contiguous view of shape " + Arrays.toString(shape)
                    + " with strides " + Arrays.toString(strides) + "; copy it first");
        }
        return new Tensor(dtype, newShape.clone(), rowMajorStrides(newShape), offset, data);
    }

    /** Checks that this tensor has exactly {@code expected} as shape; the message names both. */
    public Tensor requireShape(String name, long... expected) {
        if (!Arrays.equals(shape, expected)) {
            throw new IllegalArgumentException(name + " must have shape " + Arrays.toString(expected) + ", got "
                    + Arrays.toString(shape));
        }
        return this;
    }

    /** Checks the dtype; the message names both. */
    public Tensor requireDType(String name, DType expected) {
        if (dtype != expected) {
            throw new IllegalArgumentException(name + " must be " + expected + ", got " + dtype);
        }
        return this;
    }

    private long elementOffset(long[] index) {
        if (index.length != shape.length) {
            throw new IllegalArgumentException("index " + Arrays.toString(index) + " has " + index.length
                    + " coordinates, the tensor has rank " + shape.length);
        }
        long off = offset;
        for (int i = 0; i < index.length; i++) {
            if (index[i] < 0 || index[i] >= shape[i]) {
                throw new IndexOutOfBoundsException("index " + Arrays.toString(index) + " is outside shape "
                        + Arrays.toString(shape));
            }
            off += index[i] * strides[i];
        }
        return off;
    }

    private long lastOffset() {
        long off = 0;
        for (int i = 0; i < shape.length; i++) {
            off += (shape[i] - 1) * strides[i];
        }
        return off;
    }

    private int axis(int i) {
        int a = i < 0 ? shape.length + i : i;
        if (a < 0 || a >= shape.length) {
            throw new IllegalArgumentException("dimension " + i + " out of range for rank " + shape.length);
        }
        return a;
    }

    private void checkAlive() {
        if (!data.scope().isAlive()) {
            throw new IllegalStateException("tensor " + this + " has been freed (its arena is closed)");
        }
    }

    @Override
    public String toString() {
        return "Tensor[" + dtype + " " + Arrays.toString(shape) + "]";
    }
}
