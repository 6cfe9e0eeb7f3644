package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Mailbox;
import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.collectives.TcpCommunicator;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.data.DefaultDataset;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.parallel.ParameterServers;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.file.Path;

/**
 * {@code train --sync async} with one rank per process (the launcher's TCP ranks, or mpirun's): ranks
 * {@code 0 … W−1} are the workers, each a {@link LearnerRun} whose learner pushes to and pulls from the servers through its mailbox; ranks
 * {@code W … N−1} are the {@code K} parameter servers, each serving its shard until every worker is done or dropped.
 * Rank 0 (worker 0) leads: run directory, metrics, checkpoints (gathered from the servers), report.
 */
final class AsyncProcessRun {

    private final TrainCommand cmd;
    private final AsyncOptions async;

    AsyncProcessRun(TrainCommand cmd, AsyncOptions async) {
        this.cmd = cmd;
        this.async = async;
    }

    private static Mailbox mailbox(Communicator world) {
        if (world instanceof TcpCommunicator tcp) {
            return tcp.mailbox();
        }
        if (world instanceof MpiCommunicator mpi) {
            return mpi.mailbox();
        }
        throw new IllegalStateException("--sync async across processes needs the launcher's TCP ranks or mpirun's");
    }

    /** This process's rank of {@code world}: a worker's run or a server's loop; a server's failure is an error. */
    void run(Communicator world, boolean lead, int nThreads, TrainConfig cfg, Path modelFile, GptConfig modelConfig,
             Path dir, Path trainPath, Path valPath, DefaultDataset.Splits data, PrintWriter w) {
        int k = async.servers(), workers = world.size() - k;
        if (lead) {
            w.printf("asynchronous data parallelism: %d parameter server%s (ranks %d..%d), %d workers (ranks 0..%d),"
                    + " staleness <= %d, one process each%n", k, k == 1 ? "" : "s", workers, world.size() - 1,
                    workers, workers - 1, async.bound());
            w.println("(" + (world instanceof MpiCommunicator ? "under mpirun (Open MPI)" : "over TCP")
                    + ": point-to-point messages, received from whichever rank sends first)");
            w.flush();
        }
        try (Mailbox box = mailbox(world)) {
            if (world.rank() >= workers) {
                String failed = ParameterServers.serve(box, k, workers, async.bound(), cmd.timeout(),
                        new ParameterLayout(modelConfig), cfg, msg -> {
                            synchronized (w) {
                                w.println(msg);
                                w.flush();
                            }
                        });
                if (failed != null) {
                    throw new CliException("rank " + world.rank() + " of " + world.size() + ": " + failed);
                }
                return;
            }
            try (ParameterServers servers = ParameterServers.remote(box, k, workers, async.bound(), cmd.timeout())) {
                new LearnerRun(cmd, servers).train(new AsyncWorkerGroup(world.rank(), workers, cmd.timeout()), 0,
                        nThreads, cfg, modelFile, modelConfig, dir, trainPath, valPath, data,
                        lead ? w : new PrintWriter(Writer.nullWriter()));
            }
        }
    }
}
