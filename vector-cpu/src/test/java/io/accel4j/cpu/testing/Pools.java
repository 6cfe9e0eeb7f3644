package io.accel4j.cpu.testing;

import io.accel4j.cpu.Parallel;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The two thread pools a kernel test runs every case on, 1 and 3 threads (results must not depend on the count):
 * register as {@code @RegisterExtension static final Pools POOLS = new Pools();}, which opens them before the class's
 * first test and closes them after its last.
 */
public final class Pools implements BeforeAllCallback, AfterAllCallback {

    private Parallel one;
    private Parallel three;

    @Override
    public void beforeAll(ExtensionContext context) {
        one = new Parallel(1);
        three = new Parallel(3);
    }

    @Override
    public void afterAll(ExtensionContext context) {
        one.close();
        three.close();
    }

    /** The 1-thread pool. */
    public Parallel one() {
        return open(one);
    }

    /** The 3-thread pool. */
    public Parallel three() {
        return open(three);
    }

    private static Parallel open(Parallel p) {
        if (p == null) {
            throw new IllegalStateException("the pools open before the class's tests: register Pools as a static "
                    + "@RegisterExtension field");
        }
        return p;
    }
}
