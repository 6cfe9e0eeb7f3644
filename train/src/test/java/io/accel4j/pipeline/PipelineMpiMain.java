package io.accel4j.pipeline;

import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.fit.Learner;
import io.accel4j.train.StepMetrics;
import java.time.Duration;

/**
 * One rank of GPT-2 (tiny) at pp=2 under {@code mpirun -np 2}: each process is one stage over Open MPI; rank 0 prints
 * {@code LOSS <step> <loss>} per step (the schedule is args[0], the steps args[1]) and {@code OK}. With args[2] = T
 * (tensor ranks) and {@code -np 2·T}: two stages, each split over T processes (tp × pp, the groups split from the
 * world by {@code MPI_Comm_split}).
 */
public final class PipelineMpiMain {

    private PipelineMpiMain() {}

    public static void main(String[] args) {
        Schedule schedule = Schedule.named(args[0]);
        int steps = Integer.parseInt(args[1]);
        int tp = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        try (MpiCommunicator comm = MpiCommunicator.world(Duration.ofSeconds(60));
             Learner l = PipelineGpt2Test.gpt2().threads(1).communicator(comm).tensorParallel(tp)
                     .pipeline(tp > 1 ? Gpt2Stages.parallel(PipelineGpt2Test.TINY)
                             : Gpt2Stages.of(PipelineGpt2Test.TINY),
                             comm.size() / tp, PipelineGpt2Test.M, schedule)
                     .build()) {
            for (StepMetrics m : l.fit(steps, null)) {
                if (comm.rank() == 0) {
                    System.out.println("LOSS " + m.step() + " " + m.trainLoss());
                }
            }
            System.out.println("OK rank " + comm.rank());
        }
    }
}
