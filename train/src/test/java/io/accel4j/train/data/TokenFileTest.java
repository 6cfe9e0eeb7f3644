package io.accel4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ShortBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenFileTest {

    @TempDir
    Path dir;

    @Test
    void roundTripsIntArraysIncludingTheLargestTokens() throws IOException {
        long seed = 11;
        SplittableRandom rnd = new SplittableRandom(seed);
        int[] tokens = rnd.ints(70_001, 0, 65536).toArray(); // more than one 64 KiB write chunk
        tokens[0] = 65535;
        tokens[1] = 0;
        Path f = dir.resolve("t.bin");
        TokenFile.write(f, tokens);

        assertThat(Files.size(f)).isEqualTo(1024 + 2L * tokens.length);
        try (TokenFile tf = TokenFile.open(f)) {
            assertThat(tf.size()).isEqualTo(tokens.length);
            assertThat(tf.path()).isEqualTo(f);
            for (int i = 0; i < tokens.length; i++) {
                assertThat(tf.token(i)).as("token %d (seed %d)", i, seed).isEqualTo(tokens[i]);
            }
            int[] window = new int[10];
            tf.read(100, window, 10);
            assertThat(window).containsExactly(Arrays.copyOfRange(tokens, 100, 110));
        }
    }

    @Test
    void roundTripsAShortBufferFromItsPosition() throws IOException {
        ShortBuffer buf = ShortBuffer.wrap(new short[] {9, 8, (short) 40000, 7, 6});
        buf.position(1);
        Path f = dir.resolve("s.bin");
        TokenFile.write(f, buf);
        assertThat(buf.position()).as("the caller's buffer is left alone").isEqualTo(1);
        try (TokenFile tf = TokenFile.open(f)) {
            assertThat(new int[] {tf.token(0), tf.token(1), tf.token(2), tf.token(3)}).containsExactly(8, 40000, 7, 6);
        }
    }

    /** The bytes on disk, built independently of the writer. */
    @Test
    void readsAFileBuiltByHand() throws IOException {
        Path f = dir.resolve("hand.bin");
        Files.write(f, file(20240520, 1, 3, new short[] {1, 258, (short) 0xFFFF}));
        try (TokenFile tf = TokenFile.open(f)) {
            assertThat(tf.size()).isEqualTo(3);
            assertThat(new int[] {tf.token(0), tf.token(1), tf.token(2)}).containsExactly(1, 258, 65535);
        }
        // and the writer writes exactly those bytes
        Path g = dir.resolve("written.bin");
        TokenFile.write(g, new int[] {1, 258, 65535});
        assertThat(Files.readAllBytes(g)).isEqualTo(Files.readAllBytes(f));
    }

    @Test
    void corruptFilesAreRefusedNamingFileAndField() throws IOException {
        short[] three = {1, 2, 3};
        expect(file(12345, 1, 3, three), "header[0] (magic)", "is 12345, expected 20240520");
        expect(file(20240520, 2, 3, three), "header[1] (version)", "is 2, expected 1");
        expect(file(20240520, 1, 0, new short[0]), "header[2] (token count)", "is 0, must be >= 1");
        expect(file(20240520, 1, -5, three), "header[2] (token count)", "is -5");
        byte[] ok = file(20240520, 1, 3, three);
        expect(Arrays.copyOf(ok, ok.length - 1), "size", "truncated");
        expect(Arrays.copyOf(ok, ok.length + 1), "size", "1 extra bytes");
        expect(Arrays.copyOf(ok, 1000), "header", "fewer than the 1024-byte header");
        // an absurd count is a size mismatch, found before anything is mapped
        expect(file(20240520, 1, Integer.MAX_VALUE, three), "size", "implies " + (1024 + 2L * Integer.MAX_VALUE));
    }

    private void expect(byte[] content, String field, String what) throws IOException {
        Path f = dir.resolve("bad.bin");
        Files.write(f, content);
        assertThatThrownBy(() -> TokenFile.open(f))
                .isInstanceOf(FileFormatException.class)
                .hasMessageStartingWith(f + ": " + field + " ")
                .hasMessageContaining(what)
                .satisfies(e -> assertThat(((FileFormatException) e).field()).isEqualTo(field));
    }

    @Test
    void checkVocabularyNamesTheFirstBadPosition() throws IOException {
        Path f = dir.resolve("v.bin");
        TokenFile.write(f, new int[] {5, 255, 256, 300, 1});
        try (TokenFile tf = TokenFile.open(f)) {
            tf.checkVocabulary(301);
            assertThatThrownBy(() -> tf.checkVocabulary(256))
                    .isInstanceOf(FileFormatException.class)
                    .hasMessage(f + ": token 2 is 256, outside the model's vocabulary [0, 256)");
        }
    }

    @Test
    void writerRefusesWhatTheFormatCannotHold() {
        Path f = dir.resolve("w.bin");
        assertThatThrownBy(() -> TokenFile.write(f, new int[] {1, 65536})).hasMessageContaining("token 1 is 65536");
        assertThatThrownBy(() -> TokenFile.write(f, new int[] {-1})).hasMessageContaining("token 0 is -1");
        assertThatThrownBy(() -> TokenFile.write(f, new int[0])).hasMessageContaining("at least one token");
        assertThat(f).doesNotExist();
    }

    @Test
    void writesAreAtomicReplacementsWithoutLeftovers() throws IOException {
        Path f = dir.resolve("a.bin");
        TokenFile.write(f, new int[] {1, 2, 3});
        TokenFile.write(f, new int[] {4});
        try (TokenFile tf = TokenFile.open(f)) {
            assertThat(tf.size()).isEqualTo(1);
            assertThat(tf.token(0)).isEqualTo(4);
        }
        try (Stream<Path> files = Files.list(dir)) {
            assertThat(files.map(p -> p.getFileName().toString())).containsExactly("a.bin");
        }
        assertThatThrownBy(() -> TokenFile.write(dir.resolve("no/such/dir/x.bin"), new int[] {1}))
                .hasMessageContaining("does not exist");
    }

    @Test
    void indicesAreChecked() throws IOException {
        Path f = dir.resolve("i.bin");
        TokenFile.write(f, new int[] {1, 2});
        TokenFile tf = TokenFile.open(f);
        assertThatThrownBy(() -> tf.token(2)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> tf.token(-1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> tf.read(1, new int[2], 2)).isInstanceOf(IndexOutOfBoundsException.class);
        tf.close();
        tf.close(); // idempotent
        assertThatThrownBy(() -> tf.token(0)).isInstanceOf(IllegalStateException.class);
    }

    /** A token file's bytes: the 256-int header (the first three fields given) and the tokens, little-endian. */
    static byte[] file(int magic, int version, int count, short[] tokens) {
        ByteBuffer b = ByteBuffer.allocate(1024 + 2 * tokens.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(magic).putInt(version).putInt(count);
        b.position(1024);
        for (short t : tokens) {
            b.putShort(t);
        }
        return b.array();
    }
}
