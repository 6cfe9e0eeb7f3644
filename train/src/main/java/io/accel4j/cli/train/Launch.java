package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.MpiCommunicator;
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
 * threads of this process on the in-process ring, or, when Open MPI's {@code mpirun} started this process (it sets
 * {@code OMPI_COMM_WORLD_SIZE}, {@code OMPI_COMM_WORLD_RANK}, {@code OMPI_COMM_WORLD_LOCAL_SIZE} and
 * {@code OMPI_COMM_WORLD_LOCAL_RANK}), one rank per process on {@code MPI_COMM_WORLD} ({@link MpiCommunicator}); with
 * {@code --device cuda} the local rank picks the process's GPU ({@link #gpu()}). Under {@code mpirun}, {@code --ranks} must be absent
 * or equal the world size, and the default thread count is the processors the process may use: the cores mpirun bound
 * it to (Open MPI binds each of up to 2 ranks to one core unless told {@code --bind-to none} or
 * {@code --map-by slot:PE=K}), or, unbound, this machine's processors shared among the processes mpirun placed on it.
 */
record Launch(int worldSize, int worldRank, int localSize, int localRank, boolean bound) {

    static final String WORLD_SIZE = "OMPI_COMM_WORLD_SIZE";
    static final String WORLD_RANK = "OMPI_COMM_WORLD_RANK";
    static final String LOCAL_SIZE = "OMPI_COMM_WORLD_LOCAL_SIZE";
    /** This process's rank among those mpirun placed on its machine: its GPU with {@code --device cuda}. */
    static final String LOCAL_RANK = "OMPI_COMM_WORLD_LOCAL_RANK";
    /** {@code 1} when Open MPI 4's mpirun bound each process to its own cores (its default for up to 2 ranks). */
    static final String BOUND = "OMPI_MCA_orte_bound_at_launch";
    /** Set by MPICH's and Intel MPI's launchers (Hydra), which this build does not support. */
    static final String OTHER_MPI = "PMI_RANK";

    /** A one-byte dtype: a broadcast only moves bytes, whatever their type. */
    private static final DType BYTE = DType.FP8_E4M3;

    /** In-process: no {@code mpirun}. */
    static final Launch IN_PROCESS = new Launch(0, 0, 0, 0, false);

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
            return IN_PROCESS;
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
        return new Launch(n, r, local, localRank, "1".equals(env.get(BOUND)));
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

    /** Whether this process is one rank of an {@code mpirun} job. */
    boolean mpi() {
        return worldSize > 0;
    }

    /**
     * The GPU of this process under mpirun: its local rank (one GPU per rank on each machine).
     *
     * @throws IllegalArgumentException when mpirun did not say the local rank
     */
    int gpu() {
        if (localRank < 0) {
            throw new IllegalArgumentException("mpirun did not set " + LOCAL_RANK + ", which picks each process's "
                    + "GPU with --device cuda (Open MPI's mpirun sets it)");
        }
        return localRank;
    }

    /** GPUs this machine needs: one per rank of this process (in-process {@code ranks}) or per local mpirun rank. */
    int gpusNeeded(int ranks) {
        return mpi() ? localSize : ranks;
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
     * {@code MPI_COMM_WORLD} (initializing MPI) whose calls give up after {@code timeout}; closing it calls
     * {@code MPI_Finalize}. Close it only after a successful run: a rank that fails exits without finalizing, and
     * {@code mpirun} then stops the others (they would otherwise fail with a timeout).
     */
    MpiCommunicator connect(Duration timeout) {
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
