package io.accel4j.train.parallel;

import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.ParameterLayout;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Locale;

/**
 * Worker {@code w}'s end of asynchronous data parallelism's {@link ParameterServers}, over whole host vectors of the
 * flat parameters: the protocol of the Java API's {@code fit.AsyncWorkers}. It keeps the worker's clock (steps pushed), the shard versions its parameters came
 * from and, after a resume, the version every shard has at least; {@link #exchange} pushes a step's gradients and
 * pulls the parameters within the staleness bound; {@link #gather} and {@link #restore} are the checkpoints' side.
 * Not thread-safe: one worker's thread calls it.
 */
public final class AsyncWorker {

    private final ParameterServers servers;
    private final int worker;
    private final long count;
    private final ParameterLayout layout;
    private final TrainConfig cfg;
    private int[] basedOn; // the version of each shard the current parameters came from
    private int clock;      // steps pushed
    private int floor;      // the version every shard has at least (a resumed checkpoint's step)
    private boolean connected;
    private final StalenessWindow seen = new StalenessWindow(); // worker 0: the replies' staleness
    private ParameterServers.Staleness last = new ParameterServers.Staleness(0, 0, 0, 0);

    /**
     * Worker {@code worker} of {@code servers}, whose model is GPT-2's {@code layout}; in-process servers start with
     * AdamW from {@code cfg} (betas, ε, weight decay and which tensors decay) when the first worker connects.
     *
     * @throws IllegalArgumentException for a worker index outside the servers' workers
     */
    public AsyncWorker(ParameterServers servers, int worker, ParameterLayout layout, TrainConfig cfg) {
        if (worker < 0 || worker >= servers.workers()) {
            throw new IllegalArgumentException("worker " + worker + " is not one of the parameter servers' "
                    + servers.workers() + " workers");
        }
        this.servers = servers;
        this.worker = worker;
        this.layout = layout;
        this.cfg = cfg;
        this.count = layout.count();
        this.basedOn = new int[servers.servers()];
    }

    /** This worker's index. */
    public int worker() {
        return worker;
    }

    /** The parameters this worker's model holds ({@code layout.count()}). */
    public long count() {
        return count;
    }

    /**
     * Before the first push, gather or restore (later calls do nothing): in this process the first worker starts the
     * servers; worker 0 gives them {@code params} (host, every worker starts from the same).
     */
    public void connect(MemorySegment params) {
        if (!connected) {
            servers.initialise(worker, params, layout, cfg);
            connected = true;
        }
    }

    /**
     * One step: pushes {@code grads} (host, times {@code gradScale}) to every shard for learning rate {@code lr},
     * then waits until the staleness bound allows and pulls every shard's parameters into {@code params} (host).
     */
    public void exchange(MemorySegment grads, float gradScale, float lr, MemorySegment params) {
        connect(params);
        int needed = Math.max(floor, clock + 1 - servers.staleness());
        servers.push(worker, clock, basedOn, needed, grads, gradScale, lr);
        clock++;
        basedOn = servers.pull(worker, params, seen);
        last = worker == 0 ? seen.drain() : last;
    }

    /**
     * The staleness of the updates applied since worker 0's previous step, as metrics
     * fields ({@code ,"staleness_min":…,"staleness_mean":…,"staleness_max":…}); all zero on the other workers.
     */
    public String stepJson() {
        return String.format(Locale.ROOT, ",\"staleness_min\":%d,\"staleness_mean\":%.3f,\"staleness_max\":%d",
                last.min(), last.mean(), last.max());
    }

    /**
     * Worker 0 (the others: nothing): every shard's parameters and AdamW moments into whole host vectors, each
     * shard as it is when it answers; {@code params} also gives worker 0's parameters to servers not yet started.
     */
    public void gather(MemorySegment params, MemorySegment m, MemorySegment v) {
        if (worker != 0) {
            return;
        }
        connect(params);
        servers.gather(worker, params, m, v);
    }

    /**
     * Resuming at step {@code step} from a checkpoint's whole {@code params}, {@code m} and {@code v} (host): worker 0
     * gives every shard its part and makes its version {@code step}; every worker's clock becomes {@code step} and
     * its next pull waits for at least that version.
     */
    public void restore(MemorySegment params, MemorySegment m, MemorySegment v, int step) {
        connect(params);
        clock = step;
        floor = step;
        Arrays.fill(basedOn, step);
        servers.restore(worker, params, m, v, step);
    }

    /** This worker has finished: the servers stop counting on it. */
    public void done() {
        servers.done(worker);
    }
}
