package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.mpi.Mpirun;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A rank of a real {@code mpirun -np 2} job dies between two all-reduces ({@link MpiDeadRankMain}); the job must end,
 * never hang. Skipped (with the reason) without Open MPI. Each test takes a few seconds.
 */
class MpiDeadRankTest {

    /** The survivor's collective timeout: short for a quick test, ample for the first all-reduce (~0.1 s). */
    private static final Duration TIMEOUT = Duration.ofSeconds(3);
    /** The queue's grace on top of the timeout (2 s, AbstractCommunicator) plus scheduling slack on 2 busy cores. */
    private static final Duration SLACK = Duration.ofSeconds(5);
    /** Bound on a whole mpirun: JVM start-ups, MPI_Init and the failure, with room to spare. */
    private static final Duration LIMIT = Duration.ofSeconds(60);

    private static final Pattern SURVIVOR = Pattern.compile("SURVIVOR rank 0: after (\\d+) ms: (.*)");

    @Test
    @Timeout(90)
    void theSurvivorFailsWithinItsTimeoutNamingTheCollectiveRankAndTime() throws Exception {
        // Open MPI 4's mpirun would stop the survivor as soon as the other rank dies (see the test below); told not
        // to, the survivor's all-reduce waits on a dead peer and only the communicator's timeout can end it.
        List<String> cmd = Mpirun.javaCommand(MpiCommunicatorTest.mpirunOrSkip(), 2,
                List.of("--mca", "orte_abort_on_non_zero_status", "0"), MpiCommunicatorTest.classpath(),
                MpiDeadRankMain.class.getName(), List.of(Long.toString(TIMEOUT.toMillis())));
        Mpirun.Result r = Mpirun.run(cmd, Path.of("."), LIMIT);

        assertThat(r.finished()).as("mpirun ended within %s; output:%n%s", LIMIT, r.output()).isTrue();
        assertThat(r.output()).contains("CONNECTED rank 0 of 2", "CONNECTED rank 1 of 2").doesNotContain("UNEXPECTED");
        Matcher m = SURVIVOR.matcher(r.output());
        assertThat(m.find()).as("rank 0 reported a CollectiveException; output:%n%s", r.output()).isTrue();
        long ms = Long.parseLong(m.group(1));
        assertThat(ms).as("rank 0's wait (ms) before failing").isBetween(TIMEOUT.toMillis(),
                TIMEOUT.plus(SLACK).toMillis());
        assertThat(m.group(2)).startsWith("allReduce on rank 0 of 2 failed after ")
                .containsPattern("failed after \\d+\\.\\d{3} s: ").contains("(PT3S)");
    }

    @Test
    @Timeout(90)
    void byDefaultMpirunStopsTheJobWhenARankDies() throws Exception {
        // a timeout far beyond the bound below: only mpirun itself can end the survivor in time
        List<String> cmd = Mpirun.javaCommand(MpiCommunicatorTest.mpirunOrSkip(), 2, List.of(),
                MpiCommunicatorTest.classpath(), MpiDeadRankMain.class.getName(), List.of("600000"));
        Mpirun.Result r = Mpirun.run(cmd, Path.of("."), LIMIT);

        assertThat(r.finished()).as("mpirun ended within %s; output:%n%s", LIMIT, r.output()).isTrue();
        assertThat(r.exitCode()).as("mpirun's exit code; output:%n%s", r.output()).isNotZero();
        assertThat(r.output()).doesNotContain("UNEXPECTED").contains("exited with non-zero status")
                .containsPattern("Process name: \\[\\[\\d+,\\d+\\],1\\]");
    }
}
