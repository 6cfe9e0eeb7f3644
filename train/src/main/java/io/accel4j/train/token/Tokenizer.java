package io.accel4j.train.token;

/**
 * Text bytes to token ids and back ({@link Vocabulary#bytes}). Encoding takes bytes, not a string: text that is not
 * valid UTF-8 still encodes (each implementation says how) and decodes back to the same bytes.
 */
public interface Tokenizer extends Vocabulary {

    /** The tokens of {@code text} (no end-of-text token added). */
    int[] encode(byte[] text);

    /**
     * How many bytes of {@code text} are not valid UTF-8 and so were encoded one token per byte, outside any merge (0
     * for a byte-level tokenizer, for which every byte is simply a token).
     */
    default long invalidBytes(byte[] text) {
        return Utf8Runs.invalidBytes(text);
    }
}
