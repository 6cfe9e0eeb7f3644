package io.accel4j.pipeline;

import io.accel4j.nn.Network;
import io.accel4j.nn.NetworkSpec;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.StageNetwork;
import java.io.PrintWriter;
import java.util.Locale;

/**
 * What one rank of a pipeline holds in its backend's memory, from the shapes alone (nothing allocated): its stage's
 * parameters and gradients (its tensor rank's shards), the optimizer state (over its ZeRO-1 chunk when the replicas
 * shard it), the micro-batch slots the schedule keeps alive at once ({@link Timeline}: at most P under 1F1B, M under
 * GPipe), under 16-bit storage the fp32 working set those slots share ({@link StageNetwork#workingBytes}), and the
 * scratch of a tied tensor's gradient on the first and last stage. What {@link PipelineRank} then
 * allocates is the same ({@code StagePlanTest}, on a counting allocator).
 *
 * @param stage          the stage
 * @param parameterBytes fp32 parameters of the stage on this rank
 * @param gradientBytes  their gradients
 * @param optimizerBytes the optimizer's state for this rank's parameters (or its ZeRO-1 chunk of them)
 * @param slotBytes      one micro-batch slot (activations, input, output gradient, input gradient, targets)
 * @param slots          the slots alive at once under the schedule
 * @param tieBytes       the tied tensor's gradient scratch (first and last stage of a model with ties), else 0
 * @param workingBytes   the fp32 working set the slots share under 16-bit activation storage, else 0
 */
public record StagePlan(int stage, long parameterBytes, long gradientBytes, long optimizerBytes, long slotBytes,
                        int slots, long tieBytes, long workingBytes) {

    /**
     * The plan of stage {@code stage} of {@code model} cut by {@code split}, trained with {@code o} under
     * {@code schedule}, on tensor rank 0 of {@code tensorRanks} and data-parallel replica {@code replica} of
     * {@code replicas} ({@code zero}: 0, or 1 for the optimizer state sharded over the replicas).
     */
    public static StagePlan of(StagedModel model, Partition split, Schedule schedule, PipelineRank.Options o,
                               int stage, int tensorRanks, int replica, int replicas, int zero) {
        int P = split.stages();
        boolean first = stage == 0, last = stage == P - 1;
        int from = split.from(stage), to = split.to(stage);
        NetworkSpec spec = Network.of(model.stage(from, to)).batch(o.B(), o.T()).recompute(o.recompute())
                .matmulOperands(o.operands()).activationStorage(o.storage()).parameterOrder(model.order());
        spec = first && o.vocabulary() > 0 ? spec.tokens(o.vocabulary()) : spec.features(model.inputWidth(from));
        if (last) {
            spec = spec.classes(o.classes());
        }
        Timeline timeline = Timeline.of(schedule, P, o.micro());
        int slots = slotsAlive(timeline, stage);
        StageNetwork.Plan p = StageNetwork.plan(spec, first, last, tensorRanks, backwardNext(timeline, stage));
        long count = p.table().count();
        long shard = zero == 1 ? io.accel4j.collectives.Chunks.length(count, replicas, replica) : count;
        long tie = 0;
        if (P > 1) {
            for (StagedModel.Tie t : model.ties()) {
                String name = first ? t.first() : last ? t.last() : null;
                for (ParameterTable.Entry e : p.table().entries()) {
                    if (e.name().equals(name)) {
                        tie = e.count() * Float.BYTES;
                    }
                }
                if (tie > 0) {
                    break;
                }
            }
        }
        return new StagePlan(stage, count * Float.BYTES, count * Float.BYTES,
                (long) o.optimizer().stateFloatsPerParameter() * shard * Float.BYTES, p.slotBytes(),
                slots, tie, p.workingBytes());
    }

    /**
     * Whether every backward of the stage comes before its next forward (1F1B's last stage), so that what a forward
     * left in the stage's working set is still there for its backward ({@link StageNetwork#build}'s
     * {@code backwardNext}).
     */
    static boolean backwardNext(Timeline timeline, int stage) {
        int pending = 0;
        for (Timeline.Event e : timeline.events(stage)) {
            if (e.kind() == Timeline.Kind.FORWARD && pending++ > 0) {
                return false;
            } else if (e.kind() == Timeline.Kind.BACKWARD) {
                pending--;
            }
        }
        return true;
    }

    /** The most micro-batches a stage holds at once: taken at its forward (or receive), given back after backward. */
    static int slotsAlive(Timeline timeline, int stage) {
        int alive = 0, most = 0;
        for (Timeline.Event e : timeline.events(stage)) {
            boolean take = stage == 0 ? e.kind() == Timeline.Kind.FORWARD : e.kind() == Timeline.Kind.RECV_ACTIVATION;
            boolean give = stage == 0 ? e.kind() == Timeline.Kind.BACKWARD : e.kind() == Timeline.Kind.SEND_GRADIENT;
            if (take) {
                most = Math.max(most, ++alive);
            } else if (give) {
                alive--;
            }
        }
        return most;
    }

    /** Every byte of the rank. */
    public long total() {
        return parameterBytes + gradientBytes + optimizerBytes + slotBytes * slots + tieBytes + workingBytes;
    }

    /** One line: the parts in MiB. */
    public void print(PrintWriter w) {
        w.printf(Locale.ROOT, "  stage %d per rank: parameters %.1f MiB, gradients %.1f MiB, optimizer state %.1f MiB, "
                        + "activations %d × %.1f MiB%s%s; %.1f MiB in all%n", stage, mib(parameterBytes),
                mib(gradientBytes), mib(optimizerBytes), slots, mib(slotBytes),
                workingBytes > 0 ? String.format(Locale.ROOT, " (16-bit) + %.1f MiB fp32 working set",
                        mib(workingBytes)) : "",
                tieBytes > 0 ? String.format(Locale.ROOT, ", tied gradient %.1f MiB", mib(tieBytes)) : "",
                mib(total()));
    }

    private static double mib(long bytes) {
        return bytes / 1048576.0;
    }
}
