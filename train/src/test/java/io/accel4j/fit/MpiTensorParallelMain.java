package io.accel4j.fit;

import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.train.StepMetrics;
import java.time.Duration;

/**
 * Run under {@code mpirun -np 2}: {@link TensorParallelLearnerTest}'s own model split over the two processes
 * (tensorParallel(2) over MPI_COMM_WORLD), 10 steps; rank 0 prints {@code LOSS <step> <loss>} per step and every rank
 * {@code TP OK rank r}.
 */
public final class MpiTensorParallelMain {

    private MpiTensorParallelMain() {}

    public static void main(String[] args) {
        try (MpiCommunicator world = MpiCommunicator.world(Duration.ofSeconds(60))) {
            try (Learner l = TensorParallelLearnerTest.learner(TensorParallelLearnerTest.ownModel(), 1, 2)
                    .ranks(1).communicator(world).batch(TensorParallelLearnerTest.GLOBAL_B, TensorParallelLearnerTest.T)
                    .threads(1).build()) {
                for (StepMetrics m : l.fit(10, null)) {
                    if (world.rank() == 0) {
                        System.out.println("LOSS " + m.step() + " " + m.trainLoss());
                    }
                }
            }
            world.barrier();
            System.out.println("TP OK rank " + world.rank());
        } catch (RuntimeException e) {
            System.out.println("TP FAILED: " + e);
            System.exit(1);
        }
    }
}
