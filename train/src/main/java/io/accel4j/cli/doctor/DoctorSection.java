package io.accel4j.cli.doctor;

import java.util.List;

/**
 * One titled block of {@code accel4j doctor}'s report (JVM, CPU, kernels, memory; later CUDA, MPI).
 *
 * <p>A section reports what it finds, including what is missing ("not found (searched: …)", "unknown"), and does
 * not throw for an absent device or file; should it throw anyway, the report prints the error in its place and
 * carries on with the next section.
 */
public interface DoctorSection {

    /** The block's heading, e.g. {@code "CPU"}. */
    String title();

    /** The lines of the block, in order. */
    List<Line> lines();

    /** One {@code key  value} line; keys are aligned across the whole report. */
    record Line(String key, String value) {}
}
