package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.collectives.CollectiveException;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.collectives.TcpCommunicator;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;

/**
 * How {@code accel4j train} runs its data-parallel ranks, decided once from the environment: {@code --ranks N}
 * threads of this process on the in-process ring, or one rank per process, started either
 * <ul>
 *   <li>by Open MPI's {@code mpirun} (it sets {@code OMPI_COMM_WORLD_SIZE}, {@code OMPI_COMM_WORLD_RANK},
 *       {@code OMPI_COMM_WORLD_LOCAL_SIZE} and {@code OMPI_COMM_WORLD_LOCAL_RANK}): the ranks talk on
 *       {@code MPI_COMM_WORLD} ({@link MpiCommunicator}); or</li>
 *   <li>by {@code accel4j launch} or any launcher that sets torchrun's {@code env://} variables {@code RANK},
 *       {@code WORLD_SIZE}, {@code MASTER_ADDR}, {@code MASTER_PORT} (and {@code LOCAL_RANK},
 *       {@code LOCAL_WORLD_SIZE}): the ranks meet at {@code MASTER_ADDR:MASTER_PORT} and talk over TCP
 *       ({@link TcpCommunicator}), refusing a rank whose training configuration differs from rank 0's.</li>
 * </ul>
 * With {@code --device cuda} the local rank picks the process's GPU ({@link #gpu()}). With one process per rank,
 * {@code --ranks} must be absent or equal the world size, and the default thread count is the processors the
 * process may use: the cores mpirun bound it to (Open MPI binds each of up to 2 ranks to one core unless told
 * {@code --bind-to none} or {@code --map-by slot:PE=K}), or, unbound, this machine's processors shared among the
 * processes started on it.
 *
 * @param rendezvous {@code MASTER_ADDR:MASTER_PORT} for the TCP ranks, null in-process and under mpirun
 */
record Launch(int worldSize, int worldRank, int localSize, int localRank, boolean bound, String rendezvous) {

    static final String WORLD_SIZE = "OMPI_COMM_WORLD_SIZE";
    static final String WORLD_RANK = "OMPI_COMM_WORLD_RANK";
    static final String LOCAL_SIZE = "OMPI_COMM_WORLD_LOCAL_SIZE";
    /** This process's rank among those mpirun placed on its machine: its GPU with {@code --device cuda}. */
    static final String LOCAL_RANK = "OMPI_COMM_WORLD_LOCAL_RANK";
    /** {@code 1} when Open MPI 4's mpirun bound each process to its own cores (its default for up to 2 ranks). */
    static final String BOUND = "OMPI_MCA_orte_bound_at_launch";
    /** Set by MPICH's and Intel MPI's launchers (Hydra), which this build does not support. */
    static final String OTHER_MPI = "PMI_RANK";

    /** torchrun's {@code env://} variables, set by {@code accel4j launch}. */
    static final String ENV_RANK = "RANK";
    static final String ENV_WORLD_SIZE = "WORLD_SIZE";
    static final String ENV_LOCAL_RANK = "LOCAL_RANK";
    static final String ENV_LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE";
    static final String ENV_MASTER_ADDR = "MASTER_ADDR";
    static final String ENV_MASTER_PORT = "MASTER_PORT";

    /** A one-byte dtype: a broadcast only moves bytes, whatever their type. */
    private static final DType BYTE = DType.FP8_E4M3;

    /** In-process: no {@code mpirun}. */
    static final Launch IN_PROCESS = new Launch(0, 0, 0, 0, false, null);

    /**
     * The launch described by {@code env} (the process environment), checked against {@code --ranks}
     * ({@code ranksGiven}: whether the user typed it).
     *
     * @throws IllegalArgumentException with a message for the user when {@code --ranks} contradicts {@code mpirun}'s
     *                                  world size, or another MPI's launcher started this process
     */
    static Launch detect(Map<String, String> env, int ranks, boolean ranksGiven) {
        String size = env.get(WORLD_SIZE);
        if (size == null) {
            if (env.containsKey(OTHER_MPI)) {
                throw new IllegalArgumentException("this process was started by an MPI launcher other than Open "
                        + "MPI's mpirun (" + OTHER_MPI + " is set); accel4j's MPI backend supports Open MPI only");
            }
            return env.containsKey(ENV_WORLD_SIZE) ? detectEnv(env, ranks, ranksGiven) : IN_PROCESS;
        }
        int n = number(env, WORLD_SIZE, size);
        int r = number(env, WORLD_RANK, env.get(WORLD_RANK));
        int local = env.containsKey(LOCAL_SIZE) ? number(env, LOCAL_SIZE, env.get(LOCAL_SIZE)) : n;
        // without it (not Open MPI's habit) known only when every rank is on this machine
        int localRank = env.containsKey(LOCAL_RANK) ? number(env, LOCAL_RANK, env.get(LOCAL_RANK))
                : local == n ? r : -1;
        if (n < 1 || r < 0 || r >= n || local < 1 || localRank >= local || localRank < -1) {
            throw new IllegalArgumentException("inconsistent mpirun environment: " + WORLD_RANK + "=" + r + ", "
                    + WORLD_SIZE + "=" + n + ", " + LOCAL_SIZE + "=" + local + ", " + LOCAL_RANK + "=" + localRank);
        }
        if (ranksGiven && ranks != n) {
            throw new IllegalArgumentException("--ranks " + ranks + " contradicts mpirun's " + n + " process"
                    + (n == 1 ? "" : "es") + ": under mpirun each process is one rank; drop --ranks or pass "
                    + "--ranks " + n);
        }
        return new Launch(n, r, local, localRank, "1".equals(env.get(BOUND)), null);
    }

    /** The {@code env://} variables of {@code accel4j launch} (or torchrun-style launchers). */
    private static Launch detectEnv(Map<String, String> env, int ranks, boolean ranksGiven) {
        for (String v : new String[] {ENV_RANK, ENV_MASTER_ADDR, ENV_MASTER_PORT}) {
            if (env.get(v) == null || env.get(v).isBlank()) {
                throw new IllegalArgumentException(ENV_WORLD_SIZE + " is set but " + v + " is not: a launcher "
                        + "started this process with an incomplete env:// rendezvous (" + ENV_RANK + ", "
                        + ENV_WORLD_SIZE + ", " + ENV_MASTER_ADDR + ", " + ENV_MASTER_PORT + " are all needed)");
            }
        }
        int n = envNumber(env, ENV_WORLD_SIZE);
        int r = envNumber(env, ENV_RANK);
        int local = env.containsKey(ENV_LOCAL_WORLD_SIZE) ? envNumber(env, ENV_LOCAL_WORLD_SIZE) : n;
        int localRank = env.containsKey(ENV_LOCAL_RANK) ? envNumber(env, ENV_LOCAL_RANK) : local == n ? r : -1;
        int port = envNumber(env, ENV_MASTER_PORT);
        if (n < 1 || r < 0 || r >= n || local < 1 || localRank >= local || localRank < -1 || port < 1
                || port > 65535) {
            throw new IllegalArgumentException("inconsistent launcher environment: " + ENV_RANK + "=" + r + ", "
                    + ENV_WORLD_SIZE + "=" + n + ", " + ENV_LOCAL_WORLD_SIZE + "=" + local + ", " + ENV_LOCAL_RANK
                    + "=" + localRank + ", " + ENV_MASTER_PORT + "=" + port);
        }
        if (ranksGiven && ranks != n) {
            throw new IllegalArgumentException("--ranks " + ranks + " contradicts the launcher's " + ENV_WORLD_SIZE
                    + "=" + n + ": under a launcher each process is one rank; drop --ranks or pass --ranks " + n);
        }
        String host = env.get(ENV_MASTER_ADDR).strip();
        return new Launch(n, r, local, localRank, false, (host.contains(":") ? "[" + host + "]" : host) + ":" + port);
    }

    private static int envNumber(Map<String, String> env, String name) {
        String value = env.get(name);
        try {
            return Integer.parseInt(value == null ? "" : value.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("the launcher set " + name + " to "
                    + (value == null ? "nothing" : "'" + value + "'") + ", not a number");
        }
    }

    private static int number(Map<String, String> env, String name, String value) {
        try {
            return Integer.parseInt(value == null ? "" : value.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("mpirun set " + WORLD_SIZE + " but " + name + " is "
                    + (value == null ? "missing" : "'" + value + "', not a number") + " (" + env.size()
                    + " variables seen)");
        }
    }

    /** Whether this process is one rank of a job of several processes (mpirun's or a launcher's). */
    boolean perProcess() {
        return worldSize > 0;
    }

    /** Who started this process: {@code "mpirun"} or {@code "the launcher"} (for messages). */
    String starter() {
        return rendezvous == null ? "mpirun" : "the launcher";
    }

    /**
     * The GPU of this process under mpirun: its local rank (one GPU per rank on each machine).
     *
     * @throws IllegalArgumentException when mpirun did not say the local rank
     */
    int gpu() {
        if (localRank < 0) {
            throw new IllegalArgumentException(rendezvous == null ? "mpirun did not set " + LOCAL_RANK + ", which "
                    + "picks each process's GPU with --device cuda (Open MPI's mpirun sets it)" : "the launcher did "
                    + "not set " + ENV_LOCAL_RANK + ", which picks each process's GPU with --device cuda");
        }
        return localRank;
    }

    /** GPUs this machine needs: one per rank of this process (in-process {@code ranks}) or per local mpirun rank. */
    int gpusNeeded(int ranks) {
        return perProcess() ? localSize : ranks;
    }

    /** Whether this process prints, writes the metrics, checkpoints and plots: not the non-zero MPI ranks. */
    boolean lead() {
        return worldRank == 0;
    }

    /**
     * Kernel threads of this process: {@code --threads}, else the processors it may run on: those mpirun bound it
     * to, or, unbound, this machine's processors shared among the ranks mpirun placed on it.
     */
    int threads(Integer requested) {
        if (requested != null) {
            return requested;
        }
        return bound ? Parallel.defaultThreads() : Math.max(1, Parallel.defaultThreads() / Math.max(1, localSize));
    }

    /**
     * The communicator of a rank started by mpirun or a launcher, whose calls give up after {@code timeout}:
     * {@link #connectMpi MPI_COMM_WORLD}, or the TCP ring met at {@link #rendezvous}, where rank 0 refuses ranks
     * whose {@code configHash} differs from its own. Close it only after a successful run (see {@link #connectMpi}).
     */
    Communicator connect(Duration timeout, long configHash) {
        if (rendezvous == null) {
            return connectMpi(timeout);
        }
        try {
            return TcpCommunicator.connect(rendezvous, worldRank, worldSize, configHash, timeout);
        } catch (CollectiveException e) {
            throw new CliException("rank " + worldRank + " of " + worldSize + ": " + e.getMessage(), e);
        }
    }

    /**
     * A 64-bit hash of the training command's arguments, which every rank of a launched job must share (rank 0
     * compares them at the rendezvous).
     */
    static long configHash(java.util.List<String> args) {
        try {
            java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
            for (String a : args) {
                md.update(a.getBytes(StandardCharsets.UTF_8));
                md.update((byte) 0);
            }
            return java.nio.ByteBuffer.wrap(md.digest()).getLong();
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JDK", e);
        }
    }

    /**
     * {@code MPI_COMM_WORLD} (initializing MPI) whose calls give up after {@code timeout}; closing it calls
     * {@code MPI_Finalize}. Close it only after a successful run: a rank that fails exits without finalizing, and
     * {@code mpirun} then stops the others (they would otherwise fail with a timeout).
     */
    private MpiCommunicator connectMpi(Duration timeout) {
        if (!MpiCommunicator.available()) {
            throw new CliException("started by mpirun (" + WORLD_SIZE + "=" + worldSize + "), but "
                    + io.accel4j.collectives.mpi.MpiLibrary.unavailableReason());
        }
        MpiCommunicator c = MpiCommunicator.world(timeout);
        if (c.rank() != worldRank || c.size() != worldSize) {
            throw new CliException("MPI_COMM_WORLD is rank " + c.rank() + " of " + c.size() + " but mpirun's "
                    + "environment says rank " + worldRank + " of " + worldSize);
        }
        return c;
    }

    /** Rank 0's {@code value} on every rank ({@code value} is only read on rank 0), e.g. the run directory's name. */
    static String agree(Communicator comm, String value) {
        try (Arena a = Arena.ofShared()) {
            MemorySegment len = a.allocate(ValueLayout.JAVA_INT);
            byte[] mine = comm.rank() == 0 ? value.getBytes(StandardCharsets.UTF_8) : new byte[0];
            len.set(ValueLayout.JAVA_INT, 0, mine.length);
            comm.broadcast(len, Integer.BYTES, BYTE, 0);
            int n = len.get(ValueLayout.JAVA_INT, 0);
            MemorySegment bytes = a.allocate(Math.max(1, n));
            MemorySegment.copy(mine, 0, bytes, ValueLayout.JAVA_BYTE, 0, mine.length);
            comm.broadcast(bytes, n, BYTE, 0);
            return new String(bytes.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
        }
    }
}
