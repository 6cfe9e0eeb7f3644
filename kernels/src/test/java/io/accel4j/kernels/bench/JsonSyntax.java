package io.accel4j.kernels.bench;

/** A strict JSON syntax check (RFC 8259) for the tests: throws {@link IllegalArgumentException} at the first error. */
final class JsonSyntax {

    private final String s;
    private int i;

    JsonSyntax(String s) {
        this.s = s;
    }

    void document() {
        value();
        space();
        if (i != s.length()) {
            throw error("trailing text");
        }
    }

    private void value() {
        space();
        if (i >= s.length()) {
            throw error("value expected");
        }
        char c = s.charAt(i);
        switch (c) {
            case '{' -> members('}', true);
            case '[' -> members(']', false);
            case '"' -> string();
            case 't' -> word("true");
            case 'f' -> word("false");
            case 'n' -> word("null");
            default -> number();
        }
    }

    private void members(char close, boolean object) {
        i++;
        space();
        if (peek() == close) {
            i++;
            return;
        }
        while (true) {
            if (object) {
                space();
                string();
                space();
                expect(':');
            }
            value();
            space();
            if (peek() == ',') {
                i++;
            } else {
                expect(close);
                return;
            }
        }
    }

    private void string() {
        expect('"');
        while (true) {
            if (i >= s.length()) {
                throw error("unterminated string");
            }
            char c = s.charAt(i++);
            if (c == '"') {
                return;
            }
            if (c < 0x20) {
                throw error("control character in string");
            }
            if (c == '\\') {
                char e = s.charAt(i++);
                if (e == 'u') {
                    for (int k = 0; k < 4; k++) {
                        if (Character.digit(s.charAt(i++), 16) < 0) {
                            throw error("bad \\u escape");
                        }
                    }
                } else if ("\"\\/bfnrt".indexOf(e) < 0) {
                    throw error("bad escape \\" + e);
                }
            }
        }
    }

    private void number() {
        int start = i;
        while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
            i++;
        }
        if (!s.substring(start, i).matches("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?")) {
            throw error("bad number '" + s.substring(start, i) + "'");
        }
    }

    private void word(String w) {
        if (!s.startsWith(w, i)) {
            throw error(w + " expected");
        }
        i += w.length();
    }

    private void expect(char c) {
        if (peek() != c) {
            throw error("'" + c + "' expected");
        }
        i++;
    }

    private char peek() {
        return i < s.length() ? s.charAt(i) : '\0';
    }

    private void space() {
        while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) {
            i++;
        }
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException(what + " at " + i + ": …" + s.substring(Math.max(0, i - 30),
                Math.min(s.length(), i + 30)) + "…");
    }
}
