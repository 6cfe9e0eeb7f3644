package io.accel4j.train.io;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;

/**
 * The header every llm.c binary file starts with: 256 little-endian int32 ({@value #BYTES} bytes), field 0 the magic
 * number, field 1 the version, the rest format-specific and zero where unused.
 */
public final class LlmcHeader {

    /** Header fields. */
    public static final int INTS = 256;
    /** Header bytes. */
    public static final int BYTES = INTS * Integer.BYTES;

    private LlmcHeader() {}

    /** Reads the header at position 0; a file shorter than a header is a {@link FileFormatException}. */
    public static int[] read(FileChannel ch, Path file) throws IOException {
        long size = ch.size();
        if (size < BYTES) {
            throw new FileFormatException(file, "header", "is truncated: the file has " + size
                    + " bytes, fewer than the " + BYTES + "-byte header (256 int32)");
        }
        ByteBuffer buf = ByteBuffer.allocate(BYTES).order(ByteOrder.LITTLE_ENDIAN);
        while (buf.hasRemaining()) {
            if (ch.read(buf, buf.position()) < 0) {
                throw new FileFormatException(file, "header", "is truncated while reading");
            }
        }
        buf.flip();
        int[] fields = new int[INTS];
        buf.asIntBuffer().get(fields);
        return fields;
    }

    /** The fields as the {@value #BYTES} bytes to write, little-endian; fields beyond the array are zero. */
    public static ByteBuffer encode(int... fields) {
        if (fields.length > INTS) {
            throw new IllegalArgumentException("a header has " + INTS + " fields, got " + fields.length);
        }
        ByteBuffer buf = ByteBuffer.allocate(BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int f : fields) {
            buf.putInt(f);
        }
        buf.clear();
        return buf;
    }

    /** Writes the whole buffer at the channel's position. */
    public static void writeFully(FileChannel ch, ByteBuffer buf) throws IOException {
        while (buf.hasRemaining()) {
            ch.write(buf);
        }
    }
}
