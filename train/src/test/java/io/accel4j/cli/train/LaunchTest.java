package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.InProcessGroup;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@link Launch}: in-process or one rank per process under mpirun, from the environment. */
class LaunchTest {

    private static Map<String, String> mpirun(int rank, int size, int local) {
        return Map.of(Launch.WORLD_RANK, Integer.toString(rank), Launch.WORLD_SIZE, Integer.toString(size),
                Launch.LOCAL_SIZE, Integer.toString(local), "PATH", "/usr/bin");
    }

    @Test
    void withoutMpirunTheRanksAreThreadsOfThisProcess() {
        Launch l = Launch.detect(Map.of("PATH", "/usr/bin"), 3, true);
        assertThat(l.perProcess()).isFalse();
        assertThat(l.lead()).isTrue();
        assertThat(l.threads(5)).isEqualTo(5);
    }

    @Test
    void underMpirunEachProcessIsOneRank() {
        Launch l = Launch.detect(mpirun(2, 3, 3), 1, false);
        assertThat(l).isEqualTo(new Launch(3, 2, 3, 2, false, null));
        assertThat(l.perProcess()).isTrue();
        assertThat(l.lead()).isFalse();
        assertThat(Launch.detect(mpirun(0, 3, 1), 3, true).lead()).isTrue();
        assertThat(l.threads(null)).as("the processors shared by the 3 local ranks").isEqualTo(
                Math.max(1, io.accel4j.cpu.Parallel.defaultThreads() / 3));
        Map<String, String> bound = new java.util.HashMap<>(mpirun(0, 3, 3));
        bound.put(Launch.BOUND, "1");
        assertThat(Launch.detect(bound, 1, false).threads(null)).as("the cores mpirun bound this process to")
                .isEqualTo(io.accel4j.cpu.Parallel.defaultThreads());
    }

    @Test
    void theLocalRankPicksTheGpu() {
        Map<String, String> env = new java.util.HashMap<>(mpirun(5, 8, 4));
        env.put(Launch.LOCAL_RANK, "1");
        Launch l = Launch.detect(env, 1, false);
        assertThat(l.gpu()).isEqualTo(1);
        assertThat(l.gpusNeeded(1)).as("one GPU per local rank").isEqualTo(4);
        assertThat(Launch.IN_PROCESS.gpusNeeded(3)).as("one GPU per in-process rank").isEqualTo(3);
        assertThat(Launch.detect(mpirun(2, 3, 3), 1, false).gpu()).as("all ranks here: the world rank").isEqualTo(2);
        assertThatThrownBy(() -> Launch.detect(mpirun(5, 8, 4), 1, false).gpu())
                .hasMessageContaining("mpirun did not set " + Launch.LOCAL_RANK);
        env.put(Launch.LOCAL_RANK, "4");
        assertThatThrownBy(() -> Launch.detect(env, 1, false)).hasMessageContaining("inconsistent mpirun "
                + "environment").hasMessageContaining(Launch.LOCAL_RANK + "=4");
    }

    /** torchrun's {@code env://} variables, as {@code accel4j launch} sets them. */
    private static Map<String, String> envRdzv(int rank, int size, String port) {
        Map<String, String> env = new java.util.HashMap<>(Map.of(Launch.ENV_RANK, Integer.toString(rank),
                Launch.ENV_WORLD_SIZE, Integer.toString(size), Launch.ENV_MASTER_ADDR, "127.0.0.1",
                Launch.ENV_MASTER_PORT, port, Launch.ENV_LOCAL_RANK, Integer.toString(rank),
                Launch.ENV_LOCAL_WORLD_SIZE, Integer.toString(size)));
        return env;
    }

    @Test
    void aLauncherEnvironmentMeansOneRankPerProcessOverTcp() {
        Launch l = Launch.detect(envRdzv(1, 2, "29500"), 1, false);
        assertThat(l).isEqualTo(new Launch(2, 1, 2, 1, false, "127.0.0.1:29500"));
        assertThat(l.perProcess()).isTrue();
        assertThat(l.lead()).isFalse();
        assertThat(l.gpu()).isEqualTo(1);
        assertThat(l.threads(null)).isEqualTo(Math.max(1, io.accel4j.cpu.Parallel.defaultThreads() / 2));
        Map<String, String> both = new java.util.HashMap<>(envRdzv(1, 2, "29500"));
        both.putAll(mpirun(0, 3, 3));
        assertThat(Launch.detect(both, 1, false).rendezvous()).as("mpirun's variables win").isNull();
        Map<String, String> ipv6 = envRdzv(0, 2, "29500");
        ipv6.put(Launch.ENV_MASTER_ADDR, "::1");
        assertThat(Launch.detect(ipv6, 1, false).rendezvous()).isEqualTo("[::1]:29500");
    }

    @Test
    void aBrokenLauncherEnvironmentIsNamed() {
        Map<String, String> env = envRdzv(0, 2, "29500");
        env.remove(Launch.ENV_MASTER_PORT);
        assertThatThrownBy(() -> Launch.detect(env, 1, false)).hasMessageContaining("WORLD_SIZE is set but "
                + "MASTER_PORT is not");
        assertThatThrownBy(() -> Launch.detect(envRdzv(2, 2, "29500"), 1, false))
                .hasMessageContaining("inconsistent launcher environment: RANK=2, WORLD_SIZE=2");
        assertThatThrownBy(() -> Launch.detect(envRdzv(0, 2, "x"), 1, false))
                .hasMessageContaining("the launcher set MASTER_PORT to 'x', not a number");
        assertThatThrownBy(() -> Launch.detect(envRdzv(0, 2, "29500"), 3, true))
                .hasMessageStartingWith("--ranks 3 contradicts the launcher's WORLD_SIZE=2");
        assertThat(Launch.configHash(java.util.List.of("train", "--steps", "2")))
                .isNotEqualTo(Launch.configHash(java.util.List.of("train", "--steps", "3")))
                .isNotEqualTo(Launch.configHash(java.util.List.of("train", "--steps2")));
    }

    @Test
    void ranksThatContradictTheWorldSizeAreRejected() {
        assertThatThrownBy(() -> Launch.detect(mpirun(0, 2, 2), 3, true))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("--ranks 3 contradicts mpirun's 2 processes: under mpirun each process is one rank; "
                        + "drop --ranks or pass --ranks 2");
        assertThatThrownBy(() -> Launch.detect(mpirun(0, 2, 2), 1, true)).hasMessageStartingWith("--ranks 1 ");
    }

    @Test
    void aBrokenEnvironmentOrAnotherMpiIsNamed() {
        assertThatThrownBy(() -> Launch.detect(Map.of(Launch.WORLD_SIZE, "2", Launch.WORLD_RANK, "x"), 1, false))
                .hasMessageContaining(Launch.WORLD_RANK + " is 'x', not a number");
        assertThatThrownBy(() -> Launch.detect(mpirun(2, 2, 1), 1, false))
                .hasMessageContaining("inconsistent mpirun environment: " + Launch.WORLD_RANK + "=2");
        assertThatThrownBy(() -> Launch.detect(Map.of(Launch.OTHER_MPI, "0"), 1, false))
                .hasMessageContaining("other than Open MPI's mpirun");
    }

    @Test
    void everyRankAgreesOnRankZerosValue() {
        try (InProcessGroup g = InProcessGroup.create(3)) {
            List<String> got = g.run(c -> Launch.agree(c, c.rank() == 0 ? "runs/20261202-174311 é" : "rank " + c.rank()));
            assertThat(got).containsOnly("runs/20261202-174311 é");
        }
    }
}
