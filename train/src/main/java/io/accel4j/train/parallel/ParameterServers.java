package io.accel4j.train.parallel;

import io.accel4j.collectives.Chunks;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.ParameterLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Asynchronous data parallelism's servers, in this process: {@code K} shards of the flat parameter vector (shard
 * {@code k} is {@link Chunks}' chunk {@code k}), each with AdamW's moments for its elements and a thread of its own
 * that takes the workers' pushed gradients from a queue as they arrive. Workers ({@link AsyncStates}) push their
 * gradient's slice to every shard, stamped with their clock {@code c} (the step) and the shard version their
 * parameters came from, then pull the parameters.
 *
 * <p><b>Versions and bounded staleness (stale synchronous parallel).</b> A shard adds every push into the sum of its
 * clock as it arrives and, once every live worker has pushed clock {@code c}, applies AdamW to the mean (its step
 * {@code c+1}) and stamps version {@code c+1}. A worker that finished clock {@code c} pulls only once every shard has
 * version {@code ≥ c+1−S}: it may compute on parameters missing at most {@code S} updates, and so runs at most
 * {@code S} steps ahead of the slowest worker. With {@code S = 0} every worker pulls the update of every clock before
 * its next step: synchronous data parallelism, the mean computed in arrival order (DDP's ring sums in another order:
 * equal within fp32 rounding). A push's staleness is {@code c − v}, the updates its gradient did not see; every push's
 * is recorded ({@link #drainStaleness}, {@link #maxStaleness}).
 *
 * <p><b>Failures.</b> With {@code S > 0}, a worker that has not pushed a clock the others completed within the timeout
 * is dropped (said through {@code log}), and the clocks complete without it; with {@code S = 0} it stops the run, as
 * a collective's timeout would. A shard whose thread fails stops every worker with an error naming it; a worker that
 * waits twice the timeout for the servers fails naming the shard it waited for.
 */
public final class ParameterServers implements AutoCloseable {

    /** Staleness of the pushes applied in a window: min, mean, max over {@code pushes} (none: all zero). */
    public record Staleness(int min, double mean, int max, long pushes) {}

    private final int k;
    private final int workers;
    private final int staleness;
    private final long timeoutNanos;
    private final Consumer<String> log;
    private final Arena arena = Arena.ofShared();
    private final Shard[] shards;
    private final boolean[] alive;
    private volatile String failure;
    private boolean initialised;
    private final StalenessWindow stalenessSeen = new StalenessWindow();

    /**
     * {@code servers} shards for {@code workers} workers with staleness bound {@code staleness}; the workers call
     * {@link #initialise} with the model before the first push. {@code log} hears about dropped workers.
     */
    public ParameterServers(int servers, int workers, int staleness, Duration timeout, Consumer<String> log) {
        if (servers < 1 || workers < 1 || staleness < 0) {
            throw new IllegalArgumentException("servers " + servers + ", workers " + workers + ", staleness "
                    + staleness);
        }
        this.k = servers;
        this.workers = workers;
        this.staleness = staleness;
        this.timeoutNanos = timeout.toNanos();
        this.log = log;
        this.shards = new Shard[servers];
        this.alive = new boolean[workers];
        java.util.Arrays.fill(alive, true);
    }

    /** The number of servers. */
    public int servers() {
        return k;
    }

    /** The staleness bound S. */
    public int staleness() {
        return staleness;
    }

    /**
     * The servers' parameters from the first worker's (every worker starts with the same) and AdamW's ranges and
     * hyper-parameters from {@code cfg}; later calls do nothing.
     */
    synchronized void initialise(MemorySegment hostParams, ParameterLayout layout, TrainConfig cfg) {
        if (initialised) {
            return;
        }
        long count = layout.count();
        List<DecayRanges.Range> runs = DecayRanges.of(layout, cfg);
        for (int s = 0; s < k; s++) {
            long from = Chunks.start(count, k, s), len = Chunks.length(count, k, s);
            List<AdamWRange> ranges = new ArrayList<>();
            for (DecayRanges.Range r : DecayRanges.clip(runs, from, from + len)) {
                ranges.add(new AdamWRange(r.offset() - from, r.offset(), r.length(), r.decays()));
            }
            shards[s] = new Shard(s, from, len, ranges, cfg);
            MemorySegment.copy(hostParams, from * Float.BYTES, shards[s].params, 0, len * Float.BYTES);
            shards[s].thread.start();
        }
        initialised = true;
    }

    /** Shard {@code s}'s first element and length. */
    long shardStart(int s) {
        return shards[s].from;
    }

    long shardLength(int s) {
        return shards[s].len;
    }

    /**
     * Worker {@code w}'s gradient slice for shard {@code s} at clock {@code clock} (a copy is queued), computed on the
     * shard's version {@code basedOn}, multiplied by {@code gradScale}, for learning rate {@code lr}.
     */
    void push(int s, int w, int clock, int basedOn, MemorySegment grads, float gradScale, float lr) {
        check();
        Shard sh = shards[s];
        float[] g = new float[(int) sh.len];
        MemorySegment.copy(grads, ValueLayout.JAVA_FLOAT, sh.from * Float.BYTES, g, 0, g.length);
        if (gradScale != 1f) {
            for (int i = 0; i < g.length; i++) {
                g[i] *= gradScale;
            }
        }
        sh.queue.add(new Push(w, clock, basedOn, g, lr));
    }

    /**
     * Waits until every shard has version {@code ≥ needed} (the SSP bound), then copies the parameters into
     * {@code hostParams}; returns each shard's version pulled.
     */
    int[] pull(int w, int needed, MemorySegment hostParams) {
        // twice the servers' drop window: a late worker is dropped (S > 0) before a waiting one gives up
        long wait = 2 * timeoutNanos, deadline = System.nanoTime() + wait;
        int[] versions = new int[k];
        for (Shard sh : shards) {
            synchronized (sh) {
                while (sh.version < needed) {
                    check();
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        throw new IllegalStateException("worker " + w + " waited " + seconds(wait)
                                + " for parameter server " + sh.index + " (at version " + sh.version + ", needed "
                                + needed + "): a worker or the server is stuck");
                    }
                    try {
                        sh.wait(Math.max(1, Math.min(200, left / 1_000_000)));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("worker " + w + " interrupted waiting for the servers", e);
                    }
                }
                MemorySegment.copy(sh.params, 0, hostParams, sh.from * Float.BYTES, sh.len * Float.BYTES);
                versions[sh.index] = sh.version;
            }
        }
        check();
        return versions;
    }

    /** Copies the servers' parameters and moments into whole host vectors (each shard consistent in itself). */
    void gather(MemorySegment params, MemorySegment m, MemorySegment v) {
        for (Shard sh : shards) {
            synchronized (sh) {
                long at = sh.from * Float.BYTES, bytes = sh.len * Float.BYTES;
                MemorySegment.copy(sh.params, 0, params, at, bytes);
                MemorySegment.copy(sh.m, 0, m, at, bytes);
                MemorySegment.copy(sh.v, 0, v, at, bytes);
            }
        }
    }

    /**
     * Resuming at step {@code step}: the whole moments into the shards, whose version becomes {@code step}. Every
     * worker calls it with the same checkpoint before its first push; the values are the same, and no shard can
     * have applied an update yet (that takes every worker's push).
     */
    void restoreMoments(MemorySegment m, MemorySegment v, int step) {
        for (Shard sh : shards) {
            synchronized (sh) {
                long at = sh.from * Float.BYTES, bytes = sh.len * Float.BYTES;
                MemorySegment.copy(m, at, sh.m, 0, bytes);
                MemorySegment.copy(v, at, sh.v, 0, bytes);
                sh.version = step;
            }
        }
    }

    /** Resuming at step {@code step}: the whole parameter vector into the shards (see {@link #restoreMoments}). */
    void restoreParameters(MemorySegment params, int step) {
        for (Shard sh : shards) {
            synchronized (sh) {
                MemorySegment.copy(params, sh.from * Float.BYTES, sh.params, 0, sh.len * Float.BYTES);
                sh.version = step;
            }
        }
    }

    /** The staleness of the pushes applied since the last call. */
    public Staleness drainStaleness() {
        return stalenessSeen.drain();
    }

    /** The largest staleness of any push applied so far, from the version stamps. */
    public int maxStaleness() {
        return stalenessSeen.maxSeen();
    }

    /** Whether worker {@code w} is still counted on. */
    public synchronized boolean alive(int w) {
        return alive[w];
    }

    private synchronized int liveWorkers() {
        int n = 0;
        for (boolean a : alive) {
            n += a ? 1 : 0;
        }
        return n;
    }

    /** Drops {@code w} from every shard's count (S > 0), once. */
    private void drop(int w, int shard, int clock) {
        synchronized (this) {
            if (!alive[w]) {
                return;
            }
            alive[w] = false;
        }
        log.accept("parameter server " + shard + ": dropped worker " + w + ": no gradient for step " + clock
                + " within " + seconds(timeoutNanos) + " (--collective-timeout); training goes on without it");
        for (Shard sh : shards) {
            sh.queue.add(Push.WAKE);
        }
    }

    private void fail(String why) {
        if (failure == null) {
            failure = why;
        }
        for (Shard sh : shards) {
            if (sh != null) {
                synchronized (sh) {
                    sh.notifyAll();
                }
            }
        }
    }

    private void check() {
        String f = failure;
        if (f != null) {
            throw new IllegalStateException(f);
        }
    }

    /** Makes shard {@code s}'s thread fail, as a server that died (tests). */
    void kill(int s) {
        shards[s].queue.add(Push.DIE);
    }

    private static String seconds(long nanos) {
        return String.format(java.util.Locale.ROOT, "%.3f s", nanos / 1e9);
    }

    @Override
    public void close() {
        for (Shard sh : shards) {
            if (sh != null) {
                sh.thread.interrupt();
            }
        }
        for (Shard sh : shards) {
            if (sh != null) {
                try {
                    sh.thread.join(2000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                sh.pool.close();
            }
        }
        arena.close();
    }

    /** A gradient pushed by a worker, or a signal to the shard's thread. */
    private record Push(int worker, int clock, int basedOn, float[] grads, float lr) {
        static final Push WAKE = new Push(-1, -1, 0, null, 0);
        static final Push DIE = new Push(-2, -1, 0, null, 0);
    }

    /** One clock's sum on a shard: which workers pushed it. */
    private static final class Pending {
        final float[] sum;
        final boolean[] from;
        int pushes;
        float lr;
        long firstNanos = System.nanoTime();

        Pending(int len, int workers) {
            sum = new float[len];
            from = new boolean[workers];
        }
    }

    /** One server: its slice of the parameters and moments, its queue and thread. */
    private final class Shard {
        final int index;
        final long from;
        final long len;
        final List<AdamWRange> ranges;
        final TrainConfig cfg;
        final MemorySegment params;
        final MemorySegment grads;
        final MemorySegment m;
        final MemorySegment v;
        final Parallel pool = new Parallel(1);
        final CpuOps ops = new CpuOps(pool);
        final LinkedBlockingQueue<Push> queue = new LinkedBlockingQueue<>();
        final Map<Integer, Pending> pending = new TreeMap<>();
        final Thread thread;
        volatile int version; // clocks applied (written under this shard's lock)

        Shard(int index, long from, long len, List<AdamWRange> ranges, TrainConfig cfg) {
            this.index = index;
            this.from = from;
            this.len = len;
            this.ranges = ranges;
            this.cfg = cfg;
            long bytes = Math.max(1, len) * Float.BYTES;
            this.params = arena.allocate(bytes, 64);
            this.grads = arena.allocate(bytes, 64);
            this.m = arena.allocate(bytes, 64);
            this.v = arena.allocate(bytes, 64);
            this.thread = new Thread(this::serve, "accel4j-parameter-server-" + index);
            thread.setDaemon(true);
        }

        private void serve() {
            try {
                while (true) {
                    Push p = queue.poll(Math.max(1, Math.min(200, timeoutNanos / 1_000_000)), TimeUnit.MILLISECONDS);
                    if (p == Push.DIE) {
                        throw new IllegalStateException("killed");
                    }
                    if (p != null && p.grads() != null) {
                        Pending acc = pending.computeIfAbsent(p.clock(), c -> new Pending((int) len, workers));
                        float[] g = p.grads();
                        for (int i = 0; i < g.length; i++) {
                            acc.sum[i] += g[i];
                        }
                        acc.from[p.worker()] = true;
                        acc.pushes++;
                        acc.lr = p.lr();
                        stalenessSeen.record(p.clock() - p.basedOn());
                    }
                    applyReady();
                }
            } catch (InterruptedException e) {
                // closed
            } catch (RuntimeException | Error e) {
                fail("parameter server " + index + " failed: " + e.getMessage() + "; every worker stops");
            }
        }

        /** Applies the clocks, in order, that every live worker has pushed; drops late workers when S > 0. */
        private void applyReady() {
            while (true) {
                Pending acc = pending.get(version);
                if (acc == null) {
                    return;
                }
                int live = liveWorkers();
                int livePushed = 0;
                for (int w = 0; w < workers; w++) {
                    livePushed += acc.from[w] && alive(w) ? 1 : 0;
                }
                if (livePushed < live) {
                    if (System.nanoTime() - acc.firstNanos < timeoutNanos) {
                        return;
                    }
                    for (int w = 0; w < workers; w++) {
                        if (!acc.from[w] && alive(w)) {
                            if (staleness == 0) {
                                throw new IllegalStateException("worker " + w + " sent no gradient for step "
                                        + version + " within " + seconds(timeoutNanos) + " (synchronous: --staleness"
                                        + " 0 waits for every worker)");
                            }
                            drop(w, index, version);
                        }
                    }
                    continue;
                }
                MemorySegment.copy(acc.sum, 0, grads, ValueLayout.JAVA_FLOAT, 0, (int) len);
                AdamWConfig c = new AdamWConfig(acc.lr, cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay());
                synchronized (this) {
                    if (len > 0) {
                        ops.adamw(params, grads, m, v, ranges, c, version + 1, 1f / acc.pushes);
                    }
                    pending.remove(version);
                    version++;
                    notifyAll();
                }
                Pending next = pending.get(version);
                if (next != null) {
                    next.firstNanos = Math.max(next.firstNanos, System.nanoTime()); // its timeout runs from now
                }
            }
        }
    }
}
