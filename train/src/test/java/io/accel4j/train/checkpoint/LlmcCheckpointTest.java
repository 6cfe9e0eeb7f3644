package io.accel4j.train.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.Bf16;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.ParameterLayout.Param;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LlmcCheckpointTest {

    /** maxT 2, V 3, Vp 4, L 1, NH 1, C 2: 90 parameters (counted by hand in {@link #readsAFileBuiltByHand}). */
    private static final GptConfig SMALL = new GptConfig(2, 3, 4, 1, 1, 2);
    private static final long SEED = 1234;

    @TempDir
    Path dir;

    @Test
    void fp32RoundTripsExactly() throws IOException {
        GptConfig c = new GptConfig(8, 11, 16, 2, 2, 6);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment params = random(arena, c.parameterCount(), SEED);
            params.setAtIndex(ValueLayout.JAVA_FLOAT, 0, Float.NaN);
            params.setAtIndex(ValueLayout.JAVA_FLOAT, 1, -0f);
            params.setAtIndex(ValueLayout.JAVA_FLOAT, 2, Float.MIN_VALUE);
            Path f = dir.resolve("model.bin");
            LlmcCheckpoint.write(f, c, params, LlmcCheckpoint.VERSION_FP32);

            assertThat(Files.size(f)).isEqualTo(1024 + 4 * c.parameterCount());
            LlmcCheckpoint.Loaded l = LlmcCheckpoint.read(f, arena);
            assertThat(l.config()).isEqualTo(c);
            assertThat(l.version()).isEqualTo(3);
            assertThat(l.params().byteSize()).isEqualTo(4 * c.parameterCount());
            assertThat(l.params().mismatch(params)).as("seed %d", SEED).isEqualTo(-1);
            assertThat(LlmcCheckpoint.readConfig(f)).isEqualTo(c);
        }
    }

    @Test
    void bf16IsExactForBf16ValuesAndRoundsToNearestEvenOtherwise() throws IOException {
        GptConfig c = new GptConfig(4, 5, 8, 1, 2, 4);
        long n = c.parameterCount();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment exact = arena.allocate(4 * n);
            MemorySegment any = random(arena, n, SEED);
            for (long i = 0; i < n; i++) {
                float x = any.getAtIndex(ValueLayout.JAVA_FLOAT, i);
                exact.setAtIndex(ValueLayout.JAVA_FLOAT, i, Bf16.toFloat(Bf16.fromFloat(x)));
            }
            Path f = dir.resolve("model_bf16.bin");
            LlmcCheckpoint.write(f, c, exact, LlmcCheckpoint.VERSION_BF16);
            assertThat(Files.size(f)).isEqualTo(1024 + 2 * n);
            LlmcCheckpoint.Loaded l = LlmcCheckpoint.read(f, arena);
            assertThat(l.version()).isEqualTo(5);
            assertThat(l.params().mismatch(exact)).isEqualTo(-1);

            // arbitrary floats come back as their round-to-nearest-even bf16
            LlmcCheckpoint.write(f, c, any, LlmcCheckpoint.VERSION_BF16);
            assertThat(LlmcCheckpoint.read(f, arena).params().mismatch(exact)).isEqualTo(-1);
        }
    }

    /** A file put together byte by byte, independently of the writer. */
    @Test
    void readsAFileBuiltByHand() throws IOException {
        // wte 4x2=8, wpe 2x2=4, ln1w 2, ln1b 2, qkvw 6x2=12, qkvb 6, attprojw 2x2=4, attprojb 2, ln2w 2, ln2b 2,
        // fcw 8x2=16, fcb 8, fcprojw 2x8=16, fcprojb 2, lnfw 2, lnfb 2: 90
        int count = 90;
        ByteBuffer b = ByteBuffer.allocate(1024 + 4 * count).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(20240326).putInt(3).putInt(2).putInt(3).putInt(1).putInt(1).putInt(2).putInt(4);
        b.position(1024);
        for (int i = 0; i < count; i++) {
            b.putFloat(i * 0.5f - 3);
        }
        Path f = dir.resolve("hand.bin");
        Files.write(f, b.array());
        try (Arena arena = Arena.ofConfined()) {
            LlmcCheckpoint.Loaded l = LlmcCheckpoint.read(f, arena);
            assertThat(l.config()).isEqualTo(SMALL);
            ParameterLayout layout = new ParameterLayout(l.config());
            assertThat(layout.count()).isEqualTo(count);
            assertThat(layout.offset(Param.QKVW)).isEqualTo(8 + 4 + 2 + 2);
            assertThat(layout.offset(Param.LNFB)).isEqualTo(88);
            for (int i = 0; i < count; i++) {
                assertThat(l.params().getAtIndex(ValueLayout.JAVA_FLOAT, i)).isEqualTo(i * 0.5f - 3);
            }
        }
        // bf16: 0x3F80 = 1.0, 0xC040 = -3.0, 0x0001 = smallest subnormal bf16
        ByteBuffer h = ByteBuffer.allocate(1024 + 2 * count).order(ByteOrder.LITTLE_ENDIAN);
        h.putInt(20240326).putInt(5).putInt(2).putInt(3).putInt(1).putInt(1).putInt(2).putInt(4);
        h.position(1024);
        h.putShort((short) 0x3F80).putShort((short) 0xC040).putShort((short) 0x0001);
        Files.write(f, h.array());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = LlmcCheckpoint.read(f, arena).params();
            assertThat(p.getAtIndex(ValueLayout.JAVA_FLOAT, 0)).isEqualTo(1f);
            assertThat(p.getAtIndex(ValueLayout.JAVA_FLOAT, 1)).isEqualTo(-3f);
            assertThat(p.getAtIndex(ValueLayout.JAVA_FLOAT, 2)).isEqualTo(0x1p-133f);
            assertThat(p.getAtIndex(ValueLayout.JAVA_FLOAT, 3)).isEqualTo(0f);
        }
    }

    @Test
    void corruptHeadersAndSizesAreRefusedNamingFileAndField() throws IOException {
        int[] ok = {20240326, 3, 2, 3, 1, 1, 2, 4};
        long body = 4 * 90;
        expect(header(ok, body), null, null); // the baseline reads
        expect(header(with(ok, 0, 7), body), "header[0] (magic)", "is 7, expected 20240326");
        expect(header(with(ok, 1, 4), body), "header[1] (version)", "is 4, expected 3 (fp32) or 5 (bf16)");
        expect(header(with(ok, 2, 0), body), "header[2] (max_seq_len)", "is 0, must be >= 1");
        expect(header(with(ok, 3, -1), body), "header[3] (vocab_size V)", "is -1");
        expect(header(with(ok, 6, 3, 5, 2), body), "header[6] (channels C)", "not a multiple of header[5]");
        expect(header(with(ok, 7, 2), body), "header[7] (padded_vocab_size Vp)", "less than header[3]");
        expect(header(ok, body - 1), "size", "the file is truncated");
        expect(header(ok, body + 3), "size", "3 extra bytes");
        expect(header(with(ok, 1, 5), body), "size", "2 bytes per parameter"); // a bf16 header on fp32 data
        expect(Arrays.copyOf(header(ok, body), 1000), "header", "fewer than the 1024-byte header");
    }

    /** C = 2^30 and L = 2^20 imply ~2^84 bytes: refused from the header alone, nothing allocated. */
    @Test
    void absurdSizesAreRefusedBeforeAnyAllocation() throws IOException {
        int[] h = {20240326, 3, 1024, 50257, 1, 1, 1 << 30, 50304};
        expect(header(h, 4 * 90), "size", "implies");
        int[] huge = {20240326, 3, 1024, 50257, 1 << 20, 1, 1 << 30, 50304};
        expect(header(huge, 4 * 90), "size", "more than 2^63 bytes");
    }

    private void expect(byte[] content, String field, String what) throws IOException {
        Path f = dir.resolve("bad.bin");
        Files.write(f, content);
        AtomicLong allocated = new AtomicLong();
        try (Arena real = Arena.ofConfined()) {
            Arena counting = new Arena() {
                @Override
                public MemorySegment allocate(long byteSize, long byteAlignment) {
                    allocated.addAndGet(byteSize);
                    return real.allocate(byteSize, byteAlignment);
                }

                @Override
                public MemorySegment.Scope scope() {
                    return real.scope();
                }

                @Override
                public void close() {
                    throw new UnsupportedOperationException();
                }
            };
            if (field == null) {
                assertThat(LlmcCheckpoint.read(f, counting).config()).isEqualTo(SMALL);
                return;
            }
            assertThatThrownBy(() -> LlmcCheckpoint.read(f, counting))
                    .isInstanceOf(FileFormatException.class)
                    .hasMessageStartingWith(f + ": " + field + " ")
                    .hasMessageContaining(what);
            assertThat(allocated.get()).as("bytes allocated before refusing").isZero();
        }
    }

    @Test
    void writesAreAtomicAndArgumentsChecked() throws IOException {
        Path f = dir.resolve("ckpt.bin");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = random(arena, 90, SEED);
            LlmcCheckpoint.write(f, SMALL, p, 3);
            LlmcCheckpoint.write(f, SMALL, p, 5); // replaces
            assertThat(LlmcCheckpoint.read(f, arena).version()).isEqualTo(5);
            try (Stream<Path> files = Files.list(dir)) {
                assertThat(files.map(x -> x.getFileName().toString())).containsExactly("ckpt.bin");
            }
            assertThatThrownBy(() -> LlmcCheckpoint.write(f, SMALL, p, 4)).hasMessageContaining("version");
            assertThatThrownBy(() -> LlmcCheckpoint.write(f, SMALL, p.asSlice(0, 89 * 4), 3))
                    .hasMessageContaining("needs 360");
            assertThat(LlmcCheckpoint.read(f, arena).version()).as("failed writes leave the file").isEqualTo(5);
        }
    }

    private static MemorySegment random(Arena arena, long n, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        MemorySegment s = arena.allocate(4 * n, 64);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) rnd.nextGaussian());
        }
        return s;
    }

    private static int[] with(int[] h, int... indexValuePairs) {
        int[] c = h.clone();
        for (int i = 0; i < indexValuePairs.length; i += 2) {
            c[indexValuePairs[i]] = indexValuePairs[i + 1];
        }
        return c;
    }

    /** A header with the given leading fields and {@code body} zero bytes after it. */
    private static byte[] header(int[] fields, long body) {
        ByteBuffer b = ByteBuffer.allocate((int) (1024 + body)).order(ByteOrder.LITTLE_ENDIAN);
        for (int x : fields) {
            b.putInt(x);
        }
        return b.array();
    }
}
