package io.accel4j.train.token;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.io.LlmcHeader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** llm.c's gpt2_tokenizer.bin: written, read back, and every bad header or body refused naming the field. */
class TokenizerFileTest {

    @TempDir
    Path dir;

    @Test
    void gpt2RoundTripsThroughTheFileInLlmcsLayout() throws IOException {
        BpeTokenizer gpt2 = BpeTokenizer.gpt2();
        Path f = dir.resolve("gpt2_tokenizer.bin");
        TokenizerFile.write(f, gpt2);
        byte[] raw = Files.readAllBytes(f);
        ByteBuffer h = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN);
        assertThat(h.getInt(0)).isEqualTo(20240328);
        assertThat(h.getInt(4)).isEqualTo(2);
        assertThat(h.getInt(8)).isEqualTo(50257);
        assertThat(h.getInt(12)).isEqualTo(50256);
        // token 0 is "!" : length 1 then the byte
        assertThat(raw[1024]).isEqualTo((byte) 1);
        assertThat(raw[1025]).isEqualTo((byte) '!');
        Vocabulary back = TokenizerFile.read(f);
        assertThat(back.size()).isEqualTo(50257);
        assertThat(back.eotToken()).isEqualTo(50256);
        for (int id = 0; id < back.size(); id++) {
            assertThat(back.bytes(id)).isEqualTo(gpt2.bytes(id));
        }
        assertThat(Vocabularies.sameTokens(back, gpt2)).isTrue();
        assertThat(Vocabularies.sameTokens(back, ByteTokenizer.INSTANCE)).isFalse();
    }

    @Test
    void versionOneIsGpt2WithEndOfText50256() throws IOException {
        Path f = dir.resolve("v1.bin");
        ByteBuffer body = ByteBuffer.allocate(50257 * 2);
        for (int i = 0; i < 50257; i++) {
            body.put((byte) 1).put((byte) i);
        }
        write(f, body.array(), 20240328, 1, 50257);
        Vocabulary v = TokenizerFile.read(f);
        assertThat(v.eotToken()).isEqualTo(50256);
        assertThat(v.bytes(300)).containsExactly((byte) 300);
    }

    @Test
    void badFilesAreRefusedNamingTheField() throws IOException {
        byte[] two = {1, 'a', 2, 'b', 'c'};
        assertThat(error(two, 20240520, 2, 2, 1)).contains("header[0] (magic) is 20240520, expected 20240328: "
                + "not an llm.c tokenizer file");
        assertThat(error(two, 20240328, 3, 2, 1)).contains("header[1] (version) is 3, expected 1 or 2");
        assertThat(error(two, 20240328, 1, 2, 1)).contains("header[2] (vocabulary size) is 2, but version 1");
        assertThat(error(two, 20240328, 2, 2, 5)).contains("header[3] (end-of-text token) is 5, outside");
        assertThat(error(two, 20240328, 2, 3, 1)).contains("token 2 is missing: the file ends after 2 of the 3");
        assertThat(error(new byte[] {1, 'a', 0}, 20240328, 2, 2, 1)).contains("token 1 has length 0");
        assertThat(error(new byte[] {1, 'a', 3, 'b'}, 20240328, 2, 2, 1)).contains("token 1 has length 3 but");
        assertThat(error(new byte[] {1, 'a', 1, 'b', 7}, 20240328, 2, 2, 1)).contains("size has 1 bytes after the 2");
        Path tiny = dir.resolve("tiny.bin");
        Files.write(tiny, new byte[10]);
        assertThatThrownBy(() -> TokenizerFile.read(tiny)).isInstanceOf(FileFormatException.class)
                .hasMessageContaining("header is truncated");
        Path ok = dir.resolve("ok.bin");
        write(ok, two, 20240328, 2, 2, 1);
        assertThat(new String(TokenizerFile.read(ok).bytes(1))).isEqualTo("bc");
    }

    private String error(byte[] body, int... header) throws IOException {
        Path f = dir.resolve("bad.bin");
        write(f, body, header);
        try {
            TokenizerFile.read(f);
        } catch (FileFormatException e) {
            assertThat(e.getMessage()).startsWith(f.toString()).doesNotContain("\n");
            return e.getMessage();
        }
        throw new AssertionError("no error for header " + java.util.Arrays.toString(header));
    }

    private static void write(Path f, byte[] body, int... header) throws IOException {
        ByteBuffer h = LlmcHeader.encode(header);
        byte[] all = new byte[LlmcHeader.BYTES + body.length];
        h.get(all, 0, LlmcHeader.BYTES);
        System.arraycopy(body, 0, all, LlmcHeader.BYTES, body.length);
        Files.write(f, all);
    }
}
