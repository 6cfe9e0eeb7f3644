package io.accel4j.train.parallel;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.Mailbox;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.ParameterLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;

/**
 * One parameter server of asynchronous data parallelism: shard {@code s} of the flat parameter vector ({@link
 * Chunks}' chunk {@code s} of {@code K}) with AdamW's moments for its elements, served over a {@link Mailbox} whose
 * ranks {@code 0 … W−1} are the workers ({@link PsMessage} says what travels). The same loop runs on a thread of the
 * workers' process (in-process ranks) or as the whole of a server rank's process (launch, env://).
 *
 * <p>It takes messages from whichever worker sends first. A push of clock {@code c} is kept until every live worker
 * has pushed {@code c}; then the clock's mean gradient (summed in worker order, so the result does not depend on the
 * arrival order) updates the shard (AdamW step {@code c+1}) and the version becomes {@code c+1}. Each push also says
 * the version its worker needs before its next step ({@code c+1−S}, the staleness bound): the reply with the
 * parameters waits until the shard has it. A push's staleness {@code c − v} (the updates it did not see) is recorded.
 *
 * <p><b>Failures.</b> A clock a live worker has not pushed within the timeout: with {@code S > 0} that worker is
 * dropped (said through {@code log}) and the clocks complete without it; with {@code S = 0} the server fails. A server
 * that fails tells every worker why ({@link PsMessage#FAIL}) and stops. The loop ends when every worker has said it
 * is done, was dropped or lost its connection.
 */
final class ShardServer implements AutoCloseable {

    private final Mailbox box;
    private final int index;
    private final int workers;
    private final int staleness;
    private final long timeoutNanos;
    private final Consumer<String> log;
    private final long from;
    private final int len;
    private final List<AdamWRange> ranges;
    private final TrainConfig cfg;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment params;
    private final MemorySegment grads;
    private final MemorySegment m;
    private final MemorySegment v;
    private final Parallel pool = new Parallel(1);
    private final CpuOps ops = new CpuOps(pool);
    private final Map<Integer, Pending> pending = new TreeMap<>();
    private final boolean[] alive;
    private final boolean[] done;
    private final boolean[] gone; // its connection closed before it said it was done
    private final int[] waiting; // the version each worker waits for, -1: none
    private final StalenessWindow forWorker0 = new StalenessWindow();
    private boolean initialised;
    private volatile int version;
    private volatile String failure;

    /** Pushes of one clock, by worker. */
    private static final class Pending {
        final float[][] byWorker;
        float lr;
        long firstNanos = System.nanoTime();

        Pending(int workers) {
            byWorker = new float[workers][];
        }
    }

    /**
     * Shard {@code shard} of {@code servers} for {@code workers} workers (ranks {@code 0 … workers−1} of {@code box}),
     * the model's {@code layout}, AdamW from {@code cfg}.
     */
    ShardServer(Mailbox box, int shard, int servers, int workers, int staleness, long timeoutNanos,
                ParameterLayout layout, TrainConfig cfg, Consumer<String> log) {
        this.box = box;
        this.index = shard;
        this.workers = workers;
        this.staleness = staleness;
        this.timeoutNanos = timeoutNanos;
        this.log = log;
        long count = layout.count();
        this.from = Chunks.start(count, servers, shard);
        this.len = Math.toIntExact(Chunks.length(count, servers, shard));
        List<AdamWRange> r = new ArrayList<>();
        for (DecayRanges.Range d : DecayRanges.clip(DecayRanges.of(layout, cfg), from, from + len)) {
            r.add(new AdamWRange(d.offset() - from, d.offset(), d.length(), d.decays()));
        }
        this.ranges = r;
        this.cfg = cfg;
        long bytes = Math.max(1, len) * (long) Float.BYTES;
        this.params = arena.allocate(bytes, 64);
        this.grads = arena.allocate(bytes, 64);
        this.m = arena.allocate(bytes, 64);
        this.v = arena.allocate(bytes, 64);
        this.alive = new boolean[workers];
        this.done = new boolean[workers];
        this.gone = new boolean[workers];
        this.waiting = new int[workers];
        Arrays.fill(alive, true);
        Arrays.fill(waiting, -1);
    }

    /**
     * Serves until every worker is done or dropped; a failure is sent to every worker and returned as the reason
     * (null: finished). An interrupt ends it quietly.
     */
    String serve() {
        long poll = Math.max(1_000_000L, Math.min(200_000_000L, timeoutNanos / 4));
        try {
            while (!finished()) {
                Mailbox.Letter l = box.receive(poll);
                if (l != null && !l.lost()) {
                    handle(l.from(), PsMessage.decode(l.body()));
                } else if (l != null && l.from() < workers && !gone[l.from()] && !done[l.from()]) {
                    gone[l.from()] = true; // ends the loop without its DONE; a step that waits for it still drops it
                    log.accept("parameter server " + index + ": lost worker " + l.from() + " (" + l.why() + ")");
                }
                applyReady();
                reply();
            }
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (RuntimeException e) {
            failure = "parameter server " + index + " failed: " + e.getMessage() + "; every worker stops";
            byte[] fail = new PsMessage(PsMessage.FAIL, new int[0], 0f, failure, new float[0][]).encode();
            for (int w = 0; w < workers; w++) {
                try {
                    box.send(w, fail);
                } catch (RuntimeException gone) {
                    // that worker is gone already
                }
            }
            return failure;
        }
    }

    private void handle(int from, PsMessage msg) {
        switch (msg.kind()) {
            case PsMessage.INIT -> {
                MemorySegment.copy(msg.arrays()[0], 0, params, ValueLayout.JAVA_FLOAT, 0, len);
                initialised = true;
            }
            case PsMessage.PUSH -> {
                int w = msg.ints()[0], clock = msg.ints()[1], basedOn = msg.ints()[2];
                waiting[w] = msg.ints()[3];
                forWorker0.record(clock - basedOn);
                if (clock >= version) {
                    Pending p = pending.computeIfAbsent(clock, c -> new Pending(workers));
                    p.byWorker[w] = msg.arrays()[0];
                    p.lr = msg.lr();
                }
            }
            case PsMessage.GATHER -> box.send(from, new PsMessage(PsMessage.STATE, new int[] {version}, 0f, "",
                    new float[][] {floats(params), floats(m), floats(v)}).encode());
            case PsMessage.RESTORE -> {
                float[][] a = msg.arrays();
                MemorySegment.copy(a[0], 0, params, ValueLayout.JAVA_FLOAT, 0, len);
                MemorySegment.copy(a[1], 0, m, ValueLayout.JAVA_FLOAT, 0, len);
                MemorySegment.copy(a[2], 0, v, ValueLayout.JAVA_FLOAT, 0, len);
                version = msg.ints()[0];
                pending.keySet().removeIf(c -> c < version);
                initialised = true;
            }
            case PsMessage.DONE -> done[msg.ints()[0]] = true;
            case PsMessage.DIE -> throw new IllegalStateException("killed");
            default -> throw new IllegalStateException("a message of unknown kind " + msg.kind() + " from rank "
                    + from);
        }
    }

    /** Applies the clocks, in order, that every live worker has pushed; drops late workers when S > 0. */
    private void applyReady() {
        while (initialised) {
            Pending acc = pending.get(version);
            if (acc == null) {
                return;
            }
            int live = 0, livePushed = 0;
            for (int w = 0; w < workers; w++) {
                live += alive[w] ? 1 : 0;
                livePushed += alive[w] && acc.byWorker[w] != null ? 1 : 0;
            }
            if (livePushed < live) {
                if (System.nanoTime() - acc.firstNanos < timeoutNanos) {
                    return;
                }
                for (int w = 0; w < workers; w++) {
                    if (acc.byWorker[w] == null && alive[w]) {
                        if (staleness == 0) {
                            throw new IllegalStateException("worker " + w + " sent no gradient for step " + version
                                    + " within " + seconds(timeoutNanos) + " (synchronous: --staleness 0 waits for "
                                    + "every worker)");
                        }
                        drop(w);
                    }
                }
                continue;
            }
            float[] sum = new float[len];
            int pushes = 0;
            for (float[] g : acc.byWorker) { // worker order: the same sum whatever the arrival order
                if (g != null) {
                    for (int i = 0; i < len; i++) {
                        sum[i] += g[i];
                    }
                    pushes++;
                }
            }
            MemorySegment.copy(sum, 0, grads, ValueLayout.JAVA_FLOAT, 0, len);
            AdamWConfig c = new AdamWConfig(acc.lr, cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay());
            if (len > 0) {
                ops.adamw(params, grads, m, v, ranges, c, version + 1, 1f / pushes);
            }
            pending.remove(version);
            version++;
            Pending next = pending.get(version);
            if (next != null) {
                next.firstNanos = Math.max(next.firstNanos, System.nanoTime()); // its timeout runs from now
            }
        }
    }

    private void drop(int w) {
        synchronized (this) {
            alive[w] = false;
        }
        log.accept("parameter server " + index + ": dropped worker " + w + ": no gradient for step " + version
                + " within " + seconds(timeoutNanos) + " (--collective-timeout); training goes on without it");
    }

    /** Sends the parameters to every worker whose needed version the shard has reached. */
    private void reply() {
        if (!initialised) {
            return;
        }
        for (int w = 0; w < workers; w++) {
            if (waiting[w] >= 0 && version >= waiting[w]) {
                waiting[w] = -1;
                ParameterServers.Staleness s = w == 0 ? forWorker0.drain() : new ParameterServers.Staleness(0, 0, 0,
                        0);
                int sum = (int) Math.round(s.mean() * s.pushes());
                try {
                    box.send(w, PsMessage.of(PsMessage.PARAMS, new int[] {version, s.min(), s.max(), sum,
                            (int) s.pushes()}, floats(params)).encode());
                } catch (RuntimeException gone) {
                    // a worker that is gone: the timeout drops it when a clock waits for it
                }
            }
        }
    }

    private boolean finished() {
        for (int w = 0; w < workers; w++) {
            if (!done[w] && !gone[w] && alive(w)) {
                return false;
            }
        }
        return true;
    }

    private float[] floats(MemorySegment s) {
        float[] a = new float[len];
        MemorySegment.copy(s, ValueLayout.JAVA_FLOAT, 0, a, 0, len);
        return a;
    }

    /** Whether worker {@code w} is still counted on. */
    synchronized boolean alive(int w) {
        return alive[w];
    }

    /** The largest staleness of any push so far, from the version stamps. */
    int maxStaleness() {
        return forWorker0.maxSeen();
    }

    /** The reason it failed, or null. */
    String failure() {
        return failure;
    }

    static String seconds(long nanos) {
        return String.format(Locale.ROOT, "%.3f s", nanos / 1e9);
    }

    @Override
    public void close() {
        pool.close();
        arena.close();
    }
}
