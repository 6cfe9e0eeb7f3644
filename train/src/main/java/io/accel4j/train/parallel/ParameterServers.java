package io.accel4j.train.parallel;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.InProcessMailboxes;
import io.accel4j.collectives.Mailbox;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.ParameterLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.function.Consumer;

/**
 * Asynchronous data parallelism's parameter servers as the workers ({@link AsyncWorker}) see them: {@code K}
 * {@link ShardServer}s, shard {@code s} being rank {@code W + s} of a {@link Mailbox} whose ranks {@code 0 … W−1}
 * are the workers. A worker pushes its gradient's slice to every shard, stamped with its clock {@code c} (the step),
 * the shard version its parameters came from and the version it needs next ({@code c+1−S}), then waits for every
 * shard's parameters (point to point, no collective). {@link #ParameterServers(int, int, int, Duration, Consumer)}
 * runs the servers on threads of this process over in-process mailboxes; {@link #remote} reaches server ranks of
 * other processes through this worker's mailbox (the launcher's TCP links): one code path for both.
 *
 * <p><b>Versions and bounded staleness (stale synchronous parallel).</b> A shard applies clock {@code c} once every
 * live worker has pushed it (version {@code c+1}); a worker that finished clock {@code c} continues only once every
 * shard has version {@code ≥ c+1−S}: it may compute on parameters missing at most {@code S} updates, and so runs at
 * most {@code S} steps ahead of the slowest worker. With {@code S = 0} it is synchronous data parallelism. A push's
 * staleness is {@code c − v}; worker 0's replies carry the pushes' staleness since its previous step.
 *
 * <p><b>Failures.</b> See {@link ShardServer}: with {@code S > 0} a late worker is dropped after the timeout; a
 * server that fails tells every worker, which fails naming it; a server rank that is gone (its connection closed)
 * makes the worker fail naming it; a worker that waits twice the timeout for a server fails naming it.
 */
public final class ParameterServers implements AutoCloseable {

    /** Staleness of the pushes applied in a window: min, mean, max over {@code pushes} (none: all zero). */
    public record Staleness(int min, double mean, int max, long pushes) {}

    private final int k;
    private final int workers;
    private final int staleness;
    private final long timeoutNanos;
    private final Consumer<String> log;
    private final Mailbox[] boxes; // by worker; remote: only this worker's
    private final Mailbox[] serverBoxes; // in this process: the servers' mailboxes; remote: null
    private ShardServer[] local;     // in-process servers, made by the first initialise
    private Thread[] threads;
    private long count;

    private ParameterServers(int servers, int workers, int staleness, Duration timeout, Consumer<String> log,
                             Mailbox[] boxes, Mailbox[] serverBoxes) {
        if (servers < 1 || workers < 1 || staleness < 0) {
            throw new IllegalArgumentException("servers " + servers + ", workers " + workers + ", staleness "
                    + staleness);
        }
        this.k = servers;
        this.workers = workers;
        this.staleness = staleness;
        this.timeoutNanos = timeout.toNanos();
        this.log = log;
        this.boxes = boxes;
        this.serverBoxes = serverBoxes;
    }

    /**
     * {@code servers} shards on threads of this process for {@code workers} in-process workers with staleness bound
     * {@code staleness}; the workers call {@link #initialise} with the model before the first push. {@code log} hears
     * about dropped workers.
     */
    public ParameterServers(int servers, int workers, int staleness, Duration timeout, Consumer<String> log) {
        this(servers, workers, staleness, timeout, log, InProcessMailboxes.create(workers + servers), workers);
    }

    private ParameterServers(int servers, int workers, int staleness, Duration timeout, Consumer<String> log,
                             Mailbox[] all, int w) {
        this(servers, workers, staleness, timeout, log, java.util.Arrays.copyOf(all, w),
                java.util.Arrays.copyOfRange(all, w, all.length));
    }

    /**
     * The servers as worker {@code box.rank()} of another process sees them: ranks {@code workers … workers+servers−1}
     * of {@code box}'s group.
     */
    public static ParameterServers remote(Mailbox box, int servers, int workers, int staleness, Duration timeout) {
        if (box.size() != workers + servers || box.rank() >= workers) {
            throw new IllegalArgumentException("rank " + box.rank() + " of " + box.size() + " is not one of "
                    + workers + " workers beside " + servers + " servers");
        }
        Mailbox[] b = new Mailbox[workers];
        b[box.rank()] = box;
        return new ParameterServers(servers, workers, staleness, timeout, m -> { }, b, null);
    }

    /**
     * Server rank {@code box.rank()} ({@code ≥ workers}) of a group of processes: serves its shard until every
     * worker is done or dropped. Returns null, or the reason it failed (the workers were told).
     */
    public static String serve(Mailbox box, int servers, int workers, int staleness, Duration timeout,
                               ParameterLayout layout, TrainConfig cfg, Consumer<String> log) {
        try (ShardServer s = new ShardServer(box, box.rank() - workers, servers, workers, staleness,
                timeout.toNanos(), layout, cfg, log)) {
            return s.serve();
        }
    }

    /** The number of servers. */
    public int servers() {
        return k;
    }

    /** The number of workers. */
    public int workers() {
        return workers;
    }

    /** The staleness bound S. */
    public int staleness() {
        return staleness;
    }

    /**
     * Worker {@code w}'s model: in this process the first call starts the servers (AdamW's ranges and
     * hyper-parameters from {@code cfg}); worker 0 gives them its parameters (every worker starts with the same).
     */
    void initialise(int w, MemorySegment hostParams, ParameterLayout layout, TrainConfig cfg) {
        synchronized (this) {
            count = layout.count();
            if (local == null && serverBoxes != null) {
                local = new ShardServer[k];
                threads = new Thread[k];
                for (int s = 0; s < k; s++) {
                    ShardServer srv = new ShardServer(serverBoxes[s], s, k, workers, staleness, timeoutNanos,
                            layout, cfg, log);
                    local[s] = srv;
                    threads[s] = new Thread(srv::serve, "accel4j-parameter-server-" + s);
                    threads[s].setDaemon(true);
                    threads[s].start();
                }
            }
        }
        if (w == 0) {
            for (int s = 0; s < k; s++) {
                send(w, s, PsMessage.of(PsMessage.INIT, new int[0], slice(hostParams, s)));
            }
        }
    }

    /** Shard {@code s}'s first element and length. */
    long shardStart(int s) {
        return Chunks.start(count, k, s);
    }

    long shardLength(int s) {
        return Chunks.length(count, k, s);
    }

    private float[] slice(MemorySegment whole, int s) {
        float[] a = new float[(int) shardLength(s)];
        MemorySegment.copy(whole, ValueLayout.JAVA_FLOAT, shardStart(s) * Float.BYTES, a, 0, a.length);
        return a;
    }

    private void send(int w, int s, PsMessage msg) {
        try {
            boxes[w].send(workers + s, msg.encode());
        } catch (RuntimeException e) {
            // no cause: the message names the server, the caller's report would name the socket's error instead
            throw new IllegalStateException("parameter server " + s + " (rank " + (workers + s) + ") is gone: worker "
                    + w + " cannot send to it (" + e.getMessage() + "); every worker stops");
        }
    }

    /**
     * Worker {@code w}'s gradients (times {@code gradScale}) to every shard at clock {@code clock}, computed on the
     * shard versions {@code basedOn}, for learning rate {@code lr}; it will need version {@code needed} next.
     */
    void push(int w, int clock, int[] basedOn, int needed, MemorySegment grads, float gradScale, float lr) {
        for (int s = 0; s < k; s++) {
            float[] g = slice(grads, s);
            if (gradScale != 1f) {
                for (int i = 0; i < g.length; i++) {
                    g[i] *= gradScale;
                }
            }
            send(w, s, new PsMessage(PsMessage.PUSH, new int[] {w, clock, basedOn[s], needed}, lr, "",
                    new float[][] {g}));
        }
    }

    /**
     * Waits for every shard's reply to the last push (the parameters at the needed version) and copies them into
     * {@code hostParams}; returns each shard's version, and adds the replies' staleness into {@code window}.
     */
    int[] pull(int w, MemorySegment hostParams, StalenessWindow window) {
        int[] versions = new int[k];
        for (PsMessage msg : receiveFromEveryServer(w, PsMessage.PARAMS)) {
            int s = msg.ints()[5];
            float[] p = msg.arrays()[0];
            MemorySegment.copy(p, 0, hostParams, ValueLayout.JAVA_FLOAT, shardStart(s) * Float.BYTES, p.length);
            versions[s] = msg.ints()[0];
            window.add(msg.ints()[1], msg.ints()[2], msg.ints()[3], msg.ints()[4]);
        }
        return versions;
    }

    /** Worker {@code w}: every shard's parameters and moments into whole host vectors (each shard consistent). */
    void gather(int w, MemorySegment params, MemorySegment m, MemorySegment v) {
        for (int s = 0; s < k; s++) {
            send(w, s, PsMessage.of(PsMessage.GATHER));
        }
        for (PsMessage msg : receiveFromEveryServer(w, PsMessage.STATE)) {
            int s = msg.ints()[1];
            MemorySegment[] into = {params, m, v};
            for (int i = 0; i < 3; i++) {
                float[] a = msg.arrays()[i];
                MemorySegment.copy(a, 0, into[i], ValueLayout.JAVA_FLOAT, shardStart(s) * Float.BYTES, a.length);
            }
        }
    }

    /**
     * Resuming at step {@code step}: worker 0 gives every shard the checkpoint's parameters and moments, and its
     * version becomes {@code step} (the other workers' calls do nothing: they start from the same checkpoint).
     */
    void restore(int w, MemorySegment params, MemorySegment m, MemorySegment v, int step) {
        if (w != 0) {
            return;
        }
        for (int s = 0; s < k; s++) {
            send(w, s, new PsMessage(PsMessage.RESTORE, new int[] {step}, 0f, "",
                    new float[][] {slice(params, s), slice(m, s), slice(v, s)}));
        }
    }

    /** Worker {@code w} has finished: the servers stop counting on it. */
    void done(int w) {
        for (int s = 0; s < k; s++) {
            try {
                boxes[w].send(workers + s, PsMessage.of(PsMessage.DONE, w).encode());
            } catch (RuntimeException e) {
                // a server that is gone: nothing left to tell it
            }
        }
    }

    /**
     * One reply of {@code kind} from every shard, each tagged with its shard in its last integer; a failure or a lost
     * server fails naming it; waiting longer than twice the timeout (a late worker is dropped first) fails too.
     */
    private PsMessage[] receiveFromEveryServer(int w, int kind) {
        long wait = 2 * timeoutNanos, deadline = System.nanoTime() + wait;
        PsMessage[] got = new PsMessage[k];
        int n = 0;
        while (n < k) {
            long left = deadline - System.nanoTime();
            Mailbox.Letter l;
            try {
                l = left <= 0 ? null : boxes[w].receive(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("worker " + w + " interrupted waiting for the servers", e);
            }
            if (l == null) {
                int s = 0;
                while (got[s] != null) {
                    s++;
                }
                throw new IllegalStateException("worker " + w + " waited " + ShardServer.seconds(wait)
                        + " for parameter server " + s + " (rank " + (workers + s) + "): a worker or the server is "
                        + "stuck");
            }
            int s = l.from() - workers;
            if (s < 0) {
                continue; // another worker's connection: nothing to do with the servers
            }
            if (l.lost()) {
                throw new IllegalStateException("parameter server " + s + " (rank " + l.from() + ") is gone: "
                        + l.why() + "; every worker stops");
            }
            PsMessage msg = PsMessage.decode(l.body());
            if (msg.kind() == PsMessage.FAIL) {
                throw new IllegalStateException(msg.text());
            }
            if (msg.kind() != kind || got[s] != null) {
                throw new IllegalStateException("worker " + w + " got message " + msg.kind() + " from parameter "
                        + "server " + s + " instead of " + kind);
            }
            int[] ints = java.util.Arrays.copyOf(msg.ints(), msg.ints().length + 1);
            ints[ints.length - 1] = s;
            got[s] = new PsMessage(msg.kind(), ints, msg.lr(), msg.text(), msg.arrays());
            n++;
        }
        return got;
    }

    /** In this process: the largest staleness of any push so far, from the version stamps. */
    public int maxStaleness() {
        int max = 0;
        for (ShardServer s : local) {
            max = Math.max(max, s.maxStaleness());
        }
        return max;
    }

    /** In this process: whether every server still counts on worker {@code w}. */
    public boolean alive(int w) {
        for (ShardServer s : local) {
            if (!s.alive(w)) {
                return false;
            }
        }
        return true;
    }

    /** In this process: makes server {@code s} fail, as a server that died (tests). */
    void kill(int s) {
        boxes[0].send(workers + s, PsMessage.of(PsMessage.DIE).encode());
    }

    @Override
    public void close() {
        if (threads != null) {
            for (Thread t : threads) {
                t.interrupt();
            }
            for (int s = 0; s < k; s++) {
                try {
                    threads[s].join(2000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                local[s].close();
            }
        }
    }
}
