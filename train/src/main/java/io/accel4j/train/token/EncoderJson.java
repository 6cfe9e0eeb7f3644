package io.accel4j.train.token;

import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A JSON object of string keys to integer values, which is what GPT-2's {@code encoder.json} is, and nothing more
 * (no nesting, arrays, floats or literals); errors are {@link FileFormatException}s naming the file and the character.
 */
final class EncoderJson {

    private final String s;
    private final Path file;
    private int p;

    private EncoderJson(String s, Path file) {
        this.s = s;
        this.file = file;
    }

    static Map<String, Integer> read(Path file) throws IOException {
        String text = Files.readString(file, StandardCharsets.UTF_8);
        return new EncoderJson(text, file).object();
    }

    private Map<String, Integer> object() throws FileFormatException {
        Map<String, Integer> out = new LinkedHashMap<>();
        ws();
        expect('{');
        ws();
        if (peek() == '}') {
            p++;
        } else {
            while (true) {
                ws();
                String key = string();
                ws();
                expect(':');
                ws();
                int value = integer(key);
                if (out.put(key, value) != null) {
                    throw error("has the key \"" + key + "\" twice");
                }
                ws();
                char c = next();
                if (c == '}') {
                    break;
                }
                if (c != ',') {
                    throw error("has '" + c + "' at character " + (p - 1) + ", expected ',' or '}'");
                }
            }
        }
        ws();
        if (p != s.length()) {
            throw error("has text after the object at character " + p);
        }
        return out;
    }

    private String string() throws FileFormatException {
        expect('"');
        StringBuilder sb = new StringBuilder();
        while (true) {
            char c = next();
            if (c == '"') {
                return sb.toString();
            }
            if (c != '\\') {
                sb.append(c);
                continue;
            }
            char e = next();
            switch (e) {
                case '"', '\\', '/' -> sb.append(e);
                case 'b' -> sb.append('\b');
                case 'f' -> sb.append('\f');
                case 'n' -> sb.append('\n');
                case 'r' -> sb.append('\r');
                case 't' -> sb.append('\t');
                case 'u' -> {
                    if (p + 4 > s.length()) {
                        throw error("ends inside a \\u escape");
                    }
                    try {
                        sb.append((char) Integer.parseInt(s.substring(p, p + 4), 16));
                    } catch (NumberFormatException ex) {
                        throw error("has a bad \\u escape at character " + p);
                    }
                    p += 4;
                }
                default -> throw error("has a bad escape \\" + e + " at character " + (p - 1));
            }
        }
    }

    private int integer(String key) throws FileFormatException {
        int start = p;
        while (p < s.length() && (Character.isDigit(s.charAt(p)) || s.charAt(p) == '-')) {
            p++;
        }
        try {
            return Integer.parseInt(s.substring(start, p));
        } catch (NumberFormatException e) {
            throw error("has a value for \"" + key + "\" that is not an integer id (at character " + start
                    + ")");
        }
    }

    private void ws() {
        while (p < s.length() && Character.isWhitespace(s.charAt(p))) {
            p++;
        }
    }

    private char peek() throws FileFormatException {
        if (p >= s.length()) {
            throw error("ends early (truncated?)");
        }
        return s.charAt(p);
    }

    private char next() throws FileFormatException {
        char c = peek();
        p++;
        return c;
    }

    private void expect(char c) throws FileFormatException {
        char got = next();
        if (got != c) {
            throw error("has '" + got + "' at character " + (p - 1) + ", expected '" + c + "'");
        }
    }

    private FileFormatException error(String what) {
        return new FileFormatException(file, "JSON", what);
    }
}
