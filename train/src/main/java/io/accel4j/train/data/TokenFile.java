package io.accel4j.train.data;

import io.accel4j.train.io.AtomicWrite;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.io.LlmcHeader;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ShortBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * llm.c's token file ({@code fineweb_train_000001.bin}, {@code tiny_shakespeare_val.bin}, what {@code prepare}
 * writes): a header of 256 little-endian int32 — {@code [0]} magic 20240520, {@code [1]} version 1, {@code [2]} token
 * count N ≥ 1, the rest 0 — then N little-endian uint16 tokens; the file is exactly {@code 1024 + 2N} bytes.
 *
 * <p>{@link #open} memory-maps the file (FFM, in a shared arena so that a loader thread may read it) and checks the
 * header and the size; {@link #close} unmaps it. Close the readers (a {@link DataLoader}) first. Format errors are
 * {@link FileFormatException}s naming the file and the field.
 */
public final class TokenFile implements AutoCloseable {

    /** {@code header[0]}. */
    public static final int MAGIC = 20240520;
    /** {@code header[1]}. */
    public static final int VERSION = 1;
    /** The largest token a file can hold (uint16). */
    public static final int MAX_TOKEN = 0xFFFF;

    private static final ValueLayout.OfShort SHORT_LE =
            ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final Path path;
    private final Arena arena;
    private final MemorySegment tokens;
    private final long count;

    private TokenFile(Path path, Arena arena, MemorySegment tokens, long count) {
        this.path = path;
        this.arena = arena;
        this.tokens = tokens;
        this.count = count;
    }

    /** Opens, checks and maps a token file. */
    public static TokenFile open(Path path) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            int[] h = LlmcHeader.read(ch, path);
            long size = ch.size();
            if (h[0] != MAGIC) {
                throw new FileFormatException(path, "header[0] (magic)", "is " + h[0] + ", expected " + MAGIC
                        + ": not an llm.c token file");
            }
            if (h[1] != VERSION) {
                throw new FileFormatException(path, "header[1] (version)", "is " + h[1] + ", expected " + VERSION);
            }
            long n = h[2];
            if (n < 1) {
                throw new FileFormatException(path, "header[2] (token count)", "is " + n + ", must be >= 1");
            }
            long expected = LlmcHeader.BYTES + 2 * n;
            if (size != expected) {
                throw new FileFormatException(path, "size", "is " + size + " bytes, but header[2] (token count) "
                        + n + " implies " + expected + " (1024-byte header + 2 bytes per token): "
                        + (size < expected ? "the file is truncated" : "the file has " + (size - expected)
                        + " extra bytes") + " or the header is corrupt");
            }
            Arena arena = Arena.ofShared();
            try {
                MemorySegment seg = ch.map(FileChannel.MapMode.READ_ONLY, LlmcHeader.BYTES, 2 * n, arena);
                return new TokenFile(path, arena, seg, n);
            } catch (IOException | RuntimeException e) {
                arena.close();
                throw e;
            }
        }
    }

    /** The file. */
    public Path path() {
        return path;
    }

    /** The number of tokens, N. */
    public long size() {
        return count;
    }

    /** Token {@code i}, {@code 0 <= i < N}, as an unsigned value in [0, 65535]. */
    public int token(long i) {
        if (i < 0 || i >= count) {
            throw new IndexOutOfBoundsException("token " + i + " of " + path + " (" + count + " tokens)");
        }
        return Short.toUnsignedInt(tokens.getAtIndex(SHORT_LE, i));
    }

    /** Copies tokens {@code [start, start + n)} into {@code dst[0..n)}, unsigned. */
    public void read(long start, int[] dst, int n) {
        if (start < 0 || n < 0 || start > count - n || n > dst.length) {
            throw new IndexOutOfBoundsException("tokens [" + start + ", " + (start + n) + ") of " + path + " ("
                    + count + " tokens) into an array of " + dst.length);
        }
        long off = start * 2;
        for (int i = 0; i < n; i++) {
            dst[i] = Short.toUnsignedInt(tokens.get(SHORT_LE, off + 2L * i));
        }
    }

    /**
     * Checks every token is below {@code V} (a model's vocabulary size); a {@link FileFormatException} naming the
     * first position that is not.
     */
    public void checkVocabulary(int V) throws FileFormatException {
        if (V < 1) {
            throw new IllegalArgumentException("V must be >= 1, got " + V);
        }
        for (long i = 0; i < count; i++) {
            int t = Short.toUnsignedInt(tokens.getAtIndex(SHORT_LE, i));
            if (t >= V) {
                throw new FileFormatException(path, "token " + i, "is " + t + ", outside the model's vocabulary [0, "
                        + V + ")");
            }
        }
    }

    /** Unmaps the file; idempotent. */
    @Override
    public void close() {
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }

    /** Writes {@code tokens} (each in [0, 65535], at least one) as a token file, atomically. */
    public static void write(Path path, int[] tokens) throws IOException {
        checkCount(tokens.length);
        for (int i = 0; i < tokens.length; i++) {
            if (tokens[i] < 0 || tokens[i] > MAX_TOKEN) {
                throw new IllegalArgumentException("token " + i + " is " + tokens[i] + ", outside [0, " + MAX_TOKEN
                        + "]");
            }
        }
        writeTokens(path, tokens.length, (buf, start, n) -> {
            for (int i = 0; i < n; i++) {
                buf.putShort((short) tokens[start + i]);
            }
        });
    }

    /** Writes the remaining tokens of {@code tokens} (read as unsigned 16-bit) as a token file, atomically. */
    public static void write(Path path, ShortBuffer tokens) throws IOException {
        ShortBuffer src = tokens.duplicate();
        checkCount(src.remaining());
        int base = src.position();
        writeTokens(path, src.remaining(), (buf, start, n) -> {
            for (int i = 0; i < n; i++) {
                buf.putShort(src.get(base + start + i));
            }
        });
    }

    private static void checkCount(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("a token file holds at least one token, got none");
        }
    }

    private interface Chunk {
        void put(ByteBuffer buf, int start, int n);
    }

    private static void writeTokens(Path path, int n, Chunk chunk) throws IOException {
        ByteBuffer header = LlmcHeader.encode(MAGIC, VERSION, n);
        AtomicWrite.write(path, ch -> {
            LlmcHeader.writeFully(ch, header);
            ByteBuffer buf = ByteBuffer.allocate(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
            int perChunk = buf.capacity() / 2;
            for (int start = 0; start < n; start += perChunk) {
                int m = Math.min(perChunk, n - start);
                buf.clear();
                chunk.put(buf, start, m);
                buf.flip();
                LlmcHeader.writeFully(ch, buf);
            }
        });
    }
}
