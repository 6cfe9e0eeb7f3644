package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.collectives.mpi.MpiLibrary;
import io.accel4j.collectives.mpi.Mpirun;
import io.accel4j.train.StepMetrics;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Tensor parallelism over Open MPI: {@link MpiTensorParallelMain} under {@code mpirun -np 2} (tp = 2 across two
 * processes, the tensor group split from MPI_COMM_WORLD) trains as one in-process rank does; loss per step within
 * {@link TensorParallelLearnerTest#LOSS_REL}. Skipped, saying why, without mpirun or libmpi.
 */
class MpiTensorParallelTest {

    @Test
    void twoProcessesAtTp2TrainAsOneRank() throws Exception {
        Path mpirun = Mpirun.find().orElse(null);
        Assumptions.assumeTrue(mpirun != null, "mpirun not on PATH: run scripts/install-openmpi.sh");
        Assumptions.assumeTrue(MpiLibrary.available(), MpiLibrary::unavailableReason);
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        Mpirun.Result r = Mpirun.run(Mpirun.javaCommand(mpirun, 2, List.of(), cp,
                MpiTensorParallelMain.class.getName(), List.of()), Path.of("."), Duration.ofSeconds(120));
        assertThat(r.finished()).as("mpirun finished; output:%n%s", r.output()).isTrue();
        assertThat(r.exitCode()).as("exit code; output:%n%s", r.output()).isZero();
        assertThat(r.output()).contains("TP OK rank 0").contains("TP OK rank 1");
        List<StepMetrics> want;
        try (Learner one = TensorParallelLearnerTest.learner(TensorParallelLearnerTest.ownModel(), 1, 1).build()) {
            want = one.fit(10, null);
        }
        Matcher m = Pattern.compile("LOSS (\\d+) (\\S+)").matcher(r.output());
        int seen = 0;
        while (m.find()) {
            int s = Integer.parseInt(m.group(1));
            double w = want.get(s).trainLoss();
            assertThat(Double.parseDouble(m.group(2))).as("step %d", s)
                    .isCloseTo(w, within(TensorParallelLearnerTest.LOSS_REL * w));
            seen++;
        }
        assertThat(seen).isEqualTo(10);
    }
}
