package io.accel4j.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * The vector width the CPU kernels run at, chosen once per JVM.
 *
 * <p>By default the preferred species of this CPU ({@code FloatVector.SPECIES_PREFERRED}). The system property
 * {@value #BITS_PROPERTY} forces {@code 128}, {@code 256}, {@code 512} or {@code scalar} (plain Java loops, no
 * vectors); a forced width wider than the hardware's runs but is emulated and slow, which {@link #describe()} says.
 */
public final class Simd {

    /** System property that forces the kernels' vector width. */
    public static final String BITS_PROPERTY = "accel4j.vector.bits";

    /** The float species every kernel uses (when {@link #SCALAR} is false). */
    public static final VectorSpecies<Float> FLOAT;

    /** True when {@code -Daccel4j.vector.bits=scalar}: kernels take their plain-Java paths. */
    public static final boolean SCALAR;

    static {
        String p = System.getProperty(BITS_PROPERTY, "").trim();
        switch (p) {
            case "", "preferred" -> { FLOAT = FloatVector.SPECIES_PREFERRED; SCALAR = false; }
            case "128" -> { FLOAT = FloatVector.SPECIES_128; SCALAR = false; }
            case "256" -> { FLOAT = FloatVector.SPECIES_256; SCALAR = false; }
            case "512" -> { FLOAT = FloatVector.SPECIES_512; SCALAR = false; }
            case "scalar" -> { FLOAT = FloatVector.SPECIES_PREFERRED; SCALAR = true; }
            default -> throw new IllegalArgumentException(
                    "-D" + BITS_PROPERTY + " must be 128, 256, 512, scalar or preferred; got '" + p + "'");
        }
    }

    private Simd() {}

    /** Floats per vector ({@code 1} in scalar mode). */
    public static int lanes() {
        return SCALAR ? 1 : FLOAT.length();
    }

    /** Vector width in bits ({@code 32} in scalar mode). */
    public static int bits() {
        return SCALAR ? 32 : FLOAT.vectorBitSize();
    }

    /** The hardware's preferred width in bits. */
    public static int preferredBits() {
        return VectorShape.preferredShape().vectorBitSize();
    }

    /** One line for logs and {@code accel4j doctor}: the width in use, and whether it was forced or is emulated. */
    public static String describe() {
        if (SCALAR) {
            return "scalar (forced by -D" + BITS_PROPERTY + "=scalar; hardware prefers " + preferredBits() + "-bit)";
        }
        String s = "Vector API " + bits() + "-bit (" + lanes() + " floats)";
        if (bits() > preferredBits()) {
            s += ", wider than the hardware's " + preferredBits() + "-bit: emulated and slow";
        } else if (bits() < preferredBits()) {
            s += ", narrower than the hardware's " + preferredBits() + "-bit (forced)";
        }
        return s;
    }
}
