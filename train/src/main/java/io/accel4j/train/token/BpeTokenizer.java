package io.accel4j.train.token;

import com.knuddels.jtokkit.Encodings;
import com.knuddels.jtokkit.api.Encoding;
import com.knuddels.jtokkit.api.EncodingType;
import com.knuddels.jtokkit.api.GptBytePairEncodingParams;
import com.knuddels.jtokkit.api.IntArrayList;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * GPT-2's byte-level BPE, through JTokkit: {@link #gpt2()} is {@code r50k_base} as shipped inside JTokkit's jar (GPT-2's
 * 50,257 tokens, end-of-text 50256; nothing is downloaded), {@link #of} builds one from merge ranks a user gives
 * (e.g. {@link Gpt2Files}: GPT-2's {@code encoder.json} and {@code vocab.bpe}).
 *
 * <p>Encoding works on bytes: each maximal run of valid UTF-8 is split by GPT-2's pattern and merged as GPT-2 does
 * ({@code encode_ordinary}: {@code <|endoftext|>} in the text is plain text, not the special token); a byte that is
 * not valid UTF-8 becomes its single-byte token, so any byte string encodes and decodes back to itself.
 */
public final class BpeTokenizer implements Tokenizer {

    /** GPT-2's pre-tokenization pattern (contractions, letters, digits, other, whitespace), Unicode classes. */
    public static final String GPT2_PATTERN =
            "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

    private static final int GPT2_VOCAB = 50257;
    private static final int GPT2_EOT = 50256;

    private final Encoding encoding;
    private final byte[][] table;
    private final int[] byteToken = new int[256];
    private final int eot;
    private final String description;

    private BpeTokenizer(Encoding encoding, byte[][] table, int eot, String description) {
        this.encoding = encoding;
        this.table = table;
        this.eot = eot;
        this.description = description;
        java.util.Arrays.fill(byteToken, -1);
        for (int id = 0; id < table.length; id++) {
            if (table[id].length == 1 && byteToken[table[id][0] & 0xFF] < 0 && id != eot) {
                byteToken[table[id][0] & 0xFF] = id;
            }
        }
        for (int b = 0; b < 256; b++) {
            if (byteToken[b] < 0) {
                throw new IllegalArgumentException("the vocabulary has no token for the single byte " + b
                        + ": not a byte-level BPE");
            }
        }
    }

    /** GPT-2's tokenizer: JTokkit's {@code r50k_base}. */
    public static BpeTokenizer gpt2() {
        Encoding e = Encodings.newLazyEncodingRegistry().getEncoding(EncodingType.R50K_BASE);
        byte[][] table = new byte[GPT2_VOCAB][];
        IntArrayList one = new IntArrayList(1);
        one.add(0);
        for (int id = 0; id < GPT2_VOCAB; id++) {
            one.set(0, id);
            table[id] = e.decodeBytes(one);
        }
        return new BpeTokenizer(e, table, GPT2_EOT, "GPT-2 BPE r50k_base, vocabulary " + GPT2_VOCAB);
    }

    /**
     * A byte-level BPE over GPT-2's pattern from its merge ranks (the rank of a token is its id) and special tokens.
     *
     * @param ranks   every mergeable token's bytes to its id, ids {@code 0 … ranks.size()−1}
     * @param special special tokens (e.g. {@code <|endoftext|>}) to their ids, after the mergeable ones
     * @param eot     the end-of-text token's id, or −1
     */
    public static BpeTokenizer of(String name, Map<byte[], Integer> ranks, Map<String, Integer> special, int eot,
            String description) {
        int n = ranks.size() + special.size();
        byte[][] table = new byte[n][];
        ranks.forEach((bytes, id) -> put(table, id, bytes.clone()));
        special.forEach((s, id) -> put(table, id, s.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        for (int id = 0; id < n; id++) {
            if (table[id] == null) {
                throw new IllegalArgumentException("no token has id " + id + " (ids must be 0.." + (n - 1) + ")");
            }
        }
        GptBytePairEncodingParams params = new GptBytePairEncodingParams(name,
                Pattern.compile(GPT2_PATTERN, Pattern.UNICODE_CHARACTER_CLASS), ranks, special);
        Encoding e = Encodings.newLazyEncodingRegistry().registerGptBytePairEncoding(params).getEncoding(name)
                .orElseThrow();
        return new BpeTokenizer(e, table, eot, description);
    }

    private static void put(byte[][] table, int id, byte[] bytes) {
        if (id < 0 || id >= table.length) {
            throw new IllegalArgumentException("token id " + id + " is outside [0, " + table.length + ")");
        }
        if (table[id] != null) {
            throw new IllegalArgumentException("two tokens have id " + id);
        }
        table[id] = bytes;
    }

    @Override
    public int size() {
        return table.length;
    }

    @Override
    public int eotToken() {
        return eot;
    }

    @Override
    public byte[] bytes(int id) {
        if (id < 0 || id >= table.length) {
            throw new IndexOutOfBoundsException("token " + id + " is outside the vocabulary [0, " + table.length
                    + ")");
        }
        return table[id].clone();
    }

    @Override
    public String describe() {
        return description;
    }

    @Override
    public int[] encode(byte[] text) {
        IntArrayList out = new IntArrayList(Math.max(16, text.length / 3));
        Utf8Runs.visit(text, new Utf8Runs.Visitor() {
            @Override
            public void text(String s) {
                IntArrayList t = encoding.encodeOrdinary(s);
                for (int i = 0; i < t.size(); i++) {
                    out.add(t.get(i));
                }
            }

            @Override
            public void invalid(int b) {
                out.add(byteToken[b]);
            }
        });
        return out.toArray();
    }
}
