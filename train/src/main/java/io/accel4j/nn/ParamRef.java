package io.accel4j.nn;

/**
 * A handle to one parameter tensor of a network, handed out by {@link Builder#parameter}; a {@link Pass} resolves it to
 * the tensor's slice of the parameter buffer ({@link Pass#param}) or of the gradient buffer ({@link Pass#grad}).
 *
 * @param index the tensor's index in its network's {@link ParameterTable} (declaration order)
 * @param name  the tensor's full name, e.g. {@code h.3.attn.c_attn.weight}
 * @param owner the table the handle belongs to (a handle of another network is refused)
 */
public record ParamRef(int index, String name, Object owner) {

    @Override
    public String toString() {
        return name;
    }
}
