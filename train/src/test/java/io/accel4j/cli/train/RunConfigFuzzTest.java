package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.io.Mutations;
import io.accel4j.train.io.Mutations.Mutation;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import picocli.CommandLine;

/**
 * {@value RunConfig#FILE} mutated (issue 21 item 10, as {@code ParserFuzzTest}): {@code --resume} either restores
 * what it holds or fails with a {@link FileFormatException} naming the file and the flag; nothing else.
 */
class RunConfigFuzzTest {

    private static final Path DIR;
    private static final byte[] VALID;

    static {
        try {
            DIR = Files.createTempDirectory("accel4j-runconfig-fuzz");
            DIR.toFile().deleteOnExit();
            CommandLine cl = new CommandLine(new TrainCommand());
            cl.parseArgs("--lr", "3e-3", "--batch", "8", "--train-data", "/data/train.bin", "--no-decay-set",
                    "--precision", "fp8", "--fp8-history", "16", "--schedule", "constant", "--threads", "2");
            RunConfig.of(cl.getCommandSpec(), Map.of()).write(DIR);
            VALID = Files.readAllBytes(DIR.resolve(RunConfig.FILE));
        } catch (IOException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @Provide
    Arbitrary<List<Mutation>> mutations() {
        return Mutations.mutations();
    }

    @Property(tries = 150)
    void resumeRestoresOrNamesTheFlag(@ForAll("mutations") List<Mutation> ms) throws IOException {
        Path file = DIR.resolve(RunConfig.FILE);
        Files.write(file, Mutations.apply(VALID, ms));
        CommandLine cl = new CommandLine(new TrainCommand());
        cl.parseArgs("--resume", DIR.toString());
        try {
            RunConfig.restore(cl.getCommandSpec(), DIR, msg -> new IllegalStateException("a usage error: " + msg));
        } catch (FileFormatException e) {
            assertThat(e.file()).isEqualTo(file);
            assertThat(e.getMessage()).startsWith(file + ": " + e.field() + " ");
        }
    }
}
