package io.accel4j.train.token;

/**
 * What decoding needs: the bytes of each token id. A {@link Tokenizer} is one; so is a table read from llm.c's
 * {@code gpt2_tokenizer.bin} ({@link TokenizerFile}), which has no merges and can only decode.
 */
public interface Vocabulary {

    /** The number of token ids, {@code 0 … size()−1}. */
    int size();

    /** The end-of-text token, or −1 if the vocabulary has none. */
    int eotToken();

    /** The bytes token {@code id} stands for (a copy; at least one byte), {@code 0 <= id < size()}. */
    byte[] bytes(int id);

    /** A short description for messages and logs, e.g. {@code GPT-2 BPE (r50k_base, 50257 tokens)}. */
    String describe();
}
