package io.accel4j.train.token;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Splits bytes into runs of valid UTF-8 (as strings) and the bytes between them that are not valid UTF-8 (as Java's
 * strict decoder judges: bad lead or continuation bytes, overlong forms, surrogates, a truncated last sequence).
 * GPT-2's BPE works on bytes, so an invalid byte still has a token: the tokenizer gives it its single-byte token.
 */
public final class Utf8Runs {

    /** Receives the pieces in order. */
    public interface Visitor {
        /** A maximal run of valid UTF-8, decoded. */
        void text(String s);

        /** One byte that is not part of valid UTF-8. */
        void invalid(int b);
    }

    private Utf8Runs() {}

    /** Visits {@code bytes} as valid runs and invalid bytes, in order. */
    public static void visit(byte[] bytes, Visitor v) {
        CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(bytes);
        CharBuffer out = CharBuffer.allocate(Math.max(16, bytes.length));
        while (true) {
            CoderResult r = dec.decode(in, out, true);
            if (r.isError()) {
                flush(out, v);
                for (int i = 0; i < r.length(); i++) {
                    v.invalid(in.get() & 0xFF);
                }
                continue;
            }
            if (r.isOverflow()) { // cannot happen: at most one char per byte
                throw new IllegalStateException("UTF-8 decoding overflowed");
            }
            break;
        }
        dec.flush(out);
        flush(out, v);
    }

    private static void flush(CharBuffer out, Visitor v) {
        if (out.position() > 0) {
            out.flip();
            v.text(out.toString());
            out.clear();
        }
    }

    /** The number of bytes of {@code bytes} that are not valid UTF-8. */
    public static long invalidBytes(byte[] bytes) {
        long[] n = {0};
        visit(bytes, new Visitor() {
            @Override
            public void text(String s) {}

            @Override
            public void invalid(int b) {
                n[0]++;
            }
        });
        return n[0];
    }
}
