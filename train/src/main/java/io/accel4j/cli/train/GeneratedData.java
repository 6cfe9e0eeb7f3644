package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.cli.IoMessages;
import io.accel4j.train.data.DefaultDataset;
import io.accel4j.train.data.TokenFile;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;

/** {@code train}'s default dataset in the run directory: generated from --seed, written once, reused when there. */
final class GeneratedData {

    private GeneratedData() {}

    /**
     * The generated dataset, written to {@code trainFile} and {@code valFile} unless they already hold it (a resumed
     * run, or a new one with the same --seed: nothing rewritten, so a resume also works on a nearly full disk).
     */
    static DefaultDataset.Splits write(long seed, Path trainFile, Path valFile, RunDirectory run, PrintWriter w) {
        DefaultDataset.Splits s = DefaultDataset.generate(seed, TrainCommand.DEFAULT_TRAIN_TOKENS, TrainCommand.DEFAULT_VAL_TOKENS);
        boolean trainKept = holds(trainFile, s.train()), valKept = holds(valFile, s.val());
        try {
            if (!trainKept) {
                TokenFile.write(trainFile, s.train());
                run.generated(trainFile);
            }
            if (!valKept) {
                TokenFile.write(valFile, s.val());
                run.generated(valFile);
            }
        } catch (IOException e) {
            throw new CliException("cannot write the generated dataset: " + IoMessages.describe(e), e);
        }
        if (trainKept && valKept) {
            w.printf("the default dataset (two-digit additions, byte tokens, seed %d) is already in %s, %s%n", seed,
                    trainFile, valFile);
        } else {
            w.printf("generated the default dataset (two-digit additions, byte tokens, seed %d): %s, %s%n", seed,
                    trainFile, valFile);
        }
        return s;
    }

    /** Whether {@code file} is a token file of exactly {@code tokens}. */
    static boolean holds(Path file, int[] tokens) {
        if (!Files.isRegularFile(file)) {
            return false;
        }
        try (TokenFile t = TokenFile.open(file)) {
            if (t.size() != tokens.length) {
                return false;
            }
            int[] have = new int[tokens.length];
            t.read(0, have, tokens.length);
            return java.util.Arrays.equals(have, tokens);
        } catch (IOException | RuntimeException e) {
            return false; // not a token file, or a different one: written anew
        }
    }
}
