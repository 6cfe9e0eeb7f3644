package io.accel4j.jmh;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Map;

/**
 * What one operation of a kernel benchmark does, so the report can turn a score into GB/s or GFLOP/s and a ratio to
 * the baseline measured in the same run. A kernel benchmark class declares
 * {@code public static Work work(String method, Map<String, String> params)} beside its methods, so the counting
 * convention lives next to the code it describes.
 *
 * @param amount   bytes moved (read + written) or floating-point operations, per operation
 * @param unit     what {@code amount} counts
 * @param baseline the method of the same class, at the same parameters, this one is compared with; null for the
 *                 baseline itself
 */
public record Work(double amount, Unit unit, String baseline) {

    /** The two things a kernel figure counts. */
    public enum Unit {
        BYTES("GB/s"), FLOPS("GFLOP/s");

        private final String rate;

        Unit(String rate) {
            this.rate = rate;
        }

        /** The rate's name, e.g. {@code GB/s}. */
        public String rate() {
            return rate;
        }
    }

    /** Bytes moved per operation. */
    public static Work bytes(double bytes, String baseline) {
        return new Work(bytes, Unit.BYTES, baseline);
    }

    /** Floating-point operations per operation. */
    public static Work flops(double flops, String baseline) {
        return new Work(flops, Unit.FLOPS, baseline);
    }

    /**
     * The {@code work} method of benchmark class {@code io.accel4j.jmh.<simpleName>}, or null when the class has
     * none (the GEMM benchmarks, which the report counts from their shape).
     */
    static Method finder(String simpleName) {
        try {
            Method m = Class.forName("io.accel4j.jmh." + simpleName).getMethod("work", String.class, Map.class);
            return Modifier.isStatic(m.getModifiers()) && m.getReturnType() == Work.class ? m : null;
        } catch (ReflectiveOperationException | LinkageError e) {
            return null;
        }
    }

    /** Calls a {@link #finder} result. */
    static Work of(Method finder, String method, Map<String, String> params) {
        try {
            return (Work) finder.invoke(null, method, params);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        } catch (InvocationTargetException e) {
            throw new IllegalArgumentException(finder.getDeclaringClass().getSimpleName() + ".work(" + method + ", "
                    + params + "): " + e.getCause().getMessage(), e.getCause());
        }
    }
}
