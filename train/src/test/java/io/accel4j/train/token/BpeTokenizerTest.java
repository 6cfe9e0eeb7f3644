package io.accel4j.train.token;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** GPT-2's BPE (JTokkit's r50k_base) against ids from an independent implementation (tiktoken), and bytes in/out. */
class BpeTokenizerTest {

    private static BpeTokenizer gpt2;

    @BeforeAll
    static void load() {
        gpt2 = BpeTokenizer.gpt2();
    }

    static byte[] resource(String name) throws IOException {
        try (InputStream in = BpeTokenizerTest.class.getResourceAsStream(name)) {
            assertThat(in).as(name).isNotNull();
            return in.readAllBytes();
        }
    }

    /** The reference ids: see the comment at the top of gpt2-sample.ids for how they were made. */
    static int[] referenceIds() throws IOException {
        return new String(resource("gpt2-sample.ids"), StandardCharsets.US_ASCII).lines()
                .filter(l -> !l.startsWith("#")).mapToInt(Integer::parseInt).toArray();
    }

    @Test
    void encodesTheSampleTextAsTiktokenDoes() throws IOException {
        byte[] text = resource("gpt2-sample.txt");
        int[] expected = referenceIds();
        assertThat(expected).hasSize(206);
        assertThat(gpt2.encode(text)).containsExactly(expected);
    }

    @Test
    void decodesTheReferenceIdsToTheSampleTextByteForByte() throws IOException {
        byte[] text = resource("gpt2-sample.txt");
        assertThat(decode(gpt2, referenceIds())).isEqualTo(text);
    }

    @Test
    void isGpt2sVocabulary() {
        assertThat(gpt2.size()).isEqualTo(50257);
        assertThat(gpt2.eotToken()).isEqualTo(50256);
        assertThat(new String(gpt2.bytes(50256), StandardCharsets.UTF_8)).isEqualTo("<|endoftext|>");
        assertThat(new String(gpt2.bytes(464), StandardCharsets.UTF_8)).isEqualTo("The"); // GPT-2's "The"
        assertThat(new String(gpt2.bytes(262), StandardCharsets.UTF_8)).isEqualTo(" the");
        // the single-byte tokens 0..255 are the bytes in GPT-2's alphabet order (printable first)
        int[] order = Gpt2Files.byteRankOrder();
        for (int id = 0; id < 256; id++) {
            assertThat(gpt2.bytes(id)).as("token %d", id).containsExactly((byte) order[id]);
        }
        assertThat(order[0]).isEqualTo('!');
        assertThat(order[188]).isEqualTo(0);
    }

    @Test
    void bytesThatAreNotUtf8BecomeTheirSingleByteTokensAndDecodeBack() {
        // 0xFF never appears in UTF-8; 0xC3 alone is a truncated sequence; a lone continuation byte 0x80.
        // tiktoken's encode_single_token(bytes([b])): 0xFF -> 187, 0xC3 -> 127, 0x80 -> 222
        byte[] text = {'a', 'b', (byte) 0xFF, 'c', 'd', ' ', (byte) 0x80, 'x', (byte) 0xC3};
        int[] ids = gpt2.encode(text);
        int[] ab = gpt2.encode("ab".getBytes(StandardCharsets.UTF_8));
        int[] cd = gpt2.encode("cd ".getBytes(StandardCharsets.UTF_8));
        int[] x = gpt2.encode("x".getBytes(StandardCharsets.UTF_8));
        int[] expected = concat(ab, new int[] {187}, cd, new int[] {222}, x, new int[] {127});
        assertThat(ids).containsExactly(expected);
        assertThat(decode(gpt2, ids)).isEqualTo(text);
        assertThat(gpt2.invalidBytes(text)).isEqualTo(3);
        assertThat(gpt2.invalidBytes("caf\u00e9".getBytes(StandardCharsets.UTF_8))).isZero();
    }

    @Test
    void theEndOfTextMarkerInTheTextIsPlainText() {
        int[] ids = gpt2.encode("<|endoftext|>".getBytes(StandardCharsets.UTF_8));
        assertThat(ids).doesNotContain(50256).hasSizeGreaterThan(1);
    }

    @Test
    void emptyTextHasNoTokens() {
        assertThat(gpt2.encode(new byte[0])).isEmpty();
    }

    @Test
    void theByteTokenizerIsTheIdentityOnBytes() {
        byte[] text = {0, 65, (byte) 0xFF, (byte) 0xC3};
        assertThat(ByteTokenizer.INSTANCE.encode(text)).containsExactly(0, 65, 255, 195);
        assertThat(decode(ByteTokenizer.INSTANCE, new int[] {0, 65, 255, 195})).isEqualTo(text);
        assertThat(ByteTokenizer.INSTANCE.invalidBytes(text)).isZero();
    }

    static byte[] decode(Vocabulary v, int[] ids) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        for (int id : ids) {
            out.writeBytes(v.bytes(id));
        }
        return out.toByteArray();
    }

    static int[] concat(int[]... parts) {
        return Arrays.stream(parts).flatMapToInt(Arrays::stream).toArray();
    }
}
