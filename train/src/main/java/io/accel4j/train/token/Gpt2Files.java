package io.accel4j.train.token;

import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * GPT-2's own tokenizer files, as OpenAI published them: {@code encoder.json} (token → id, each token written in
 * GPT-2's byte-to-character alphabet) and {@code vocab.bpe} (a {@code #version} line, then one merge {@code "a b"} a
 * line, in rank order). The mergeable tokens' ranks are the 256 single bytes (in GPT-2's alphabet order) followed by
 * the merges, and each must have that rank as its id in {@code encoder.json}; an {@code encoder.json} entry that is no
 * merge (GPT-2: {@code <|endoftext|>}, 50256) is a special token. Errors name the file and the entry.
 */
public final class Gpt2Files {

    /** The token file names. */
    public static final String ENCODER = "encoder.json";
    public static final String MERGES = "vocab.bpe";

    private Gpt2Files() {}

    /** GPT-2's byte → character map ({@code bytes_to_unicode}): printable Latin-1 bytes map to themselves. */
    static char[] byteToChar() {
        char[] map = new char[256];
        int n = 0;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            map[b] = printable ? (char) b : (char) (256 + n++);
        }
        return map;
    }

    /** The bytes of the single-byte tokens in rank order: GPT-2's printable bytes first, then the others. */
    static int[] byteRankOrder() {
        char[] map = byteToChar();
        int[] order = new int[256];
        int k = 0;
        for (int b = 0; b < 256; b++) {
            if (map[b] == b) {
                order[k++] = b;
            }
        }
        for (int b = 0; b < 256; b++) {
            if (map[b] != b) {
                order[k++] = b;
            }
        }
        return order;
    }

    /** Reads {@code dir/encoder.json} and {@code dir/vocab.bpe}. */
    public static BpeTokenizer read(Path dir) throws IOException {
        Path encoderFile = dir.resolve(ENCODER);
        Path mergesFile = dir.resolve(MERGES);
        Map<String, Integer> encoder = EncoderJson.read(encoderFile);
        List<String> lines = Files.readAllLines(mergesFile, StandardCharsets.UTF_8);
        Map<Character, Integer> charToByte = new HashMap<>();
        char[] map = byteToChar();
        for (int b = 0; b < 256; b++) {
            charToByte.put(map[b], b);
        }
        // the ranks: single bytes, then the merges in order
        Map<ByteKey, Integer> ranks = new LinkedHashMap<>();
        for (int b : byteRankOrder()) {
            ranks.put(new ByteKey(new byte[] {(byte) b}), ranks.size());
        }
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i);
            if (i == 0 && line.startsWith("#version")) {
                continue;
            }
            if (line.isEmpty() && i == lines.size() - 1) {
                continue;
            }
            String[] parts = line.split(" ", -1);
            if (parts.length != 2 || parts[0].isEmpty() || parts[1].isEmpty()) {
                throw new FileFormatException(mergesFile, "line " + (i + 1), "is '" + line + "', expected two "
                        + "tokens separated by one space");
            }
            byte[] a = decode(parts[0], charToByte, mergesFile, "line " + (i + 1));
            byte[] b = decode(parts[1], charToByte, mergesFile, "line " + (i + 1));
            byte[] ab = new byte[a.length + b.length];
            System.arraycopy(a, 0, ab, 0, a.length);
            System.arraycopy(b, 0, ab, a.length, b.length);
            if (ranks.putIfAbsent(new ByteKey(ab), ranks.size()) != null) {
                throw new FileFormatException(mergesFile, "line " + (i + 1), "merges '" + line
                        + "' into a token an earlier line already made");
            }
        }
        Map<String, Integer> special = new TreeMap<>();
        int eot = -1;
        int matched = 0;
        for (Map.Entry<String, Integer> e : encoder.entrySet()) {
            String what = "entry \"" + e.getKey() + "\"";
            byte[] bytes = decode(e.getKey(), charToByte, encoderFile, what);
            Integer rank = ranks.get(new ByteKey(bytes));
            if (rank != null) {
                if (!rank.equals(e.getValue())) {
                    throw new FileFormatException(encoderFile, what, "has id " + e.getValue() + ", but its merge "
                            + "rank in " + mergesFile + " is " + rank + ": ids must follow the merge order, as GPT-2's"
                            + " do");
                }
                matched++;
            } else {
                if (e.getValue() < ranks.size()) {
                    throw new FileFormatException(encoderFile, what, "has id " + e.getValue() + " but is not a "
                            + "merge in " + mergesFile + " (special tokens come after the " + ranks.size()
                            + " mergeable ones)");
                }
                special.put(new String(bytes, StandardCharsets.UTF_8), e.getValue());
                if (e.getKey().equals("<|endoftext|>")) {
                    eot = e.getValue();
                }
            }
        }
        if (matched != ranks.size()) {
            throw new FileFormatException(encoderFile, "entries", "cover " + matched + " of the " + ranks.size()
                    + " tokens of " + mergesFile + " (256 bytes + merges): the two files do not belong together");
        }
        Map<byte[], Integer> byBytes = new HashMap<>();
        ranks.forEach((k, v) -> byBytes.put(k.bytes(), v));
        try {
            return BpeTokenizer.of("files:" + dir.toAbsolutePath(), byBytes, special, eot,
                    "byte-level BPE from " + dir + ", vocabulary " + (ranks.size() + special.size()));
        } catch (IllegalArgumentException e) {
            throw new FileFormatException(encoderFile, "ids", e.getMessage());
        }
    }

    private static byte[] decode(String token, Map<Character, Integer> charToByte, Path file, String what)
            throws FileFormatException {
        byte[] out = new byte[token.length()];
        for (int i = 0; i < token.length(); i++) {
            Integer b = charToByte.get(token.charAt(i));
            if (b == null) {
                throw new FileFormatException(file, what, "has the character U+" + String.format("%04X",
                        (int) token.charAt(i)) + ", outside GPT-2's byte alphabet");
            }
            out[i] = (byte) (int) b;
        }
        return out;
    }

    /** Bytes with value equality, for map keys. */
    private record ByteKey(byte[] bytes) {
        @Override
        public boolean equals(Object o) {
            return o instanceof ByteKey k && java.util.Arrays.equals(bytes, k.bytes);
        }

        @Override
        public int hashCode() {
            return java.util.Arrays.hashCode(bytes);
        }
    }
}
