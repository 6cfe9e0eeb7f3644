package io.accel4j.cli;

import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.FileSystemLoopException;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.util.Locale;

/**
 * The one place that turns the JDK's I/O exceptions into words for the user's one error line: which file, and what
 * is wrong with it ("permission denied", "is a directory", "no such file or directory", "disk full", …), never a bare
 * path (the message of a {@link NoSuchFileException} or an {@link AccessDeniedException} is only the path) or a bare
 * reason ("Is a directory" from reading a directory). The project's own {@link FileFormatException} already names
 * the file and the field and is kept as it is.
 */
public final class IoMessages {

    private IoMessages() {}

    /**
     * {@code e} (or the first {@link IOException} among its causes) in words, naming the file when the exception
     * knows it; any other exception's message (or its class name when it has none).
     */
    public static String describe(Throwable e) {
        return describe(e, null);
    }

    /**
     * {@code e} in words; {@code file} names the file the caller was reading or writing when {@code e} itself does
     * not (e.g. {@code IOException: Is a directory} from a read).
     */
    public static String describe(Throwable e, Path file) {
        IOException io = ioCause(e);
        if (io == null) {
            return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
        }
        if (io instanceof FileFormatException) {
            return io.getMessage();
        }
        String named = io instanceof FileSystemException fse && fse.getFile() != null ? fse.getFile()
                : file != null ? file.toString() : null;
        String problem = problem(io);
        if (!(io instanceof FileSystemException) && named != null && io.getMessage() != null
                && io.getMessage().contains(named) && !diskFull(io)) {
            return io.getMessage(); // ours, e.g. AtomicWrite's "FILE: is a directory"
        }
        if (named == null) {
            return problem;
        }
        if (io instanceof FileSystemException fse && fse.getOtherFile() != null) {
            return named + " (to " + fse.getOtherFile() + "): " + problem;
        }
        return named + ": " + problem;
    }

    /** Whether {@code e} or one of its causes says the device is full (ENOSPC, or a quota: EDQUOT). */
    public static boolean diskFull(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            String m = t instanceof FileSystemException fse ? fse.getReason() : t.getMessage();
            if (m != null && (m.contains("No space left on device") || m.contains("Disk quota exceeded"))) {
                return true;
            }
        }
        return false;
    }

    /** What is wrong, without the file: lower case, e.g. "permission denied". */
    static String problem(IOException io) {
        if (diskFull(io)) {
            return "disk full (no space left on the device)";
        }
        if (io instanceof NoSuchFileException) {
            return "no such file or directory";
        }
        if (io instanceof AccessDeniedException) {
            return "permission denied";
        }
        if (io instanceof FileAlreadyExistsException) {
            return "already exists";
        }
        if (io instanceof DirectoryNotEmptyException) {
            return "directory not empty";
        }
        if (io instanceof NotDirectoryException) {
            return "not a directory";
        }
        if (io instanceof FileSystemLoopException) {
            return "symbolic link loop";
        }
        String reason = io instanceof FileSystemException fse ? fse.getReason() : io.getMessage();
        if (reason == null || reason.isBlank()) {
            return io.getClass().getSimpleName();
        }
        return switch (reason.strip()) {
            case "Is a directory" -> "is a directory";
            case "Not a directory" -> "not a directory";
            case "Permission denied" -> "permission denied";
            case "Read-only file system" -> "read-only file system";
            case "Too many open files" -> "too many open files (raise 'ulimit -n')";
            case "File name too long" -> "file name too long";
            case "Input/output error" -> "input/output error (a failing disk or network file system)";
            default -> reason.strip().length() > 1 && Character.isUpperCase(reason.strip().charAt(0))
                    && !Character.isUpperCase(reason.strip().charAt(1))
                    ? reason.strip().substring(0, 1).toLowerCase(Locale.ROOT) + reason.strip().substring(1)
                    : reason.strip();
        };
    }

    private static IOException ioCause(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof UncheckedIOException u) {
                return u.getCause();
            }
            if (t instanceof IOException io) {
                return io;
            }
        }
        return null;
    }
}
