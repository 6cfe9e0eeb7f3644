package io.accel4j.train.token;

import java.util.Arrays;

/** Comparisons between vocabularies. */
public final class Vocabularies {

    private Vocabularies() {}

    /** Whether {@code a} and {@code b} have the same size, end-of-text token and bytes for every id. */
    public static boolean sameTokens(Vocabulary a, Vocabulary b) {
        if (a.size() != b.size() || a.eotToken() != b.eotToken()) {
            return false;
        }
        for (int id = 0; id < a.size(); id++) {
            if (!Arrays.equals(a.bytes(id), b.bytes(id))) {
                return false;
            }
        }
        return true;
    }
}
