package io.accel4j.cli.train;

import io.accel4j.train.TrainConfig;
import io.accel4j.train.parallel.ParameterServers;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.function.Function;
import picocli.CommandLine.Option;

/**
 * {@code train}'s options of asynchronous data parallelism ({@code --sync async --ps K --staleness S}) and the
 * straggler of its benchmark ({@code --straggler-ms R:MS}, any strategy): their checks and the servers they ask for,
 * whose workers the learners are ({@link io.accel4j.fit.LearnerBuilder#asyncWorkers}).
 */
final class AsyncOptions {

    @Option(names = "--sync", paramLabel = "sync|async", defaultValue = "sync", description = "With --ranks N: sync "
            + "averages the gradients every step (DDP, ZeRO); async makes --ps K of the ranks parameter servers that "
            + "own shards of the parameters and AdamW's state, the other N-K ranks workers that push gradients and "
            + "pull parameters, at most --staleness steps apart (in-process ranks, or processes under accel4j launch "
            + "or mpirun) (default: ${DEFAULT-VALUE}).")
    String sync;
    @Option(names = "--ps", paramLabel = "K", description = "With --sync async: parameter-server ranks, fewer than "
            + "--ranks (default: 1).")
    Integer ps;
    @Option(names = "--staleness", paramLabel = "S", description = "With --sync async: how many steps a worker may "
            + "run ahead of the slowest one (stale synchronous parallel); 0: synchronous (default: 1).")
    Integer staleness;
    @Option(names = "--straggler-ms", paramLabel = "R:MS", description = "Test and benchmark option: rank R (a "
            + "worker's index with --sync async) sleeps MS milliseconds after each step.")
    String straggler;

    private int stragglerRank = -1;
    private long stragglerMs;

    /** Whether the run is asynchronous. */
    boolean async() {
        return "async".equals(sync);
    }

    int servers() {
        return ps == null ? 1 : ps;
    }

    int bound() {
        return staleness == null ? 1 : staleness;
    }

    /**
     * Checks the options against the run: {@code ranks} data-parallel ranks (in-process, or one per process under the
     * launcher or mpirun), {@code cfg} and whether it runs on a GPU.
     */
    void check(int ranks, TrainConfig cfg, boolean cuda,
               Function<String, RuntimeException> usage) {
        if (!"sync".equals(sync) && !"async".equals(sync)) {
            throw usage.apply("--sync must be sync or async, got '" + sync + "'");
        }
        if (straggler != null) {
            parseStraggler(usage);
        }
        if (!async()) {
            if (ps != null || staleness != null) {
                throw usage.apply((ps != null ? "--ps" : "--staleness") + " goes with --sync async");
            }
            return;
        }
        if (bound() < 0) {
            throw usage.apply("--staleness must be >= 0 (0: synchronous), got " + bound());
        }
        if (servers() < 1) {
            throw usage.apply("--ps must be >= 1, got " + servers());
        }
        if (servers() >= ranks) {
            throw usage.apply("--ps " + servers() + " leaves no worker among " + ranks + " rank" + (ranks == 1 ? ""
                    : "s") + ": the workers are the ranks that are not servers (--ranks " + (servers() + 1)
                    + " or more)");
        }
        String refused = cfg.zeroStage() > 0 ? "--zero " + cfg.zeroStage() + ": the servers shard the state already"
                : cfg.precision().scalesLoss() ? "fp16's loss scaling" : cuda ? "--device cuda" : null;
        if (refused != null) {
            throw usage.apply("--sync async does not support " + refused + " yet");
        }
        if (stragglerRank >= ranks - servers()) {
            throw usage.apply("--straggler-ms " + straggler + ": with --sync async R is a worker's index, in [0, "
                    + (ranks - servers()) + ")");
        }
    }

    private void parseStraggler(Function<String, RuntimeException> usage) {
        int colon = straggler.indexOf(':');
        try {
            stragglerRank = Integer.parseInt(straggler.substring(0, Math.max(0, colon)));
            stragglerMs = Long.parseLong(straggler.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw usage.apply("--straggler-ms must be R:MS (a rank and milliseconds), got '" + straggler + "'");
        }
        if (stragglerRank < 0 || stragglerMs < 0) {
            throw usage.apply("--straggler-ms must be R:MS with R >= 0 and MS >= 0, got '" + straggler + "'");
        }
    }

    /** The straggler's pause after a step of rank {@code rank} (none for the others). */
    void afterStep(int rank) {
        if (rank == stragglerRank && stragglerMs > 0) {
            try {
                Thread.sleep(stragglerMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The servers of an asynchronous run of {@code ranks} ranks; they tell {@code w} about dropped workers. */
    ParameterServers servers(int ranks, Duration timeout, PrintWriter w) {
        return new ParameterServers(servers(), ranks - servers(), bound(), timeout, msg -> {
            synchronized (w) {
                w.println(msg);
                w.flush();
            }
        });
    }
}
