package io.accel4j.train.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.io.FileFormatException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointFilesTest {

    @TempDir
    Path dir;

    @Test
    void namesTheFilesByZeroPaddedStep() {
        CheckpointFiles f = CheckpointFiles.of(dir, 1234);
        assertThat(f.model()).isEqualTo(dir.resolve("model_00001234.bin"));
        assertThat(f.state()).isEqualTo(dir.resolve("state_00001234.bin"));
        assertThatThrownBy(() -> CheckpointFiles.of(dir, -1)).hasMessageContaining("-1");
    }

    @Test
    void commitPointsAtTheNewPairAndDeletesOnlyOtherCheckpoints() throws Exception {
        CheckpointFiles old = CheckpointFiles.of(dir, 3), now = CheckpointFiles.of(dir, 7);
        for (Path p : new Path[] {old.model(), old.state(), now.model(), now.state(), dir.resolve("notes.txt")}) {
            Files.writeString(p, p.getFileName().toString());
        }
        old.commit(3);
        assertThat(CheckpointFiles.latest(dir)).isEqualTo(old);
        assertThat(Files.exists(now.model())).as("another step's files go at commit").isFalse();

        Files.writeString(now.model(), "m");
        Files.writeString(now.state(), "s");
        now.commit(7);
        assertThat(CheckpointFiles.latest(dir)).isEqualTo(now);
        try (Stream<Path> files = Files.list(dir)) {
            assertThat(files.map(p -> p.getFileName().toString())).containsExactlyInAnyOrder(
                    CheckpointFiles.POINTER, "model_00000007.bin", "state_00000007.bin", "notes.txt");
        }
    }

    @Test
    void aMissingOrCorruptPointerIsNamed() throws Exception {
        assertThatThrownBy(() -> CheckpointFiles.latest(dir)).isInstanceOf(NoSuchFileException.class)
                .hasMessageContaining("no checkpoint in " + dir).hasMessageContaining(CheckpointFiles.POINTER);
        Files.writeString(dir.resolve("model_00000004.bin"), "m");
        Files.writeString(dir.resolve(CheckpointFiles.POINTER), "step=4\nmodel=model_00000004.bin\n");
        assertThatThrownBy(() -> CheckpointFiles.latest(dir)).isInstanceOf(FileFormatException.class)
                .hasMessageContaining("state is missing").hasMessageContaining("corrupt");
    }

    @Test
    void retentionKeepsTheNewestAndEveryMultipleAndDropsLaterSteps() throws Exception {
        for (int step : new int[] {2, 4, 6, 8, 10, 12, 14}) {
            CheckpointFiles f = CheckpointFiles.of(dir, step);
            Files.writeString(f.model(), "m");
            Files.writeString(f.state(), "s");
        }
        Files.createDirectories(dir.resolve("model_00000016.bin")); // not ours to delete
        CheckpointFiles.of(dir, 10).commit(10, new CheckpointFiles.Retention(3, 4));
        try (Stream<Path> files = Files.list(dir)) {
            assertThat(files.map(p -> p.getFileName().toString()).filter(n -> n.startsWith("model"))).as(
                    "10 and the two before it, the multiples of 4, not the steps after 10 (a run that started over)")
                    .containsExactlyInAnyOrder("model_00000004.bin", "model_00000006.bin", "model_00000008.bin",
                            "model_00000010.bin", "model_00000016.bin");
        }
        assertThat(dir.resolve("state_00000006.bin")).exists();
        assertThat(dir.resolve("state_00000002.bin")).doesNotExist();
    }
}
