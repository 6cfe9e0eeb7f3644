package io.accel4j.cli;

import io.accel4j.train.model.ParameterLayout;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;

/**
 * A well-formed llm.c model file far larger than any machine's memory, header and size in agreement (C = 768,
 * V = 10^8: about 307 GB), written sparse so that it takes no disk space: the input that used to end in an
 * OutOfMemoryError.
 */
public final class HugeModelFile {

    public static final int MAX_T = 64, V = 100_000_000, L = 1, NH = 1, C = 768;

    private HugeModelFile() {}

    public static Path write(Path file) throws IOException {
        ByteBuffer h = ByteBuffer.allocate(1024).order(ByteOrder.LITTLE_ENDIAN);
        h.putInt(20240326).putInt(3).putInt(MAX_T).putInt(V).putInt(L).putInt(NH).putInt(C).putInt(V);
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.write(h.array());
            f.setLength(1024 + 4 * ParameterLayout.count(MAX_T, V, L, C));
        }
        return file;
    }
}
