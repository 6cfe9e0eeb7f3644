package io.accel4j.train.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link TrainState} version 3 (with the FP8 state) round trips; versions 2 and 1 are still read. */
class TrainStateTest {

    private static final GptConfig CONFIG = new GptConfig(8, 11, 16, 2, 2, 8);

    @TempDir
    Path tmp;

    @Test
    void version3CarriesTheFp8StateBesideTheMoments() throws IOException {
        byte[] fp8 = {1, 2, 3, 4, 5, 6, 7};
        byte[] loader = {9, 8, 7};
        Path file = tmp.resolve("state.bin");
        try (Arena arena = Arena.ofConfined()) {
            long n = CONFIG.parameterCount();
            MemorySegment m = ramp(arena, n, 1f), v = ramp(arena, n, -2f);
            TrainState.write(file, new TrainState.Header(7, 2, 5, 3, CONFIG, loader, 1024f, 4, 2, fp8), m, v);
            MemorySegment m2 = arena.allocate(n * 4), v2 = arena.allocate(n * 4);
            TrainState.Header h = TrainState.read(file, CONFIG, m2, v2);
            assertThat(h.fp8State()).containsExactly(fp8);
            assertThat(h.loaderState()).containsExactly(loader);
            assertThat(h.step()).isEqualTo(7);
            assertThat(h.lossScale()).isEqualTo(1024f);
            assertThat(m2.toArray(ValueLayout.JAVA_FLOAT)).containsExactly(m.toArray(ValueLayout.JAVA_FLOAT));
            assertThat(v2.toArray(ValueLayout.JAVA_FLOAT)).containsExactly(v.toArray(ValueLayout.JAVA_FLOAT));
            assertThat(header(file, 1)).isEqualTo(TrainState.VERSION).isEqualTo(3);
            assertThat(header(file, 18)).isEqualTo(fp8.length);
        }
    }

    @Test
    void versions2And1AreReadWithoutFp8State() throws IOException {
        Path file = tmp.resolve("old.bin");
        try (Arena arena = Arena.ofConfined()) {
            long n = CONFIG.parameterCount();
            MemorySegment m = ramp(arena, n, 0.5f), v = ramp(arena, n, 3f);
            // a file with no FP8 state and no loss scale has the older versions' layout: only the version differs
            TrainState.write(file, new TrainState.Header(3, 2, 5, 1, CONFIG, new byte[] {4}), m, v);
            for (int version : new int[] {2, 1}) {
                setHeader(file, 1, version);
                MemorySegment m2 = arena.allocate(n * 4), v2 = arena.allocate(n * 4);
                TrainState.Header h = TrainState.read(file, CONFIG, m2, v2);
                assertThat(h.fp8State()).as("version %d", version).isEmpty();
                assertThat(h.step()).isEqualTo(3);
                assertThat(v2.toArray(ValueLayout.JAVA_FLOAT)).containsExactly(v.toArray(ValueLayout.JAVA_FLOAT));
            }
            setHeader(file, 1, 4);
            assertThatThrownBy(() -> TrainState.read(file, CONFIG, m, v)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("header[1] (version) is 4, expected 3 (or 2 or 1)");
            setHeader(file, 1, 3);
            setHeader(file, 18, -1);
            assertThatThrownBy(() -> TrainState.read(file, CONFIG, m, v)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("header[18] (FP8 state bytes) is -1");
            setHeader(file, 18, 5);
            assertThatThrownBy(() -> TrainState.read(file, CONFIG, m, v)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("truncated or corrupt");
        }
    }

    private static MemorySegment ramp(Arena arena, long n, float step) {
        MemorySegment s = arena.allocate(n * 4);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, i * step);
        }
        return s;
    }

    private static int header(Path file, int field) throws IOException {
        return ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN).getInt(field * 4);
    }

    private static void setHeader(Path file, int field, int value) throws IOException {
        byte[] b = Files.readAllBytes(file);
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putInt(field * 4, value);
        Files.write(file, b);
    }
}
