package io.accel4j.train.token;

/** Every byte is a token: ids 0…255, no end-of-text token, no merges. What {@code prepare} did before GPT-2 BPE. */
public final class ByteTokenizer implements Tokenizer {

    /** The one instance. */
    public static final ByteTokenizer INSTANCE = new ByteTokenizer();

    private ByteTokenizer() {}

    @Override
    public int size() {
        return 256;
    }

    @Override
    public int eotToken() {
        return -1;
    }

    @Override
    public byte[] bytes(int id) {
        if (id < 0 || id >= 256) {
            throw new IndexOutOfBoundsException("token " + id + " is outside the byte vocabulary [0, 256)");
        }
        return new byte[] {(byte) id};
    }

    @Override
    public String describe() {
        return "byte-level, vocabulary 256";
    }

    @Override
    public int[] encode(byte[] text) {
        int[] t = new int[text.length];
        for (int i = 0; i < text.length; i++) {
            t[i] = text[i] & 0xFF;
        }
        return t;
    }

    @Override
    public long invalidBytes(byte[] text) {
        return 0;
    }
}
