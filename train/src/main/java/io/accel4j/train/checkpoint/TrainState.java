package io.accel4j.train.checkpoint;

import io.accel4j.train.io.AtomicWrite;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.io.LlmcHeader;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The trainer's state beside an llm.c model file, enough to resume bit for bit: the step, the batch shape, the data
 * loader's position, the fp16 loss scaler, the FP8 scaling state and AdamW's moments. A header of 256 little-endian
 * int32 in llm.c's style —
 * <pre>
 *  [0] magic 20241203   [1] version 3   [2] step (completed optimizer steps)
 *  [3] B  [4] T  [5] grad accumulation K
 *  [6] max_seq_len  [7] V  [8] L  [9] NH  [10] C  [11] Vp     (the model's shape)
 *  [12] loader state bytes S   [13] parameter count, low 32 bits   [14] its high 32 bits
 *  [15] fp16 loss scale, fp32 bits (0: none)   [16] its clean steps   [17] skipped steps
 *  [18] FP8 state bytes F (0: the run is not fp8)   [19..255] 0
 * </pre>
 * then S bytes of {@link io.accel4j.train.data.DataLoader.State#encode}, then F bytes of
 * {@link io.accel4j.train.model.Fp8State#encode} (amax histories and scales), then the first moments m and the
 * second moments v, one fp32 per parameter each, little-endian. Older versions are still read: version 2 (before
 * FP8; field 18 zero) as having no FP8 state, version 1 (before precisions; fields 15..18 zero) also as having no
 * loss scale and no skipped step. A file that breaks this is a {@link FileFormatException} naming the field, found
 * before anything is allocated.
 */
public final class TrainState {

    /** {@code header[0]}. */
    public static final int MAGIC = 20241203;
    /** {@code header[1]}. */
    public static final int VERSION = 3;
    /** The version before the FP8 state, still read. */
    static final int VERSION_2 = 2;
    /** The version before the loss-scaler fields, still read. */
    static final int VERSION_1 = 1;

    private static final ValueLayout.OfFloat FLOAT_LE =
            ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final int CHUNK_FLOATS = 1 << 18;

    /**
     * The state's scalars.
     *
     * @param step         completed optimizer steps
     * @param loaderState  the train loader's encoded position
     * @param lossScale    the fp16 loss scale ({@link io.accel4j.train.precision.LossScaler}); 0 when the run has none
     * @param cleanSteps   the loss scaler's clean steps since its last change
     * @param skippedSteps steps skipped for overflow so far
     * @param fp8State     the encoded FP8 scaling state ({@link io.accel4j.train.model.Fp8State#encode}); empty when
     *                     the run is not fp8
     */
    public record Header(int step, int B, int T, int gradAccum, GptConfig config, byte[] loaderState,
                         float lossScale, int cleanSteps, int skippedSteps, byte[] fp8State) {
        public Header {
            loaderState = loaderState.clone();
            fp8State = fp8State.clone();
        }

        /** A header without FP8 state. */
        public Header(int step, int B, int T, int gradAccum, GptConfig config, byte[] loaderState,
                      float lossScale, int cleanSteps, int skippedSteps) {
            this(step, B, T, gradAccum, config, loaderState, lossScale, cleanSteps, skippedSteps, new byte[0]);
        }

        /** A header without loss scaling, no skipped step and no FP8 state. */
        public Header(int step, int B, int T, int gradAccum, GptConfig config, byte[] loaderState) {
            this(step, B, T, gradAccum, config, loaderState, 0f, 0, 0);
        }

        @Override
        public byte[] loaderState() {
            return loaderState.clone();
        }

        @Override
        public byte[] fp8State() {
            return fp8State.clone();
        }
    }

    private TrainState() {}

    /** Writes {@code header} and the moments (each {@code config.parameterCount()} fp32, native order) atomically. */
    public static void write(Path file, Header h, MemorySegment m, MemorySegment v) throws IOException {
        GptConfig c = h.config();
        long count = c.parameterCount();
        byte[] loader = h.loaderState, fp8 = h.fp8State;
        ByteBuffer header = LlmcHeader.encode(MAGIC, VERSION, h.step(), h.B(), h.T(), h.gradAccum(), c.maxT(), c.V(),
                c.L(), c.NH(), c.C(), c.Vp(), loader.length, (int) count, (int) (count >>> 32),
                Float.floatToRawIntBits(h.lossScale()), h.cleanSteps(), h.skippedSteps(), fp8.length);
        AtomicWrite.write(file, ch -> {
            LlmcHeader.writeFully(ch, header);
            LlmcHeader.writeFully(ch, ByteBuffer.wrap(loader));
            LlmcHeader.writeFully(ch, ByteBuffer.wrap(fp8));
            ByteBuffer buf = ByteBuffer.allocateDirect(CHUNK_FLOATS * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
            MemorySegment chunk = MemorySegment.ofBuffer(buf);
            for (MemorySegment moments : new MemorySegment[] {m, v}) {
                for (long start = 0; start < count; start += CHUNK_FLOATS) {
                    int n = (int) Math.min(CHUNK_FLOATS, count - start);
                    MemorySegment.copy(moments, ValueLayout.JAVA_FLOAT_UNALIGNED, start * Float.BYTES, chunk,
                            FLOAT_LE, 0, n);
                    buf.clear().limit(n * Float.BYTES);
                    LlmcHeader.writeFully(ch, buf);
                }
            }
        });
    }

    /**
     * Reads a state for a model of shape {@code config} into {@code m} and {@code v} (each at least
     * {@code config.parameterCount()} fp32); a file for another shape is a {@link FileFormatException} naming the
     * field that differs.
     */
    public static Header read(Path file, GptConfig config, MemorySegment m, MemorySegment v) throws IOException {
        return read(file, config, m, v, 0, config.parameterCount());
    }

    /**
     * {@link #read(Path, GptConfig, MemorySegment, MemorySegment)} of the moments of parameters
     * {@code [from, from + length)} only (a ZeRO rank's shard) into {@code m} and {@code v}, each at least
     * {@code length} fp32; the whole file is checked as there.
     */
    public static Header read(Path file, GptConfig config, MemorySegment m, MemorySegment v, long from, long length)
            throws IOException {
        if (from < 0 || length < 0 || from + length > config.parameterCount()) {
            throw new IllegalArgumentException("range [" + from + ", " + (from + length) + ") is outside the "
                    + config.parameterCount() + " parameters");
        }
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            int[] h = LlmcHeader.read(ch, file);
            if (h[0] != MAGIC) {
                throw new FileFormatException(file, "header[0] (magic)", "is " + h[0] + ", expected " + MAGIC
                        + ": not an accel4j train state file");
            }
            if (h[1] != VERSION && h[1] != VERSION_2 && h[1] != VERSION_1) {
                throw new FileFormatException(file, "header[1] (version)", "is " + h[1] + ", expected " + VERSION
                        + " (or " + VERSION_2 + " or " + VERSION_1 + ")");
            }
            int fp8Bytes = h[1] == VERSION ? h[18] : 0;
            if (fp8Bytes < 0) {
                throw new FileFormatException(file, "header[18] (FP8 state bytes)", "is " + fp8Bytes
                        + ", must be >= 0");
            }
            float lossScale = Float.intBitsToFloat(h[15]);
            if (!(lossScale == 0 || lossScale >= 1 && lossScale == Math.scalb(1f, Math.getExponent(lossScale)))
                    || h[16] < 0 || h[17] < 0) {
                throw new FileFormatException(file, "header[15..17] (loss scale, clean steps, skipped steps)", "is "
                        + lossScale + ", " + h[16] + ", " + h[17] + ": expected 0 or a power of two >= 1, and counts "
                        + ">= 0");
            }
            String[] names = {"step", "B", "T", "grad accumulation", "max_seq_len", "V", "L", "NH", "C", "Vp"};
            for (int i = 2; i <= 11; i++) {
                if (h[i] < (i == 2 ? 0 : 1)) {
                    throw new FileFormatException(file, "header[" + i + "] (" + names[i - 2] + ")", "is " + h[i]
                            + ", must be >= " + (i == 2 ? 0 : 1));
                }
            }
            int[] expected = {config.maxT(), config.V(), config.L(), config.NH(), config.C(), config.Vp()};
            for (int i = 0; i < expected.length; i++) {
                if (h[6 + i] != expected[i]) {
                    throw new FileFormatException(file, "header[" + (6 + i) + "] (" + names[4 + i] + ")", "is "
                            + h[6 + i] + ", but the model has " + expected[i] + ": the state belongs to another model");
                }
            }
            long count = (h[13] & 0xFFFF_FFFFL) | ((long) h[14] << 32);
            if (count != config.parameterCount()) {
                throw new FileFormatException(file, "header[13..14] (parameter count)", "is " + count
                        + ", but the model has " + config.parameterCount());
            }
            if (h[12] < 0) {
                throw new FileFormatException(file, "header[12] (loader state bytes)", "is " + h[12]
                        + ", must be >= 0");
            }
            long size = LlmcHeader.BYTES + (long) h[12] + fp8Bytes + 2 * count * Float.BYTES;
            if (ch.size() != size) {
                throw new FileFormatException(file, "size", "is " + ch.size() + " bytes, but the header implies "
                        + size + ": the file is truncated or corrupt");
            }
            ByteBuffer loader = ByteBuffer.allocate(h[12]);
            while (loader.hasRemaining()) {
                if (ch.read(loader, LlmcHeader.BYTES + loader.position()) < 0) {
                    throw new FileFormatException(file, "loader state", "is truncated");
                }
            }
            ByteBuffer fp8 = ByteBuffer.allocate(fp8Bytes);
            while (fp8.hasRemaining()) {
                if (ch.read(fp8, LlmcHeader.BYTES + (long) h[12] + fp8.position()) < 0) {
                    throw new FileFormatException(file, "FP8 state", "is truncated");
                }
            }
            long at = LlmcHeader.BYTES + (long) h[12] + fp8Bytes;
            try (Arena mapping = Arena.ofConfined()) {
                MemorySegment src = ch.map(FileChannel.MapMode.READ_ONLY, at, 2 * count * Float.BYTES, mapping);
                MemorySegment.copy(src, FLOAT_LE, from * Float.BYTES, m, ValueLayout.JAVA_FLOAT_UNALIGNED, 0, length);
                MemorySegment.copy(src, FLOAT_LE, (count + from) * Float.BYTES, v, ValueLayout.JAVA_FLOAT_UNALIGNED, 0,
                        length);
            }
            return new Header(h[2], h[3], h[4], h[5], config, loader.array(), lossScale, h[16], h[17],
                    fp8.array());
        }
    }
}
