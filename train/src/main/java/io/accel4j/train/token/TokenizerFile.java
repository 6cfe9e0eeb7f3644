package io.accel4j.train.token;

import io.accel4j.train.io.AtomicWrite;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.io.LlmcHeader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * llm.c's tokenizer file ({@code gpt2_tokenizer.bin}): a header of 256 little-endian int32 — {@code [0]} magic
 * 20240328, {@code [1]} version 1 or 2, {@code [2]} vocabulary size V, {@code [3]} (version 2) the end-of-text token;
 * version 1 means GPT-2's V = 50257 with end-of-text 50256 — then for each token id in order a uint8 length L ≥ 1 and
 * L bytes. It holds no merges: what it reads can only decode. Written as version 2.
 */
public final class TokenizerFile {

    /** {@code header[0]}. */
    public static final int MAGIC = 20240328;
    /** The version written. */
    public static final int VERSION = 2;

    private TokenizerFile() {}

    /** Writes {@code vocab} (every token 1…255 bytes) atomically, version 2. */
    public static void write(Path path, Vocabulary vocab) throws IOException {
        int n = vocab.size();
        byte[][] tokens = new byte[n][];
        long bytes = 0;
        for (int id = 0; id < n; id++) {
            tokens[id] = vocab.bytes(id);
            if (tokens[id].length < 1 || tokens[id].length > 255) {
                throw new IllegalArgumentException("token " + id + " has " + tokens[id].length + " bytes; llm.c's "
                        + "tokenizer file takes 1 to 255");
            }
            bytes += 1 + tokens[id].length;
        }
        ByteBuffer header = LlmcHeader.encode(MAGIC, VERSION, n, vocab.eotToken());
        ByteBuffer body = ByteBuffer.allocate(Math.toIntExact(bytes));
        for (byte[] t : tokens) {
            body.put((byte) t.length).put(t);
        }
        body.flip();
        AtomicWrite.write(path, ch -> {
            LlmcHeader.writeFully(ch, header);
            LlmcHeader.writeFully(ch, body);
        });
    }

    /** Reads and checks a tokenizer file; {@link FileFormatException} naming the field at fault. */
    public static Vocabulary read(Path path) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            int[] h = LlmcHeader.read(ch, path);
            if (h[0] != MAGIC) {
                throw new FileFormatException(path, "header[0] (magic)", "is " + h[0] + ", expected " + MAGIC
                        + ": not an llm.c tokenizer file");
            }
            int version = h[1];
            int v = h[2];
            int eot;
            if (version == 1) {
                if (v != 50257) {
                    throw new FileFormatException(path, "header[2] (vocabulary size)", "is " + v + ", but version "
                            + "1 is GPT-2's 50257");
                }
                eot = 50256;
            } else if (version == 2) {
                eot = h[3];
            } else {
                throw new FileFormatException(path, "header[1] (version)", "is " + version + ", expected 1 or 2");
            }
            if (v < 1 || v > 1 << 20) {
                throw new FileFormatException(path, "header[2] (vocabulary size)", "is " + v
                        + ", expected 1 to " + (1 << 20));
            }
            if (eot < -1 || eot >= v) {
                throw new FileFormatException(path, "header[3] (end-of-text token)", "is " + eot
                        + ", outside the vocabulary [0, " + v + ")");
            }
            long size = ch.size() - LlmcHeader.BYTES;
            if (size > (long) v * 256) {
                throw new FileFormatException(path, "size", "is " + ch.size() + " bytes, more than " + v
                        + " tokens of at most 255 bytes can take");
            }
            ByteBuffer body = ByteBuffer.allocate((int) size);
            while (body.hasRemaining()) {
                if (ch.read(body, LlmcHeader.BYTES + body.position()) < 0) {
                    break;
                }
            }
            body.flip();
            byte[][] table = new byte[v][];
            for (int id = 0; id < v; id++) {
                if (!body.hasRemaining()) {
                    throw new FileFormatException(path, "token " + id, "is missing: the file ends after " + id
                            + " of the " + v + " tokens of header[2] (truncated?)");
                }
                int len = body.get() & 0xFF;
                if (len == 0) {
                    throw new FileFormatException(path, "token " + id, "has length 0; every token has 1 to 255 "
                            + "bytes");
                }
                if (body.remaining() < len) {
                    throw new FileFormatException(path, "token " + id, "has length " + len + " but the file ends "
                            + "after " + body.remaining() + " more bytes (truncated?)");
                }
                table[id] = new byte[len];
                body.get(table[id]);
            }
            if (body.hasRemaining()) {
                throw new FileFormatException(path, "size", "has " + body.remaining() + " bytes after the " + v
                        + " tokens of header[2]");
            }
            return new Table(table, eot, "tokenizer file " + path + " (" + v + " tokens)");
        }
    }

    /** A decode-only vocabulary. */
    private record Table(byte[][] table, int eotToken, String describe) implements Vocabulary {
        @Override
        public int size() {
            return table.length;
        }

        @Override
        public byte[] bytes(int id) {
            if (id < 0 || id >= table.length) {
                throw new IndexOutOfBoundsException("token " + id + " is outside the vocabulary [0, " + table.length
                        + ")");
            }
            return table[id].clone();
        }
    }
}
