package io.accel4j.nn;

/**
 * A network that cannot be built as described: blocks whose shapes do not fit, a parameter registered twice, a module
 * used in two places. Raised while building, before anything is allocated; the message names the module or parameter
 * and both shapes.
 */
public final class ShapeException extends IllegalArgumentException {

    public ShapeException(String message) {
        super(message);
    }
}
