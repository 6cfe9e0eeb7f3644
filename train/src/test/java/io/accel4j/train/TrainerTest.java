package io.accel4j.train;

import io.accel4j.core.ops.Ops;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Random;

/**
 * The fixtures tests not yet moved still reach through this name: each delegates to {@link Gpt2Fixtures}. Its tests
 * moved to the Learner ({@link Gpt2TrainingTest}); to be removed once every user names {@link Gpt2Fixtures}.
 */
public final class TrainerTest {

    static final GptConfig TINY = Gpt2Fixtures.TINY;

    private TrainerTest() {
    }

    static TokenFile tokenFile(Path path, int n, Random r) throws IOException {
        return Gpt2Fixtures.tokenFile(path, n, r);
    }

    public static Gpt2 model(Ops ops, int maxB, long seed) {
        return Gpt2Fixtures.model(ops, maxB, seed);
    }

    static Gpt2 model(Ops ops, int maxB, long seed, Precision p) {
        return Gpt2Fixtures.model(ops, maxB, seed, p);
    }

    static float[] floats(MemorySegment s) {
        return Gpt2Fixtures.floats(s);
    }

    public static TrainConfig.Builder base() {
        return Gpt2Fixtures.base();
    }
}
