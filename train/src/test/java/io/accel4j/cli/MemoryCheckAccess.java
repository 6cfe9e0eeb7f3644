package io.accel4j.cli;

import java.util.List;

/** {@link MemoryCheck#require} against a given figure, for tests in other packages. */
public final class MemoryCheckAccess {

    private MemoryCheckAccess() {}

    public static void require(List<MemoryCheck.Part> parts, long available) {
        MemoryCheck.require("x", parts, "y", new MemoryCheck.Available(available, "this machine has %s available"));
    }
}
