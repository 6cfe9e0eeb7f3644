package io.accel4j.cli.launch;

import io.accel4j.cli.CliException;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j launch --nproc N [--nnodes H --node-rank I --rdzv HOST:PORT] -- train …}: starts {@code N} ranks on
 * this machine, each a JVM like this one running the command, with torchrun's {@code env://} variables
 * ({@code RANK = I·N + local}, {@code WORLD_SIZE = H·N}, {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE},
 * {@code MASTER_ADDR}, {@code MASTER_PORT}); {@code train} meets the other ranks there and talks over TCP. Each
 * line a rank prints is prefixed with {@code [rank r]}; the first rank to exit non-zero stops the others (unless
 * {@code --keep-going}) and its code is the launcher's. The time from the launch to rank 0's first step is printed.
 */
@Command(name = "launch", sortOptions = false,
        description = "Start N local processes, one data-parallel rank each, that meet through a TCP rendezvous "
                + "(no MPI needed): bin/accel4j launch --nproc 2 -- train --steps 20. Across machines run it on each "
                + "with --nnodes, --node-rank and --rdzv, or use mpirun.")
public final class LaunchCommand implements Callable<Integer> {

    /** Progress's step line ({@code step     1/20 | loss …}): rank 0's first one ends the start-up. */
    private static final Pattern STEP_LINE = Pattern.compile("^step\\s+\\d+/\\d+ ");

    @Spec
    CommandSpec spec;

    @Option(names = "--nproc", paramLabel = "N", required = true, description = "Processes (ranks) on this machine.")
    int nproc;
    @Option(names = "--keep-going", description = "A rank that exits non-zero does not stop the others (an "
            + "asynchronous run with --staleness > 0 drops a dead worker and trains on); the launcher's code is still "
            + "the first failed rank's, once every rank has exited.")
    boolean keepGoing;
    @Option(names = "--nnodes", paramLabel = "H", defaultValue = "1", description = "Machines taking part, each "
            + "running this launcher with the same --nproc (default: ${DEFAULT-VALUE}).")
    int nnodes;
    @Option(names = "--node-rank", paramLabel = "I", defaultValue = "0", description = "This machine's index in "
            + "[0, H); node 0 runs rank 0 (default: ${DEFAULT-VALUE}).")
    int nodeRank;
    @Option(names = "--rdzv", paramLabel = "HOST:PORT", description = "Where rank 0 listens for the others; needed "
            + "with --nnodes > 1 (default on one machine: 127.0.0.1 and a free port).")
    String rdzv;
    @Parameters(paramLabel = "COMMAND", arity = "0..*", description = "After --: the accel4j command each rank "
            + "runs, e.g. -- train --steps 20.")
    List<String> command = new ArrayList<>();

    @Override
    public Integer call() throws InterruptedException {
        check();
        String[] hostPort = rendezvous();
        int world = nnodes * nproc;
        List<Map<String, String>> envs = new ArrayList<>();
        int[] ranks = new int[nproc];
        for (int local = 0; local < nproc; local++) {
            ranks[local] = nodeRank * nproc + local;
            Map<String, String> env = new HashMap<>();
            env.put("RANK", Integer.toString(ranks[local]));
            env.put("WORLD_SIZE", Integer.toString(world));
            env.put("LOCAL_RANK", Integer.toString(local));
            env.put("LOCAL_WORLD_SIZE", Integer.toString(nproc));
            env.put("GROUP_RANK", Integer.toString(nodeRank));
            env.put("MASTER_ADDR", hostPort[0]);
            env.put("MASTER_PORT", hostPort[1]);
            envs.add(env);
        }
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        synchronized (out) {
            out.printf("launch: %d process%s on this machine (ranks %d..%d of %d), rendezvous %s:%s%n", nproc,
                    nproc == 1 ? "" : "es", ranks[0], ranks[nproc - 1], world, hostPort[0], hostPort[1]);
            out.flush();
        }
        long start = System.nanoTime();
        AtomicBoolean stepped = new AtomicBoolean();
        RankProcesses procs;
        try {
            procs = RankProcesses.start(JvmCommand.of(command), envs, ranks, out, err, (rank, line) -> {
                if (rank == 0 && STEP_LINE.matcher(line).find() && stepped.compareAndSet(false, true)) {
                    synchronized (out) {
                        out.printf(Locale.ROOT, "launch: start-up to the first step: %.2f s (%d process%s)%n",
                                (System.nanoTime() - start) / 1e9, world, world == 1 ? "" : "es");
                        out.flush();
                    }
                }
            });
        } catch (IOException e) {
            throw new CliException("cannot start the ranks' processes (" + JvmCommand.of(List.of()).getFirst()
                    + "): " + e.getMessage(), e);
        }
        try (procs) {
            RankProcesses.Outcome o = procs.await(!keepGoing);
            if (o.code() != 0) {
                synchronized (err) {
                    err.println("accel4j: error: rank " + o.rank() + " exited with code " + o.code()
                            + (keepGoing ? "; the other ranks ran on (--keep-going)"
                            : "; the other ranks were stopped"));
                    err.flush();
                }
            }
            return o.code();
        }
    }

    private void check() {
        if (nproc < 1) {
            throw usage("--nproc must be >= 1, got " + nproc);
        }
        if (nnodes < 1) {
            throw usage("--nnodes must be >= 1, got " + nnodes);
        }
        if (nodeRank < 0 || nodeRank >= nnodes) {
            throw usage("--node-rank must be in [0, " + nnodes + ") (--nnodes " + nnodes + "), got " + nodeRank);
        }
        if ((long) nnodes * nproc > 65536) {
            throw usage("--nnodes × --nproc must be at most 65536, got " + (long) nnodes * nproc);
        }
        if (nnodes > 1 && rdzv == null) {
            throw usage("--nnodes " + nnodes + " needs --rdzv HOST:PORT, the address of node 0 that every machine "
                    + "can reach");
        }
        if (command.isEmpty()) {
            throw usage("launch needs the command each rank runs after --, e.g. launch --nproc 2 -- train --steps 20");
        }
        if (command.getFirst().equals("launch")) {
            throw usage("launch cannot launch itself: give the command each rank runs, e.g. -- train");
        }
    }

    /** {host, port}: --rdzv, or on one machine the loopback address and a port that is free now. */
    private String[] rendezvous() {
        if (rdzv == null) {
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress("127.0.0.1", 0));
                return new String[] {"127.0.0.1", Integer.toString(s.getLocalPort())};
            } catch (IOException e) {
                throw new CliException("cannot find a free port on 127.0.0.1 for the rendezvous: " + e.getMessage()
                        + "; pass --rdzv HOST:PORT", e);
            }
        }
        int colon = rdzv.lastIndexOf(':');
        String host = colon > 0 ? rdzv.substring(0, colon) : "";
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port;
        try {
            port = colon > 0 ? Integer.parseInt(rdzv.substring(colon + 1)) : -1;
        } catch (NumberFormatException e) {
            port = -1;
        }
        if (host.isEmpty() || port < 1 || port > 65535) {
            throw usage("--rdzv must be HOST:PORT with a port in [1, 65535], got '" + rdzv + "'");
        }
        return new String[] {host, Integer.toString(port)};
    }

    private ParameterException usage(String message) {
        return new ParameterException(spec.commandLine(), message);
    }
}
