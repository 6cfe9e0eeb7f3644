package io.accel4j.train.io;

import java.io.IOException;
import java.nio.file.Path;

/**
 * A file whose contents do not follow its format: a bad magic number or version, a header field out of range, or a
 * size that does not match the header. Checked (an {@link IOException}) so that callers handle it where they handle
 * the file not being readable at all; the message is one line naming the file and the field, e.g.
 * {@code data/train.bin: header[2] (token count) is 100 but the file holds 98 tokens (1220 bytes, expected 1224)}.
 */
public final class FileFormatException extends IOException {

    private static final long serialVersionUID = 1L;

    private final transient Path file;
    private final String field;

    /**
     * @param file  the file at fault
     * @param field the header field or part of the file at fault, e.g. {@code "header[0] (magic)"} or {@code "size"}
     * @param what  what is wrong with it
     */
    public FileFormatException(Path file, String field, String what) {
        super(file + ": " + field + " " + what);
        this.file = file;
        this.field = field;
    }

    /** The file at fault. */
    public Path file() {
        return file;
    }

    /** The field at fault, as named in the message. */
    public String field() {
        return field;
    }
}
