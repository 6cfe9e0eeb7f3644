package io.accel4j.pipeline;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.nn.ParameterTable;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A pipeline's parameters and optimizer state moved between the stages and the whole model's layout, tensor by
 * tensor and by name, so that a checkpoint is the one-rank model's whatever the layout it was saved or is resumed
 * at: {@link #gather} sends every stage's buffers to stage 0, which places them into whole vectors (the last stage's
 * tied copy left out); {@link #scatter} takes each stage's tensors (the tied copy from the tensor it copies) out of
 * whole vectors every stage has read.
 */
public final class StageCheckpoint {

    private StageCheckpoint() {}

    /**
     * Every stage calls it with its buffers ({@code buffers}: name → {@code table.count()} fp32 in {@code memory},
     * the same names on every stage); on stage 0 it fills {@code whole} (name → host, {@code wholeTable.count()} fp32)
     * from every stage, whose tables {@code tableOf} gives, but for the tied copies (tensors named
     * {@code tiedCopies}, which only the whole model's other tensor holds). A collective of the pipeline group.
     */
    public static void gather(Communicator comm, DeviceMemory memory, ParameterTable table,
                              Map<String, MemorySegment> buffers, java.util.function.IntFunction<ParameterTable>
                                      tableOf, ParameterTable wholeTable, Map<String, MemorySegment> whole,
                              java.util.Set<String> tiedCopies) {
        try (Arena a = Arena.ofShared()) {
            Map<String, MemorySegment> host = new LinkedHashMap<>();
            for (Map.Entry<String, MemorySegment> b : buffers.entrySet()) {
                MemorySegment h = a.allocate(table.fp32Bytes(), 64);
                memory.copyToHost(b.getValue().asSlice(0, table.fp32Bytes()), h);
                host.put(b.getKey(), h);
            }
            gatherHost(comm, table, host, tableOf, wholeTable, whole, tiedCopies);
        }
    }

    /** {@link #gather} of buffers already on the host ({@code host}: name → {@code table.count()} fp32). */
    public static void gatherHost(Communicator comm, ParameterTable table, Map<String, MemorySegment> host,
                                  java.util.function.IntFunction<ParameterTable> tableOf, ParameterTable wholeTable,
                                  Map<String, MemorySegment> whole, java.util.Set<String> tiedCopies) {
        if (comm.rank() != 0) {
            for (MemorySegment h : host.values()) {
                comm.send(h, table.count(), DType.FP32, 0);
            }
            return;
        }
        try (Arena a = Arena.ofShared()) {
            for (int s = 0; s < comm.size(); s++) {
                ParameterTable t = s == 0 ? table : tableOf.apply(s);
                MemorySegment in = s == 0 ? null : a.allocate(t.fp32Bytes(), 64);
                for (Map.Entry<String, MemorySegment> e : host.entrySet()) {
                    MemorySegment h = e.getValue();
                    if (s != 0) {
                        comm.recv(in, t.count(), DType.FP32, s);
                        h = in;
                    }
                    place(t, h, wholeTable, whole.get(e.getKey()), tiedCopies);
                }
            }
        }
    }

    private static void place(ParameterTable t, MemorySegment stage, ParameterTable wholeTable, MemorySegment whole,
                              java.util.Set<String> skip) {
        for (ParameterTable.Entry e : t.entries()) {
            if (skip.contains(e.name())) {
                continue;
            }
            ParameterTable.Entry w = wholeTable.entry(e.name());
            MemorySegment.copy(stage, e.offset() * Float.BYTES, whole, w.offset() * Float.BYTES,
                    e.count() * Float.BYTES);
        }
    }

    /**
     * Fills this stage's {@code buffers} (name → {@code table.count()} fp32 in {@code memory}) from {@code whole}
     * (name → host vectors of {@code wholeTable}), tensor by name; the tensor {@code tiedCopy} (the last stage's copy of
     * a tied tensor, or null) from the one it copies, {@code tiedTo}.
     */
    public static void scatter(DeviceMemory memory, ParameterTable table, Map<String, MemorySegment> buffers,
                               ParameterTable wholeTable, Map<String, MemorySegment> whole, String tiedCopy,
                               String tiedTo) {
        try (Arena a = Arena.ofConfined()) {
            for (Map.Entry<String, MemorySegment> b : buffers.entrySet()) {
                MemorySegment host = a.allocate(table.fp32Bytes(), 64);
                take(table, host, wholeTable, whole.get(b.getKey()), tiedCopy, tiedTo);
                memory.copyToDevice(host, b.getValue().asSlice(0, table.fp32Bytes()));
            }
        }
    }

    /**
     * Fills {@code host} ({@code table.count()} fp32) from the whole vector {@code src} of {@code wholeTable}, tensor
     * by name; the tensor {@code tiedCopy} (or null) from {@code tiedTo}.
     */
    public static void take(ParameterTable table, MemorySegment host, ParameterTable wholeTable, MemorySegment src,
                            String tiedCopy, String tiedTo) {
        for (ParameterTable.Entry e : table.entries()) {
            ParameterTable.Entry w = wholeTable.entry(e.name().equals(tiedCopy) ? tiedTo : e.name());
            MemorySegment.copy(src, w.offset() * Float.BYTES, host, e.offset() * Float.BYTES,
                    e.count() * Float.BYTES);
        }
    }

    /** {@code "params"} → the parameters, then the optimizer's state buffers by name. */
    public static Map<String, MemorySegment> buffers(PipelineRank r) {
        Map<String, MemorySegment> m = new LinkedHashMap<>();
        m.put(PARAMS, r.network().params());
        m.putAll(r.optimizer().state());
        return m;
    }

    /** The key of the parameters among {@link #buffers}. */
    public static final String PARAMS = "\0params";
}
