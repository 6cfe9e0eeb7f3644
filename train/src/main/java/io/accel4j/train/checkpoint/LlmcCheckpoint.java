package io.accel4j.train.checkpoint;

import io.accel4j.core.Bf16;
import io.accel4j.train.io.AtomicWrite;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.io.LlmcHeader;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
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
 * llm.c's model file ({@code gpt2_124M.bin}, {@code gpt2_124M_bf16.bin}, the {@code model_*.bin} checkpoints of
 * {@code train_gpt2.cu}): a header of 256 little-endian int32 —
 * <pre>
 *  [0] magic 20240326   [1] version: 3 = fp32 tensors, 5 = bf16 tensors
 *  [2] max_seq_len      [3] vocab_size V     [4] num_layers L
 *  [5] num_heads NH     [6] channels C       [7] padded_vocab_size Vp     [8..255] 0
 * </pre>
 * then the 16 parameter tensors in {@link ParameterLayout} order, row-major, little-endian, nothing after them.
 *
 * <p>In memory the parameters are always one flat fp32 buffer (native byte order); bf16 files are decoded exactly
 * and written with round-to-nearest-even ({@link Bf16#fromFloat}).
 *
 * <p>Errors: a file that breaks the format is a {@link FileFormatException} (an {@link java.io.IOException}) whose
 * message names the file and the header field or {@code size}; the header is checked in full, including that its
 * sizes imply exactly the file's length, before anything is allocated, so a corrupt header never triggers a huge
 * allocation. Writes are atomic ({@link AtomicWrite}): a crash leaves the previous file or the new one.
 */
public final class LlmcCheckpoint {

    /** {@code header[0]}. */
    public static final int MAGIC = 20240326;
    /** {@code header[1]} for fp32 tensors. */
    public static final int VERSION_FP32 = 3;
    /** {@code header[1]} for bf16 tensors. */
    public static final int VERSION_BF16 = 5;

    private static final ValueLayout.OfFloat FLOAT_LE =
            ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort SHORT_LE =
            ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final int CHUNK_BYTES = 1 << 20;
    private static final String[] FIELD = {
        "magic", "version", "max_seq_len", "vocab_size V", "num_layers L", "num_heads NH", "channels C",
        "padded_vocab_size Vp"};

    /**
     * A checkpoint in memory.
     *
     * @param config  the model shape from the header
     * @param params  {@code config.parameterCount()} fp32 parameters, native byte order, in the caller's arena
     * @param version the file's version: {@link #VERSION_FP32} or {@link #VERSION_BF16}
     */
    public record Loaded(GptConfig config, MemorySegment params, int version) {}

    private LlmcCheckpoint() {}

    /** Reads a checkpoint; the parameters are allocated in {@code arena} (64-byte aligned). */
    public static Loaded read(Path file, Arena arena) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            int[] h = LlmcHeader.read(ch, file);
            GptConfig config = validate(file, h, ch.size());
            int version = h[1];
            long count = config.parameterCount();
            MemorySegment params = arena.allocate(count * Float.BYTES, 64);
            long dataBytes = count * (version == VERSION_FP32 ? Float.BYTES : Short.BYTES);
            try (Arena mapping = Arena.ofConfined()) {
                MemorySegment src = ch.map(FileChannel.MapMode.READ_ONLY, LlmcHeader.BYTES, dataBytes, mapping);
                if (version == VERSION_FP32) {
                    MemorySegment.copy(src, FLOAT_LE, 0, params, ValueLayout.JAVA_FLOAT_UNALIGNED, 0, count);
                } else {
                    for (long i = 0; i < count; i++) {
                        params.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i,
                                Bf16.toFloat(src.getAtIndex(SHORT_LE, i)));
                    }
                }
            }
            return new Loaded(config, params, version);
        }
    }

    /** Reads and checks only the header (and the file size against it): the model shape, nothing allocated. */
    public static GptConfig readConfig(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            return validate(file, LlmcHeader.read(ch, file), ch.size());
        }
    }

    /**
     * Checks a header against the format and the file's size; the config it describes. Order: magic, version, each
     * size &gt;= 1, C % NH, Vp &gt;= V, then the byte size the sizes imply against the actual one.
     */
    static GptConfig validate(Path file, int[] h, long fileSize) throws FileFormatException {
        if (h[0] != MAGIC) {
            throw new FileFormatException(file, field(0), "is " + h[0] + ", expected " + MAGIC
                    + ": not an llm.c model file");
        }
        if (h[1] != VERSION_FP32 && h[1] != VERSION_BF16) {
            throw new FileFormatException(file, field(1), "is " + h[1] + ", expected " + VERSION_FP32 + " (fp32) or "
                    + VERSION_BF16 + " (bf16)");
        }
        for (int i = 2; i <= 7; i++) {
            if (h[i] < 1) {
                throw new FileFormatException(file, field(i), "is " + h[i] + ", must be >= 1");
            }
        }
        int maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vp = h[7];
        if (C % NH != 0) {
            throw new FileFormatException(file, field(6), "is " + C + ", not a multiple of " + field(5) + " " + NH);
        }
        if (Vp < V) {
            throw new FileFormatException(file, field(7), "is " + Vp + ", less than " + field(3) + " " + V);
        }
        int elementBytes = h[1] == VERSION_FP32 ? Float.BYTES : Short.BYTES;
        String sizes = "(max_seq_len " + maxT + ", V " + V + ", Vp " + Vp + ", L " + L + ", NH " + NH + ", C " + C
                + ", version " + h[1] + ": " + elementBytes + " bytes per parameter)";
        long expected;
        long count;
        try {
            count = ParameterLayout.count(maxT, Vp, L, C);
            expected = Math.addExact(LlmcHeader.BYTES, Math.multiplyExact(count, elementBytes));
        } catch (ArithmeticException e) {
            throw new FileFormatException(file, "size", "is " + fileSize + " bytes, but the header " + sizes
                    + " implies more than 2^63 bytes: the header is corrupt");
        }
        if (fileSize != expected) {
            throw new FileFormatException(file, "size", "is " + fileSize + " bytes, but the header " + sizes
                    + " implies " + expected + " (" + LlmcHeader.BYTES + "-byte header + " + count + " parameters): "
                    + (fileSize < expected ? "the file is truncated" : "the file has " + (fileSize - expected)
                    + " extra bytes") + " or the header is corrupt");
        }
        return new GptConfig(maxT, V, Vp, L, NH, C);
    }

    private static String field(int i) {
        return "header[" + i + "] (" + FIELD[i] + ")";
    }

    /**
     * Writes {@code config} and its parameters ({@code config.parameterCount()} fp32 values, native order, read from
     * the start of {@code params}) as {@code version} 3 (fp32) or 5 (bf16, round to nearest even), atomically.
     */
    public static void write(Path file, GptConfig config, MemorySegment params, int version) throws IOException {
        if (version != VERSION_FP32 && version != VERSION_BF16) {
            throw new IllegalArgumentException("version must be " + VERSION_FP32 + " (fp32) or " + VERSION_BF16
                    + " (bf16), got " + version);
        }
        long count = config.parameterCount();
        if (params.byteSize() < count * Float.BYTES) {
            throw new IllegalArgumentException("params has " + params.byteSize() + " bytes, the model " + config
                    + " needs " + count * Float.BYTES + " (" + count + " fp32 parameters)");
        }
        ByteBuffer header = LlmcHeader.encode(MAGIC, version, config.maxT(), config.V(), config.L(), config.NH(),
                config.C(), config.Vp());
        AtomicWrite.write(file, ch -> {
            LlmcHeader.writeFully(ch, header);
            ByteBuffer buf = ByteBuffer.allocateDirect(CHUNK_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            MemorySegment chunk = MemorySegment.ofBuffer(buf);
            int perChunk = CHUNK_BYTES / (version == VERSION_FP32 ? Float.BYTES : Short.BYTES);
            for (long start = 0; start < count; start += perChunk) {
                int n = (int) Math.min(perChunk, count - start);
                if (version == VERSION_FP32) {
                    MemorySegment.copy(params, ValueLayout.JAVA_FLOAT_UNALIGNED, start * Float.BYTES, chunk, FLOAT_LE,
                            0, n);
                    buf.clear().limit(n * Float.BYTES);
                } else {
                    for (int i = 0; i < n; i++) {
                        float x = params.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, start + i);
                        chunk.setAtIndex(SHORT_LE, i, Bf16.fromFloat(x));
                    }
                    buf.clear().limit(n * Short.BYTES);
                }
                LlmcHeader.writeFully(ch, buf);
            }
        });
    }
}
