package io.accel4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The JDK's I/O exceptions in words, each naming its file (issue 21 item 6). */
class IoMessagesTest {

    private static final Path F = Path.of("runs/r/model_00000001.bin");

    @Test
    void eachKindOfFailureSaysWhatWentWrongWithWhichFile() {
        assertThat(IoMessages.describe(new NoSuchFileException(F.toString()))).isEqualTo(F + ": no such file or "
                + "directory");
        assertThat(IoMessages.describe(new AccessDeniedException("runs/r"))).isEqualTo("runs/r: permission denied");
        assertThat(IoMessages.describe(new IOException("Is a directory"), F)).isEqualTo(F + ": is a directory");
        assertThat(IoMessages.describe(new IOException("No space left on device"), F)).isEqualTo(F + ": disk full "
                + "(no space left on the device)");
        assertThat(IoMessages.describe(new FileSystemException(F.toString(), null, "Read-only file system")))
                .isEqualTo(F + ": read-only file system");
        assertThat(IoMessages.describe(new UncheckedIOException(new AccessDeniedException(F.toString()))))
                .isEqualTo(F + ": permission denied");
        assertThat(IoMessages.describe(new IllegalStateException("x", new NoSuchFileException("a.bin"))))
                .isEqualTo("a.bin: no such file or directory");
        assertThat(IoMessages.describe(new IOException(F + ": is a directory"), F)).isEqualTo(F + ": is a directory");
        FileFormatException ffe = new FileFormatException(F, "header[0] (magic)", "is 7, expected 20240326");
        assertThat(IoMessages.describe(ffe, F)).isEqualTo(ffe.getMessage());
        assertThat(IoMessages.describe(new IllegalArgumentException("plain"))).isEqualTo("plain");
    }

    @Test
    void diskFullIsRecognisedInTheCauseChain() {
        assertThat(IoMessages.diskFull(new IOException("write", new IOException("No space left on device")))).isTrue();
        assertThat(IoMessages.diskFull(new FileSystemException("f", null, "Disk quota exceeded"))).isTrue();
        assertThat(IoMessages.diskFull(new IOException("Is a directory"))).isFalse();
    }

    @Test
    void anIoExceptionEscapingACommandIsOneLineWithTheFile() {
        StringWriter err = new StringWriter();
        picocli.CommandLine cl = Main.commandLine();
        cl.addSubcommand("io", new Thrower());
        cl.setErr(new PrintWriter(err, true));
        assertThat(cl.execute("io")).isEqualTo(1);
        assertThat(err.toString().lines().toList()).containsExactly("accel4j: error: /x/y: permission denied");
    }

    @picocli.CommandLine.Command(name = "io")
    static final class Thrower implements java.util.concurrent.Callable<Integer> {
        @Override
        public Integer call() throws IOException {
            throw new AccessDeniedException("/x/y");
        }
    }

    @Test
    void threadsBeyondTheProcessorsAreCappedWithAWarning() {
        StringWriter err = new StringWriter();
        PrintWriter w = new PrintWriter(err, true);
        assertThat(Threads.cap(null, 2, w)).isNull();
        assertThat(Threads.cap(2, 2, w)).isEqualTo(2);
        assertThat(err.toString()).isEmpty();
        assertThat(Threads.cap(100000, 2, w)).isEqualTo(2);
        assertThat(err.toString().lines().toList()).containsExactly(
                "accel4j: warning: --threads 100000 is more than the 2 processors available: using 2");
    }
}
