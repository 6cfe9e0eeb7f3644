package io.accel4j.train.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A failed atomic write names the file the user knows, not its temporary file, and leaves the old one (item 6). */
class AtomicWriteTest {

    @TempDir
    Path dir;

    @Test
    void aFullDiskWhileWritingNamesTheTargetAndKeepsTheOldFile() throws IOException {
        Path target = dir.resolve("model_00000004.bin");
        Files.writeString(target, "the old checkpoint");
        assertThatThrownBy(() -> AtomicWrite.write(target, ch -> {
            throw new IOException("No space left on device");
        })).isInstanceOfSatisfying(FileSystemException.class, e -> {
            assertThat(e.getFile()).isEqualTo(target.toString());
            assertThat(e.getReason()).isEqualTo("No space left on device");
        });
        assertThat(Files.readString(target)).isEqualTo("the old checkpoint");
        try (Stream<Path> files = Files.list(dir)) {
            assertThat(files).containsExactly(target);
        }
    }

    @Test
    void aProblemWithTheTemporaryFileIsReportedAboutTheTarget() {
        Path target = dir.resolve("state_00000004.bin"), tmp = dir.resolve(".state_00000004.bin.1234.tmp");
        FileSystemException e = AtomicWrite.about(new AccessDeniedException(tmp.toString()), target);
        assertThat(e).isInstanceOf(AccessDeniedException.class).hasCauseInstanceOf(AccessDeniedException.class);
        assertThat(e.getFile()).isEqualTo(target.toString());
    }
}
