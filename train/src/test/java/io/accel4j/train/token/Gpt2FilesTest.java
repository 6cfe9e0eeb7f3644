package io.accel4j.train.token;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * encoder.json + vocab.bpe in GPT-2's format: a tiny hand-made vocabulary whose encodings are worked out by hand
 * (BPE merges the lowest-ranked adjacent pair first, within each pre-token of GPT-2's pattern).
 */
class Gpt2FilesTest {

    @TempDir
    Path dir;

    /** Ġ is GPT-2's character for the space byte (0x20 maps to U+0120). */
    private static final String[] MERGES = {"h e", "l l", "he ll", "Ġ w", "o r", "Ġw or", "hell o"};

    private void writeFiles(String[] merges, String extraEntries) throws IOException {
        char[] map = Gpt2Files.byteToChar();
        int[] order = Gpt2Files.byteRankOrder();
        List<String> entries = new ArrayList<>();
        for (int id = 0; id < 256; id++) {
            entries.add(json(String.valueOf(map[order[id]])) + ": " + id);
        }
        for (int i = 0; i < merges.length; i++) {
            entries.add(json(merges[i].replace(" ", "")) + ": " + (256 + i));
        }
        entries.add("\"<|endoftext|>\": " + (256 + merges.length));
        Files.writeString(dir.resolve("encoder.json"), "{" + String.join(", ", entries) + extraEntries + "}",
                StandardCharsets.UTF_8);
        Files.writeString(dir.resolve("vocab.bpe"), "#version: 0.2\n" + String.join("\n", merges) + "\n",
                StandardCharsets.UTF_8);
    }

    private static String json(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c > 126) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    @Test
    void encodesWithTheGivenMerges() throws IOException {
        writeFiles(MERGES, "");
        BpeTokenizer t = Gpt2Files.read(dir);
        assertThat(t.size()).isEqualTo(256 + MERGES.length + 1);
        assertThat(t.eotToken()).isEqualTo(263);
        int h = id('h');
        // "hello": h e -> he(256); l l -> ll(257); he ll -> hell(258); hell o -> hello(262)
        assertThat(t.encode(bytes("hello"))).containsExactly(262);
        // " world": pre-token " world"; Ġ w -> 259, o r -> 260, Ġw or -> 261, then l, d stay bytes
        assertThat(t.encode(bytes(" world"))).containsExactly(261, id('l'), id('d'));
        // "help": he + l + p (no "hel" merge)
        assertThat(t.encode(bytes("help"))).containsExactly(256, id('l'), id('p'));
        assertThat(t.encode(bytes("h"))).containsExactly(h);
        assertThat(new String(t.bytes(261), StandardCharsets.UTF_8)).isEqualTo(" wor");
        assertThat(new String(t.bytes(263), StandardCharsets.UTF_8)).isEqualTo("<|endoftext|>");
    }

    /** The id of a single printable ASCII byte: its rank among GPT-2's printable bytes, which start at '!'. */
    private static int id(char c) {
        return c - '!';
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * GPT-2's own files, rebuilt from r50k_base's ranks: each token's merge is found by a plain BPE written here
     * (merge the lowest-ranked adjacent pair among ranks below the token's own until none is left: two parts remain,
     * the pair whose merge made the token), then encoder.json (with \\u escapes, as Python's json.dump writes it) and
     * vocab.bpe are written as OpenAI's are; read back, they encode the sample text to tiktoken's ids.
     */
    @Test
    void gpt2sFilesRebuiltFromItsRanksEncodeAsTiktoken() throws IOException {
        BpeTokenizer gpt2 = BpeTokenizer.gpt2();
        int n = 50256;
        java.util.Map<String, Integer> rank = new java.util.HashMap<>();
        byte[][] tok = new byte[n][];
        for (int id = 0; id < n; id++) {
            tok[id] = gpt2.bytes(id);
            rank.put(new String(tok[id], StandardCharsets.ISO_8859_1), id);
        }
        char[] map = Gpt2Files.byteToChar();
        StringBuilder merges = new StringBuilder("#version: 0.2\n");
        StringBuilder encoder = new StringBuilder("{");
        for (int id = 0; id < n; id++) {
            if (id >= 256) {
                List<String> parts = bpe(new String(tok[id], StandardCharsets.ISO_8859_1), rank, id);
                assertThat(parts).as("token %d", id).hasSize(2);
                merges.append(alphabet(parts.get(0), map)).append(' ').append(alphabet(parts.get(1), map))
                        .append('\n');
            }
            encoder.append(json(alphabet(new String(tok[id], StandardCharsets.ISO_8859_1), map))).append(": ")
                    .append(id).append(", ");
        }
        encoder.append("\"<|endoftext|>\": 50256}");
        Files.writeString(dir.resolve("encoder.json"), encoder, StandardCharsets.UTF_8);
        Files.writeString(dir.resolve("vocab.bpe"), merges, StandardCharsets.UTF_8);

        BpeTokenizer files = Gpt2Files.read(dir);
        assertThat(files.size()).isEqualTo(50257);
        assertThat(files.eotToken()).isEqualTo(50256);
        byte[] text = BpeTokenizerTest.resource("gpt2-sample.txt");
        assertThat(files.encode(text)).containsExactly(BpeTokenizerTest.referenceIds());
        assertThat(Vocabularies.sameTokens(files, gpt2)).isTrue();
    }

    /** Plain BPE over Latin-1 strings (one char per byte), only merges ranked below {@code below}. */
    private static List<String> bpe(String s, java.util.Map<String, Integer> rank, int below) {
        List<String> parts = new ArrayList<>();
        for (char c : s.toCharArray()) {
            parts.add(String.valueOf(c));
        }
        while (parts.size() > 1) {
            int best = -1, bestRank = Integer.MAX_VALUE;
            for (int i = 0; i + 1 < parts.size(); i++) {
                Integer r = rank.get(parts.get(i) + parts.get(i + 1));
                if (r != null && r < below && r < bestRank) {
                    best = i;
                    bestRank = r;
                }
            }
            if (best < 0) {
                break;
            }
            parts.set(best, parts.get(best) + parts.remove(best + 1));
        }
        return parts;
    }

    private static String alphabet(String latin1, char[] map) {
        StringBuilder sb = new StringBuilder();
        for (char c : latin1.toCharArray()) {
            sb.append(map[c]);
        }
        return sb.toString();
    }

    @Test
    void filesThatDoNotBelongTogetherAreRefusedNamingTheEntry() throws IOException {
        writeFiles(MERGES, "");
        // the merge order swapped: encoder.json's ids no longer follow vocab.bpe's ranks
        Files.writeString(dir.resolve("vocab.bpe"), "#version: 0.2\nl l\nh e\nhe ll\nĠ w\no r\nĠw or\nhell o\n");
        assertThatThrownBy(() -> Gpt2Files.read(dir)).isInstanceOf(FileFormatException.class)
                .hasMessageContaining("encoder.json: entry \"he\" has id 256, but its merge rank in")
                .hasMessageContaining("is 257");
    }

    @Test
    void badFilesAreOneLineErrors() throws IOException {
        writeFiles(MERGES, "");
        Files.writeString(dir.resolve("vocab.bpe"), "#version: 0.2\nh e\nll\n");
        assertThatThrownBy(() -> Gpt2Files.read(dir)).isInstanceOf(FileFormatException.class)
                .hasMessageContaining("vocab.bpe: line 3 is 'll', expected two tokens separated by one space");
        writeFiles(MERGES, "");
        Files.writeString(dir.resolve("encoder.json"), "{\"a\": 1, ");
        assertThatThrownBy(() -> Gpt2Files.read(dir)).isInstanceOf(FileFormatException.class)
                .hasMessageContaining("encoder.json: JSON ends early");
        writeFiles(MERGES, ", \"\\u4e2d\": 300");
        assertThatThrownBy(() -> Gpt2Files.read(dir)).isInstanceOf(FileFormatException.class)
                .hasMessageContaining("U+4E2D, outside GPT-2's byte alphabet");
        writeFiles(new String[] {"h e"}, "");
        Files.writeString(dir.resolve("vocab.bpe"), "#version: 0.2\nh e\nl l\n");
        assertThatThrownBy(() -> Gpt2Files.read(dir)).isInstanceOf(FileFormatException.class)
                .hasMessageContaining("entry \"<|endoftext|>\" has id 257 but is not a merge in");
    }

    @Test
    void aMissingFileIsAnIoError() throws IOException {
        writeFiles(MERGES, "");
        Files.delete(dir.resolve("vocab.bpe"));
        assertThatThrownBy(() -> Gpt2Files.read(dir)).isInstanceOf(java.nio.file.NoSuchFileException.class);
    }
}
