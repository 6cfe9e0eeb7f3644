package io.accel4j.fit;

import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;
import java.util.Map;

/**
 * How the ranks of a data-parallel run agree on a step, composed with the optimizer. After every rank's backward,
 * {@link #reduce} averages the gradients over the ranks (into the whole buffer, or — sharding — into this rank's shard
 * of them, {@link #gradients}); {@link #sumOfSquares} and {@link #anyNonFinite} look at the averaged gradient as a
 * whole; the optimizer updates this rank's {@link #shard} of the parameters, and {@link #afterUpdate} gives every rank
 * the others' updated shards. {@link #local()} is one rank; {@link DataParallel} is DDP (the shard is everything);
 * {@link ZeroSharding} is ZeRO-1/2 over chunks of the flat vector; {@link UnitSharding} is ZeRO-2/3 unit by unit (a
 * module tree's children, or the CLI trainer's GPT-2); {@link AsyncWorkers} is asynchronous data parallelism (no
 * reduction; the parameter servers update). The step reads the same in every mode ({@link RankStep}); every
 * rank calls the same methods in the same order.
 */
public interface GradientSync extends AutoCloseable {

    /** This rank, in [0, {@link #ranks()}). */
    int rank();

    /** The number of ranks. */
    int ranks();

    /** The elements {@code [offset, offset + length)} of the parameter vector this rank's optimizer updates. */
    record Shard(long offset, long length) {}

    /** This rank's shard of a vector of {@code count} parameters: all of it unless the strategy shards. */
    default Shard shard(long count) {
        return new Shard(0, count);
    }

    /** Averages {@code count} fp32 gradients over the ranks: in place, or into {@link #gradients}' shard. */
    void reduce(MemorySegment grads, long count);

    /**
     * What the step's last micro-batch's backward tells as gradients become final ({@code Network.backward}'s
     * {@code gradientsDone}), so that the strategy starts reducing them while backward still runs
     * ({@link BucketedDataParallel}); null (the default): it reduces everything in {@link #reduce}.
     */
    default java.util.function.IntConsumer gradientsDone() {
        return null;
    }

    /**
     * A step failed after {@link #gradientsDone()} started communicating ({@code failure}): waits until no transfer
     * still reads the gradients, then forgets the step. Nothing by default.
     */
    default void abandon(Throwable failure) {
    }

    /** Where the averaged gradients of this rank's {@link #shard} are after {@link #reduce}: {@code grads}' slice by default. */
    default MemorySegment gradients(MemorySegment grads, long count) {
        Shard s = shard(count);
        return grads.asSlice(s.offset() * Float.BYTES, s.length() * Float.BYTES);
    }

    /** {@code Σ g²} of the whole averaged gradient, the same on every rank. */
    default double sumOfSquares(Ops ops, MemorySegment grads, long count) {
        return ops.sumOfSquares(grads, count);
    }

    /** Whether the averaged gradient holds inf or NaN anywhere, the same answer on every rank. */
    default boolean anyNonFinite(Ops ops, MemorySegment grads, long count) {
        return any(ops.hasNonFinite(grads, count));
    }

    /**
     * A checkpoint's gather: {@code whole} ({@code count} values, the backend's memory) receives every rank's
     * {@code shard} (this rank's {@link #shard}'s length) at its place; without sharding a copy. A collective.
     */
    default void gatherShards(MemorySegment shard, MemorySegment whole, long count, io.accel4j.core.memory.DeviceMemory
            memory) {
        memory.copy(shard.asSlice(0, count * Float.BYTES), whole);
    }

    /**
     * The optimizer of {@code spec} for this rank's part of {@code net}'s parameters: its {@link #shard} of the
     * network's flat buffers, the averaged gradients where {@link #gradients} says.
     */
    default io.accel4j.optim.Optimizer optimizer(io.accel4j.optim.OptimizerSpec spec, io.accel4j.nn.Network net) {
        return optimizer(spec, net.ops(), net.table(), net.params(), net.grads());
    }

    /**
     * {@link #optimizer(io.accel4j.optim.OptimizerSpec, io.accel4j.nn.Network)} over the flat buffers {@code params}
     * and {@code grads} laid out by {@code table} (a network's own, or those of a model that keeps its weights itself,
     * as the CLI trainer's GPT-2), in {@code ops}' memory; a strategy that holds the parameters or gradients itself
     * (ZeRO over units) ignores them for its own.
     */
    default io.accel4j.optim.Optimizer optimizer(io.accel4j.optim.OptimizerSpec spec, Ops ops,
                                                 io.accel4j.nn.ParameterTable table, MemorySegment params,
                                                 MemorySegment grads) {
        long count = table.count();
        Shard s = shard(count);
        MemorySegment mine = params.asSlice(s.offset() * Float.BYTES, s.length() * Float.BYTES);
        return spec.create(ops, table, mine, gradients(grads, count), s.offset(), s.length());
    }

    /**
     * The strategy of ZeRO stage {@code zero} over {@code data} whose shards are chunks of the flat vector of
     * {@code count} parameters in {@code memory}: {@link #local()} for one rank ({@code data} null or of one rank),
     * else {@link DataParallel} at stage 0 and {@link ZeroSharding} at 1 and 2; {@code values} floats of room in
     * {@link #max}. Both the Java API's ranks and the CLI trainer's stages 0–1 are made here. Stage 3, and the
     * trainer's ZeRO-2 over GPT-2's units, shard the model's units instead ({@link UnitSharding}).
     *
     * @throws IllegalArgumentException for stage 3 or a stage outside 0..3
     */
    static GradientSync of(int zero, io.accel4j.collectives.Communicator data, io.accel4j.core.memory.DeviceMemory
            memory, long count, int values) {
        if (zero < 0 || zero > 2) {
            throw new IllegalArgumentException("ZeRO over chunks of the flat vector is stage 0, 1 or 2 (stage 3 "
                    + "shards the model's units: UnitSharding), got " + zero);
        }
        if (data == null || data.size() == 1) {
            return local();
        }
        return zero == 0 ? new DataParallel(data, memory, values) : new ZeroSharding(zero, data, memory, count,
                values);
    }

    /**
     * A resume's scatter, the inverse of {@link #gatherShards}: this rank's part of {@code whole} ({@code count}
     * values, host memory) into {@code shard} (an optimizer state buffer, the backend's memory).
     */
    default void scatterShard(MemorySegment whole, MemorySegment shard, long count,
                              io.accel4j.core.memory.DeviceMemory memory) {
        Shard s = shard(count);
        memory.copyToDevice(whole.asSlice(s.offset() * Float.BYTES, s.length() * Float.BYTES), shard);
    }

    /** Sets {@code net}'s parameters from the whole vector {@code host} (this rank's shards of it where they are sharded). */
    default void setParameters(io.accel4j.nn.Network net, MemorySegment host) {
        net.copyParamsFromHost(host);
    }

    /**
     * {@link #setParameters} from a checkpoint written after {@code updates} optimizer updates (the steps not
     * skipped): a strategy whose parameters follow from the optimizer's state (bf16 working weights rounded from the
     * fp32 master, {@link Bf16ParamSync}) sets them as those updates left them. {@link #setParameters} by default.
     */
    default void resumeParameters(io.accel4j.nn.Network net, MemorySegment host, int updates) {
        setParameters(net, host);
    }

    /** The whole parameter vector of {@code net} into {@code host}: a collective where the parameters are sharded. */
    default void copyParameters(io.accel4j.nn.Network net, MemorySegment host) {
        net.copyParamsToHost(host);
    }

    /** After this rank's optimizer updated its shard of {@code params}: every rank gets every shard. */
    default void afterUpdate(MemorySegment params, long count) {
    }

    /**
     * Fields this strategy adds to the last step's metrics line, as JSON ({@code ,"name":value…}): the run's rank 0
     * reads them after each step ({@link Learner#strategyJson}); none by default. {@link AsyncWorkers}: the staleness.
     */
    default String stepJson() {
        return "";
    }

    /**
     * Where the parameters of record and the optimizer state live when the ranks do not hold them (asynchronous
     * workers: the parameter servers, {@link AsyncWorkers}): checkpoints and resumes go through it instead of the
     * rank's network and optimizer buffers. Null by default: the ranks hold them.
     */
    default ServerState serverState() {
        return null;
    }

    /** The parameters and optimizer state of a run whose ranks do not hold them ({@link #serverState}). */
    interface ServerState {

        /**
         * On the run's rank 0 (the other ranks: nothing): the whole parameters into {@code params} and each of the
         * optimizer's state buffers, by name, into {@code state} (host memory, the parameter count of fp32 each).
         */
        void gather(MemorySegment params, Map<String, MemorySegment> state);

        /**
         * Every rank, resuming at step {@code step} from the whole {@code params} and {@code state} (host, as
         * {@link #gather} gives them): the run's rank 0 gives them to where they live. The rank's network takes
         * {@code params} separately ({@link GradientSync#setParameters}).
         */
        void restore(MemorySegment params, Map<String, MemorySegment> state, int step);
    }

    /** The mean of {@code value} over the ranks (fp32, as the train loss is reported). */
    double mean(double value);

    /** Whether {@code local} holds on any rank. */
    boolean any(boolean local);

    /** Each of {@code values} replaced by its maximum over the ranks (FP8 amaxes), in place; returns it. */
    float[] max(float[] values);

    @Override
    void close();

    /** One rank: nothing to agree on. */
    static GradientSync local() {
        return new GradientSync() {
            @Override
            public int rank() {
                return 0;
            }

            @Override
            public int ranks() {
                return 1;
            }

            @Override
            public void reduce(MemorySegment grads, long count) {
            }

            @Override
            public double mean(double value) {
                return value;
            }

            @Override
            public boolean any(boolean local) {
                return local;
            }

            @Override
            public float[] max(float[] values) {
                return values;
            }

            @Override
            public void close() {
            }
        };
    }
}
