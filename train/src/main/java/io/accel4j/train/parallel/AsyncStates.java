package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.precision.LossScaler;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Locale;

/**
 * A worker of asynchronous data parallelism ({@link ParameterServers}): it computes its gradients on its own data
 * (rank {@code comm.rank()} of the {@code comm.size()} workers: the data loader's shard) and, in {@link #update},
 * pushes them to every server shard (point to point, no collective), then pulls the parameters once the staleness
 * bound allows. The loss, norm and overflow it reports are its own: nothing is averaged over the workers. It holds no
 * optimizer state; checkpoints gather the servers' shards (rank 0 writes them) and resuming scatters them back.
 */
public final class AsyncStates extends ModelStates {

    private final ParameterServers servers;
    private final int worker;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment hostGrads;
    private final MemorySegment hostParams;
    private int[] basedOn; // the version of each shard the current parameters came from
    private int clock;      // steps pushed
    private int floor;      // the version every shard has at least (a resumed checkpoint's step)
    private final StalenessWindow seen = new StalenessWindow(); // worker 0: the replies' staleness
    private MemorySegment resumedM; // a resumed checkpoint's moments, until the parameters come
    private MemorySegment resumedV;
    private ParameterServers.Staleness last = new ParameterServers.Staleness(0, 0, 0, 0);

    /** Worker {@code comm.rank()} (null: worker 0 of 1) of {@code servers}. */
    public AsyncStates(ParameterServers servers, Communicator comm, Gpt2 model, TrainConfig cfg) {
        super(null, model, 0); // no exchange: nothing is reduced over the workers
        this.servers = servers;
        this.worker = comm == null ? 0 : comm.rank();
        long bytes = count * Float.BYTES;
        this.hostGrads = arena.allocate(bytes, 64);
        this.hostParams = arena.allocate(bytes, 64);
        model.copyParamsToHost(hostParams);
        servers.initialise(worker, hostParams, model.layout(), cfg);
        this.basedOn = new int[servers.servers()];
    }

    @Override
    public void reduceGradients() {
        // nothing: the gradients are pushed with the update
    }

    @Override
    public boolean anyNonFinite() {
        return LossScaler.overflowed(model.ops(), model.grads(), count, null);
    }

    @Override
    public double sumOfSquares() {
        return model.ops().sumOfSquares(model.grads(), count);
    }

    /** Pushes this step's gradients (times {@code gradScale}) to every shard, then pulls within the staleness bound. */
    @Override
    public void update(AdamWConfig decay, int t, float gradScale) {
        model.memory().copyToHost(model.grads(), hostGrads);
        int needed = Math.max(floor, clock + 1 - servers.staleness());
        servers.push(worker, clock, basedOn, needed, hostGrads, gradScale, decay.lr());
        clock++;
        basedOn = servers.pull(worker, hostParams, seen);
        model.copyParamsFromHost(hostParams);
        last = worker == 0 ? seen.drain() : last;
    }

    /** The staleness of the updates applied since rank 0's previous step, as metrics fields. */
    @Override
    public String stepJson() {
        return String.format(Locale.ROOT, ",\"staleness_min\":%d,\"staleness_mean\":%.3f,\"staleness_max\":%d",
                last.min(), last.mean(), last.max());
    }

    @Override
    public void checkReplicas() {
        // the workers' copies differ by design (each pulled at its own time)
    }

    @Override
    public boolean shardsParameters() {
        return false;
    }

    @Override
    public int zeroStage() {
        return 0;
    }

    @Override
    public long stateBytes() {
        return 0;
    }

    @Override
    public long momentBytes() {
        return 0;
    }

    @Override
    public long workingBytes() {
        return hostGrads.byteSize() + hostParams.byteSize();
    }

    @Override
    public ZeroMemory accounting() {
        return ZeroMemory.fp32(0, 1, count);
    }

    @Override
    public void copyParameters(MemorySegment dst) {
        if (dst != null) {
            model.copyParamsToHost(dst);
        }
    }

    @Override
    public Saved gatherForCheckpoint(Arena staging) {
        if (worker != 0) {
            return null;
        }
        long bytes = count * Float.BYTES;
        MemorySegment p = staging.allocate(bytes, 64), m = staging.allocate(bytes, 64), v = staging.allocate(bytes, 64);
        servers.gather(worker, p, m, v);
        return new Saved(m, v, p);
    }

    /**
     * Resuming: the checkpoint's moments go to the servers, whose versions and this worker's clock become the
     * checkpoint's step ({@link #setParameters} then gives the servers the parameters).
     */
    @Override
    public TrainState.Header readMoments(Path stateFile) throws IOException {
        resumedM = arena.allocate(count * Float.BYTES, 64);
        resumedV = arena.allocate(count * Float.BYTES, 64);
        TrainState.Header h = TrainState.read(stateFile, model.config(), resumedM, resumedV);
        clock = h.step();
        floor = clock;
        java.util.Arrays.fill(basedOn, clock);
        return h;
    }

    @Override
    public void setParameters(MemorySegment host) {
        model.copyParamsFromHost(host);
        if (resumedM != null) {
            servers.restore(worker, host, resumedM, resumedV, clock);
        }
    }

    @Override
    public void gatherModel(boolean here) {
    }

    @Override
    public void close() {
        servers.done(worker);
        arena.close();
        super.close();
    }
}
