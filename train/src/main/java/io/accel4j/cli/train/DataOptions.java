package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.train.data.TokenShards;
import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Function;
import picocli.CommandLine.Option;

/**
 * {@code train}'s data-loading options and the train data's shards: {@code --train-data} given as one file, a
 * comma-separated list or a glob ({@link TokenShards#expand}), and {@code --loader-threads}.
 */
final class DataOptions {

    @Option(names = "--loader-threads", paramLabel = "N", defaultValue = "1", description = "Threads reading the "
            + "train batches ahead (2 buffers each); the batches are the same for any N (default: ${DEFAULT-VALUE}).")
    int loaderThreads;

    /** Checks the options and that {@code trainData} names at least one file; a usage error otherwise. */
    void check(Path trainData, Function<String, RuntimeException> usage) {
        if (loaderThreads < 1 || loaderThreads > 64) {
            throw usage.apply("--loader-threads must be in [1, 64], got " + loaderThreads);
        }
        if (isShardList(trainData)) {
            shards(trainData, usage);
        }
    }

    /**
     * Whether {@code trainData} is a glob or a list of shards rather than one file: it names no existing file and has
     * a glob character or a comma (so an existing file whose name has one is still that file).
     */
    static boolean isShardList(Path trainData) {
        return trainData != null && !java.nio.file.Files.exists(trainData)
                && TokenShards.isPattern(trainData.toString());
    }

    /** The files of {@code --train-data}. */
    static List<Path> shards(Path trainData, Function<String, RuntimeException> usage) {
        try {
            return TokenShards.expand(trainData.toString());
        } catch (NoSuchFileException e) {
            throw usage.apply("--train-data " + e.getFile() + ": " + e.getReason());
        } catch (IllegalArgumentException e) {
            throw usage.apply("--train-data " + e.getMessage());
        } catch (IOException e) {
            throw new CliException("cannot list --train-data " + trainData + ": " + io.accel4j.cli.IoMessages
                    .describe(e), e);
        }
    }

    /** Opens the train data's shards; a format error names the shard. */
    static TokenShards open(Path trainData, Function<String, RuntimeException> usage) throws IOException {
        List<Path> files = isShardList(trainData) ? shards(trainData, usage) : List.of(trainData);
        try {
            return TokenShards.open(files);
        } catch (NoSuchFileException e) { // a format error (FileFormatException) names the shard already
            throw new CliException("the train token file " + e.getFile() + " does not exist", e);
        }
    }
}
