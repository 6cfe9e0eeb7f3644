package io.accel4j.fit;

import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.ShapeException;
import io.accel4j.train.io.AtomicWrite;
import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A {@link Learner}'s checkpoint: two files in a directory, each written atomically. {@value #MODEL} holds the module
 * tree's parameter table (every tensor's name and shape, in buffer order) and the flat fp32 parameters, so that it
 * can only be read back into a network of the same tree; {@value #STATE} the step, the loss scaler, the FP8 state,
 * the data sources' position and every optimizer state buffer (whole: ZeRO's shards gathered), by name. Little-endian
 * throughout:
 * <pre>
 *   model.bin: "A4NM" int32 version=1, int32 tensors, per tensor {u16 name length, UTF-8 name, int32 rank,
 *              int64 dims…}, int64 count, fp32 params[count]
 *   state.bin: "A4NS" int32 version=2, int32 step, fp32 loss scale, int32 clean steps, int32 skipped steps,
 *              int64 samples consumed by all replicas together (−1: the sources cannot resume), int32 FP8 bytes,
 *              bytes, int32 buffers, per buffer {u16 name length, name, int64 count, fp32[count]}
 * </pre>
 * Version 1 of state.bin (still read) held the batches each rank had read instead of the samples: it resumes on the
 * data only under the data-parallel width and batch it was saved with.
 */
final class LearnerCheckpoint {

    static final String MODEL = "model.bin";
    static final String STATE = "state.bin";
    private static final int MODEL_MAGIC = 0x4D4E3441; // "A4NM"
    private static final int STATE_MAGIC = 0x534E3441; // "A4NS"
    private static final int VERSION = 1;
    /** state.bin's version: 2 counts the data position in samples (all replicas), 1 in batches per rank. */
    private static final int STATE_VERSION = 2;

    /**
     * What {@value #STATE} holds besides the optimizer buffers: {@code position} the samples consumed by all replicas
     * (null: the sources cannot resume), or for a version-1 file {@code legacyBatches} each rank had read (else −1).
     */
    record State(int step, float lossScale, int cleanSteps, int skippedSteps, DataPosition position,
                 long legacyBatches, byte[] fp8) {

        /** A state to write: {@code position} null when the sources cannot resume. */
        State(int step, float lossScale, int cleanSteps, int skippedSteps, DataPosition position, byte[] fp8) {
            this(step, lossScale, cleanSteps, skippedSteps, position, -1, fp8);
        }

        /**
         * The batches of {@code B} samples each of {@code replicas} replicas skips to continue on the same data (0 when
         * the sources could not resume).
         *
         * @throws IllegalArgumentException when the layout cannot continue on the same data
         */
        long batchesPerReplica(int B, int replicas) {
            return position != null ? position.batchesPerReplica(B, replicas) : Math.max(0, legacyBatches);
        }
    }

    private LearnerCheckpoint() {}

    /** Writes {@value #MODEL} from {@code params} (host memory, the table's count of fp32). */
    static void writeModel(Path dir, ParameterTable table, MemorySegment params) throws IOException {
        Files.createDirectories(dir);
        AtomicWrite.write(dir.resolve(MODEL), ch -> {
            List<ParameterTable.Entry> entries = table.inBufferOrder();
            ByteBuffer head = ByteBuffer.allocate(headerBytes(entries)).order(ByteOrder.LITTLE_ENDIAN);
            head.putInt(MODEL_MAGIC).putInt(VERSION).putInt(entries.size());
            for (ParameterTable.Entry e : entries) {
                putName(head, e.name());
                long[] dims = e.dims();
                head.putInt(dims.length);
                for (long d : dims) {
                    head.putLong(d);
                }
            }
            head.putLong(table.count());
            writeFully(ch, head.flip());
            writeFully(ch, params.asSlice(0, table.fp32Bytes()).asByteBuffer().order(ByteOrder.LITTLE_ENDIAN));
        });
    }

    /**
     * Reads {@value #MODEL} into {@code params} (host memory), after checking that it is this table's tree.
     *
     * @throws ShapeException      naming the first tensor whose name or shape differs, and both
     * @throws FileFormatException for a file that is not a well-formed checkpoint
     */
    static void readModel(Path dir, ParameterTable table, MemorySegment params) throws IOException {
        Path file = dir.resolve(MODEL);
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            ByteBuffer b = ByteBuffer.allocate((int) Math.min(ch.size(), 1 << 20)).order(ByteOrder.LITTLE_ENDIAN);
            readFully(ch, 0, b); // the header (a tree of up to ~20,000 tensors)
            b.flip();
            expect(file, "magic", b.getInt(), MODEL_MAGIC);
            expect(file, "version", b.getInt(), VERSION);
            List<ParameterTable.Entry> mine = table.inBufferOrder();
            int n = b.getInt();
            for (int i = 0; i < Math.max(n, mine.size()); i++) {
                String name = i < n ? getName(file, b) : null;
                long[] dims = null;
                if (i < n) {
                    int rank = b.getInt();
                    if (rank < 0 || rank > 8) {
                        throw new FileFormatException(file, "tensor " + i + " rank", "is " + rank);
                    }
                    dims = new long[rank];
                    for (int k = 0; k < rank; k++) {
                        dims[k] = b.getLong();
                    }
                }
                ParameterTable.Entry e = i < mine.size() ? mine.get(i) : null;
                if (e == null || name == null || !e.name().equals(name) || !Arrays.equals(e.dims(), dims)) {
                    throw new ShapeException(file + " is for another module tree: it has parameter "
                            + (name == null ? "(none)" : name + Arrays.toString(dims)) + " where this network has "
                            + (e == null ? "(none)" : e.name() + Arrays.toString(e.dims())));
                }
            }
            long count = b.getLong();
            expect(file, "parameter count", count, table.count());
            if (ch.size() != b.position() + table.fp32Bytes()) {
                throw new FileFormatException(file, "size", "is " + ch.size() + " bytes, the header and "
                        + table.count() + " fp32 parameters make " + (b.position() + table.fp32Bytes()));
            }
            readFully(ch, b.position(), params.asSlice(0, table.fp32Bytes()).asByteBuffer());
        } catch (java.nio.BufferUnderflowException e) {
            throw new FileFormatException(file, "header", "is truncated");
        }
    }

    /** Writes {@value #STATE}: {@code buffers} are host segments of whole vectors, by name. */
    static void writeState(Path dir, State s, Map<String, MemorySegment> buffers) throws IOException {
        Files.createDirectories(dir);
        AtomicWrite.write(dir.resolve(STATE), ch -> {
            ByteBuffer head = ByteBuffer.allocate(40 + s.fp8().length).order(ByteOrder.LITTLE_ENDIAN);
            head.putInt(STATE_MAGIC).putInt(STATE_VERSION).putInt(s.step()).putFloat(s.lossScale())
                    .putInt(s.cleanSteps()).putInt(s.skippedSteps())
                    .putLong(s.position() == null ? -1 : s.position().samples()).putInt(s.fp8().length).put(s.fp8())
                    .putInt(buffers.size());
            writeFully(ch, head.flip());
            for (Map.Entry<String, MemorySegment> e : buffers.entrySet()) {
                ByteBuffer h = ByteBuffer.allocate(2 + e.getKey().getBytes(StandardCharsets.UTF_8).length + 8)
                        .order(ByteOrder.LITTLE_ENDIAN);
                putName(h, e.getKey());
                h.putLong(e.getValue().byteSize() / Float.BYTES);
                writeFully(ch, h.flip());
                writeFully(ch, e.getValue().asByteBuffer());
            }
        });
    }

    /**
     * Reads {@value #STATE}: fills {@code buffers} (host segments of whole vectors, by name; the file must have
     * exactly these names and lengths) and returns the rest.
     */
    static State readState(Path dir, Map<String, MemorySegment> buffers) throws IOException {
        Path file = dir.resolve(STATE);
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ); Arena a = Arena.ofConfined()) {
            long size = ch.size();
            MemorySegment all = a.allocate(size);
            ByteBuffer b = all.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
            readFully(ch, 0, b);
            b.flip();
            expect(file, "magic", b.getInt(), STATE_MAGIC);
            int version = b.getInt();
            if (version != 1) {
                expect(file, "version", version, STATE_VERSION);
            }
            int step = b.getInt();
            float scale = b.getFloat();
            int clean = b.getInt(), skipped = b.getInt();
            long batches = b.getLong();
            int fp8Len = b.getInt();
            if (step < 0 || fp8Len < 0 || fp8Len > b.remaining()) {
                throw new FileFormatException(file, "header", "is corrupt (step " + step + ", FP8 bytes " + fp8Len
                        + ")");
            }
            byte[] fp8 = new byte[fp8Len];
            b.get(fp8);
            int n = b.getInt();
            Map<String, MemorySegment> left = new LinkedHashMap<>(buffers);
            for (int i = 0; i < n; i++) {
                String name = getName(file, b);
                long count = b.getLong();
                MemorySegment dst = left.remove(name);
                if (dst == null || dst.byteSize() != count * Float.BYTES) {
                    throw new FileFormatException(file, "optimizer state '" + name + "'", dst == null
                            ? "is not this optimizer's (it has " + buffers.keySet() + ")"
                            : "holds " + count + " values, this optimizer " + dst.byteSize() / Float.BYTES);
                }
                MemorySegment.copy(all, ValueLayout.JAVA_BYTE, b.position(), dst, ValueLayout.JAVA_BYTE, 0,
                        dst.byteSize());
                b.position((int) (b.position() + dst.byteSize()));
            }
            if (!left.isEmpty()) {
                throw new FileFormatException(file, "optimizer state", "lacks " + left.keySet()
                        + ": it was written by another optimizer");
            }
            return version == 1 ? new State(step, scale, clean, skipped, null, batches, fp8)
                    : new State(step, scale, clean, skipped, batches < 0 ? null : new DataPosition(batches), -1, fp8);
        } catch (java.nio.BufferUnderflowException | IndexOutOfBoundsException e) {
            throw new FileFormatException(file, "contents", "are truncated");
        }
    }

    private static int headerBytes(List<ParameterTable.Entry> entries) {
        int n = 12 + 8;
        for (ParameterTable.Entry e : entries) {
            n += 2 + e.name().getBytes(StandardCharsets.UTF_8).length + 4 + 8 * e.dims().length;
        }
        return n;
    }

    private static void putName(ByteBuffer b, String name) {
        byte[] utf8 = name.getBytes(StandardCharsets.UTF_8);
        b.putShort((short) utf8.length).put(utf8);
    }

    private static String getName(Path file, ByteBuffer b) throws FileFormatException {
        int len = Short.toUnsignedInt(b.getShort());
        if (len > b.remaining()) {
            throw new FileFormatException(file, "a name", "runs past the end of the file");
        }
        byte[] utf8 = new byte[len];
        b.get(utf8);
        return new String(utf8, StandardCharsets.UTF_8);
    }

    private static void expect(Path file, String field, long got, long want) throws FileFormatException {
        if (got != want) {
            throw new FileFormatException(file, field, "is " + got + ", expected " + want);
        }
    }

    private static void writeFully(FileChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }

    private static void readFully(FileChannel ch, long at, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            if (ch.read(b, at + b.position()) < 0) {
                throw new IOException("unexpected end of file");
            }
        }
    }
}
