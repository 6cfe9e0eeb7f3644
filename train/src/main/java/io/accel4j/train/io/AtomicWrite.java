package io.accel4j.train.io;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Writes a file so that readers see either the old file or the complete new one, never a part: the bytes go to a
 * temporary file in the same directory ({@code .NAME.RANDOM.tmp}), which is forced to the device (fsync) and then
 * renamed over the target in one atomic step; the directory is forced too where the platform allows it. On any
 * failure the temporary file is deleted and the target is left as it was; the exception names the target, not the
 * temporary file (a {@link FileSystemException} whose file is the target, e.g. for a full disk).
 */
public final class AtomicWrite {

    /** Writes the whole content into the channel, positioned at 0 of an empty file. */
    @FunctionalInterface
    public interface Body {
        void write(FileChannel channel) throws IOException;
    }

    private AtomicWrite() {}

    /** Writes {@code target} atomically with what {@code body} puts into the channel. */
    public static void write(Path target, Body body) throws IOException {
        Path absolute = target.toAbsolutePath();
        Path dir = absolute.getParent();
        if (dir == null || !Files.isDirectory(dir)) {
            throw new IOException(target + ": directory " + dir + " does not exist");
        }
        if (Files.isDirectory(absolute)) {
            throw new IOException(target + ": is a directory");
        }
        String name = absolute.getFileName().toString();
        Path tmp = dir.resolve("." + name + "." + Long.toHexString(ThreadLocalRandom.current().nextLong()) + ".tmp");
        boolean done = false;
        try {
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                body.write(ch);
                ch.force(true);
            }
            try {
                Files.move(tmp, absolute, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                throw new IOException(target + ": the file system cannot rename atomically (" + e.getMessage() + ")",
                        e);
            }
            done = true;
        } catch (FileSystemException e) {
            throw e.getFile() != null && e.getFile().equals(tmp.toString()) ? about(e, absolute) : e;
        } catch (IOException e) {
            if (e.getClass() != IOException.class) {
                throw e;
            }
            // a bare "No space left on device", "Input/output error": say which file
            throw (IOException) new FileSystemException(target.toString(), null, e.getMessage()).initCause(e);
        } finally {
            if (!done) {
                Files.deleteIfExists(tmp);
            }
        }
        forceDirectory(dir);
    }

    /**
     * {@code e}, which names the temporary file, about {@code target} instead (the file the user knows), of the same
     * kind (permission denied, no such file, …).
     */
    static FileSystemException about(FileSystemException e, Path target) {
        String t = target.toString(), r = e.getReason();
        FileSystemException named = switch (e) {
            case AccessDeniedException a -> new AccessDeniedException(t, null, r);
            case NoSuchFileException n -> new NoSuchFileException(t, null, r);
            case FileAlreadyExistsException f -> new FileAlreadyExistsException(t, null, r);
            default -> new FileSystemException(t, null, r);
        };
        named.initCause(e);
        return named;
    }

    /** Makes the rename durable (POSIX); a no-op where directories cannot be opened (Windows). */
    private static void forceDirectory(Path dir) {
        try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
            ch.force(true);
        } catch (IOException | UnsupportedOperationException e) {
            // the rename is atomic already; only its durability across a power cut is not guaranteed here
        }
    }
}
