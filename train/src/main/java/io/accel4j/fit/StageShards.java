package io.accel4j.fit;

import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.StageNetwork;
import io.accel4j.nn.TensorShards;
import io.accel4j.pipeline.PipelineRank;
import io.accel4j.pipeline.StageCheckpoint;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.IntFunction;

/**
 * A pipeline stage's buffers (parameters, optimizer state) moved between this rank's tensor shards and the whole
 * model's vectors: {@link #gather} first joins the stage's shards over its tensor group (the stage whole, as one
 * tensor rank would hold it), then tensor rank 0 of every stage sends that to stage 0 ({@link StageCheckpoint});
 * {@link #scatter} takes the stage's tensors out of the whole vectors by name and this rank's shards out of them.
 * A stage that is not split moves its buffers as they are.
 */
final class StageShards {

    private StageShards() {}

    /**
     * Every rank of the first replica calls it with its stage's {@code buffers} (name → the stage table's count of
     * fp32, in the stage's memory); stage 0's tensor rank 0 fills {@code whole} (name → host vectors of
     * {@code wholeTable}). A collective of the tensor group, then of tensor rank 0's pipeline group.
     */
    static void gather(PipelineRank r, Map<String, MemorySegment> buffers, IntFunction<ParameterTable> tableOf,
                       ParameterTable wholeTable, Map<String, MemorySegment> whole, Set<String> tiedCopies) {
        StageNetwork net = r.network();
        TensorShards shards = TensorShards.of(net);
        ParameterTable stage = shards.whole();
        long bytes = net.table().fp32Bytes();
        try (Arena a = Arena.ofShared()) {
            MemorySegment local = a.allocate(bytes, 64);
            Map<String, MemorySegment> host = new LinkedHashMap<>();
            for (Map.Entry<String, MemorySegment> b : buffers.entrySet()) {
                net.memory().copyToHost(b.getValue().asSlice(0, bytes), local);
                MemorySegment w = a.allocate(stage.fp32Bytes(), 64);
                shards.gather(local, w);
                host.put(b.getKey(), w);
            }
            if (net.tensor().rank() == 0) {
                StageCheckpoint.gatherHost(r.communicator(), stage, host, tableOf, wholeTable, whole, tiedCopies);
            }
        }
    }

    /**
     * Fills this rank's {@code buffers} from {@code whole} (name → host vectors of {@code wholeTable}): the stage's
     * tensors by name (its tied copy from the tensor it copies), then this rank's shards of them.
     */
    static void scatter(PipelineRank r, Map<String, MemorySegment> buffers, ParameterTable wholeTable,
                        Map<String, MemorySegment> whole) {
        StageNetwork net = r.network();
        TensorShards shards = TensorShards.of(net);
        ParameterTable stage = shards.whole();
        String copy = r.tiedCopy() == null ? null : r.tiedCopy().name();
        long bytes = net.table().fp32Bytes();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment w = a.allocate(stage.fp32Bytes(), 64);
            MemorySegment local = a.allocate(bytes, 64);
            for (Map.Entry<String, MemorySegment> b : buffers.entrySet()) {
                StageCheckpoint.take(stage, w, wholeTable, whole.get(b.getKey()), copy, r.tiedTo());
                shards.extract(w, local);
                net.memory().copyToDevice(local, b.getValue().asSlice(0, bytes));
            }
        }
    }
}
