package io.accel4j.nn;

/**
 * A handle to one activation region of a network, handed out by {@link Builder#activation} or {@link Builder#shared};
 * a {@link Pass} resolves it to {@code rows × perRow} floats ({@link Pass#act}).
 *
 * @param index  the region's index in its {@link ActivationPlan}
 * @param name   the region's name (the declaring module's path, or the shared key)
 * @param perRow floats per position this handle uses (a shared region may be wider)
 * @param owner  the plan the handle belongs to
 */
public record ActRef(int index, String name, long perRow, Object owner) {

    @Override
    public String toString() {
        return name + "[" + perRow + "/row]";
    }
}
