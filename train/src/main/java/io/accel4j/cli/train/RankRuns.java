package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.data.DefaultDataset;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.parallel.ParameterServers;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.file.Path;

/**
 * Where {@code accel4j train}'s ranks run once the run directory is set up ({@link TrainCommand} checked the flags):
 * the data (the generated dataset written by rank 0 when no --train-data is given), then one rank, several in this
 * process (a thread each over an in-process group; with --sync async the parameter servers beside the workers), one
 * per process (mpirun's or the launcher's; async: {@link AsyncProcessRun}), or --tp's ({@link TensorParallelRun});
 * each data-parallel rank a {@link LearnerRun}. A rank's failure names the rank.
 */
final class RankRuns {

    private final TrainCommand cmd;

    RankRuns(TrainCommand cmd) {
        this.cmd = cmd;
    }

    /**
     * Trains in {@code dir} ({@code run}: the lead's run directory, null elsewhere) over {@code world} (one process per
     * rank; null: the ranks are in this process) on {@code nThreads} threads.
     */
    void train(Path dir, RunDirectory run, Communicator world, Launch launch, int nThreads, TrainConfig cfg,
               Path modelFile, GptConfig modelConfig, PrintWriter w) {
        DefaultDataset.Splits data = null;
        Path trainPath = cmd.trainData, valPath = cmd.valData;
        if (cmd.trainData == null) {
            trainPath = dir.resolve("train.bin");
            valPath = cmd.valData != null ? cmd.valData : dir.resolve("val.bin");
            data = launch.lead() ? GeneratedData.write(cmd.seed, trainPath, dir.resolve("val.bin"), run, w) : null;
        }
        if (cmd.tensor.active()) {
            trainTensorParallel(world, launch, nThreads, cfg, modelFile, modelConfig, dir, trainPath, w);
        } else if (world != null) {
            world.barrier(); // rank 0 has created the run directory and written the generated dataset
            try {
                int gpu = cmd.device == Backend.Device.CUDA ? launch.gpu() : 0;
                if (cmd.async.async()) {
                    new AsyncProcessRun(cmd, cmd.async).run(world, launch.lead(), nThreads, cfg, modelFile,
                            modelConfig, dir, trainPath, valPath, data, w);
                } else {
                    rank(null, world, gpu, nThreads, cfg, modelFile, modelConfig, dir, trainPath, valPath, data,
                            launch.lead() ? w : new PrintWriter(Writer.nullWriter()));
                }
            } catch (CliException e) {
                throw e;
            } catch (RuntimeException e) {
                throw new CliException("rank " + world.rank() + " of " + world.size() + ": "
                        + TrainCommand.message(e), e);
            }
            world.close(); // MPI_Finalize; a rank that failed skips it, exits 1, and mpirun stops the others
        } else if (cmd.ranks == 1) {
            rank(null, null, 0, nThreads, cfg, modelFile, modelConfig, dir, trainPath, valPath, data, w);
        } else {
            int perRank = Math.max(1, nThreads / cmd.ranks);
            Path tp = trainPath, vp = valPath;
            DefaultDataset.Splits d = data;
            ParameterServers servers = cmd.async.async() ? cmd.async.servers(cmd.ranks, cmd.timeout(), w) : null;
            if (servers != null) {
                w.printf("asynchronous data parallelism: %d parameter server%s, %d workers, staleness <= %d%n",
                        servers.servers(), servers.servers() == 1 ? "" : "s", cmd.ranks - servers.servers(),
                        servers.staleness());
            }
            try (servers; InProcessGroup group = InProcessGroup.create(servers == null ? cmd.ranks
                    : cmd.ranks - servers.servers(), cmd.timeout())) {
                group.run(comm -> {
                    rank(servers, comm, comm.rank(), perRank, cfg, modelFile, modelConfig, dir, tp, vp, d,
                            comm.rank() == 0 ? w : new PrintWriter(Writer.nullWriter()));
                    return null;
                });
            }
        }
    }

    /**
     * One rank of the data-parallel path on the Java API ({@link LearnerRun}); with {@code servers}, a worker of
     * asynchronous data parallelism's.
     */
    private void rank(ParameterServers servers, Communicator host, int gpu, int nThreads, TrainConfig cfg,
                      Path modelFile, GptConfig c, Path dir, Path trainPath, Path valPath, DefaultDataset.Splits data,
                      PrintWriter w) {
        new LearnerRun(cmd, servers).train(host, gpu, nThreads, cfg, modelFile, c, dir, trainPath, valPath, data, w);
    }

    /** {@code --tp}: the run through the Learner ({@link TensorParallelRun}), in-process ranks or one per process. */
    private void trainTensorParallel(Communicator world, Launch launch, int nThreads, TrainConfig cfg,
                                     Path modelFile, GptConfig modelConfig, Path dir, Path trainPath, PrintWriter w) {
        if (world != null) {
            world.barrier(); // rank 0 has created the run directory and written the generated dataset
        }
        try (TokenFile train = TrainCommand.open(trainPath, "train")) {
            TensorParallelRun.run(TensorParallelRun.learner(modelConfig, cfg, cmd.tensor.tp(), cmd.ranks, world,
                    nThreads, train, cmd.timeout()), modelConfig, modelFile, cfg, dir, cmd.resume != null,
                    launch.lead(), launch.lead() ? w : new PrintWriter(Writer.nullWriter()));
        } catch (IOException | IllegalArgumentException e) {
            throw new CliException((world == null ? "" : "rank " + world.rank() + " of " + world.size() + ": ")
                    + TrainCommand.message(e), e);
        }
        if (world != null) {
            world.close();
        }
    }
}
