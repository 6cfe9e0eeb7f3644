package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.run;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.train.data.TokenFile;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train --train-data 'DIR/train_*.bin'}: shards in llm.c's shuffled order, the same run with 1 or 3 loader
 * threads, resumed half-way, across an epoch's end; {@code data_ms} in the metrics; a bad shard named.
 */
class ShardedTrainingTest {

    @TempDir
    Path tmp;

    /** Three shards of byte tokens: 2, 1 and 3 samples of B·T = 32 (6 a epoch, so 8 steps cross into epoch 2). */
    private String shards() throws IOException {
        SplittableRandom r = new SplittableRandom(5);
        int[] sizes = {70, 40, 100};
        for (int k = 0; k < sizes.length; k++) {
            int[] t = new int[sizes[k]];
            for (int i = 0; i < t.length; i++) {
                t[i] = 'a' + (i * (k + 2) + r.nextInt(3)) % 26;
            }
            TokenFile.write(tmp.resolve("train_" + k + ".bin"), t);
        }
        return tmp.resolve("train_*.bin").toString();
    }

    private TrainCommandTest.Result train(String data, Path out, String... more) {
        // a constant learning rate, so that a run of 4 steps resumed to 8 has the schedule of a run of 8
        List<String> a = new ArrayList<>(List.of("train", "--train-data", data, "--out", out.toString(), "--batch",
                "2", "--seq", "16", "--threads", "1", "--lr", "3e-3", "--schedule", "constant", "--warmup", "0",
                "--val-every", "0", "--samples", "0", "--eval-problems", "0", "--save-every", "4"));
        a.addAll(List.of(more));
        return run(a.toArray(String[]::new));
    }

    private static List<String> records(Path dir) throws IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream()
                .map(l -> l.replaceAll(",\"(step_ms|tokens_per_s|data_ms)\":[^,}]+", "")).toList();
    }

    @Test
    void shardsTrainTheSameWithAnyLoaderThreadCountAndResume() throws IOException {
        String data = shards();
        Path one = tmp.resolve("one"), three = tmp.resolve("three"), half = tmp.resolve("half");
        TrainCommandTest.Result a = train(data, one, "--steps", "8");
        assertThat(a.code()).as(a.err()).isZero();
        assertThat(a.out()).contains("data " + data + " (3 shards): 210 tokens");
        TrainCommandTest.Result b = train(data, three, "--steps", "8", "--loader-threads", "3");
        assertThat(b.code()).as(b.err()).isZero();
        assertThat(records(three)).containsExactlyElementsOf(records(one));
        assertThat(Files.readAllLines(one.resolve("metrics.jsonl"))).allMatch(l -> l.contains("\"data_ms\":"));
        byte[] model = Files.readAllBytes(one.resolve("model_00000008.bin"));
        assertThat(Files.readAllBytes(three.resolve("model_00000008.bin"))).isEqualTo(model);

        TrainCommandTest.Result c = train(data, half, "--steps", "4", "--loader-threads", "2");
        assertThat(c.code()).as(c.err()).isZero();
        TrainCommandTest.Result d = run("train", "--resume", half.toString(), "--steps", "8");
        assertThat(d.code()).as(d.err()).isZero();
        assertThat(records(half)).containsExactlyElementsOf(records(one));
        assertThat(Files.readAllBytes(half.resolve("model_00000008.bin"))).isEqualTo(model);
    }

    @Test
    void badShardsAreOneLine() throws IOException {
        String data = shards();
        TrainCommandTest.Result none = train(tmp.resolve("val_*.bin").toString(), tmp.resolve("x"), "--steps", "1");
        assertThat(none.code()).isEqualTo(2);
        assertThat(none.err().lines().toList()).singleElement().asString().contains("--train-data "
                + tmp.resolve("val_*.bin") + ": matches no file");
        TokenFile.write(tmp.resolve("train_3.bin"), new int[] {1, 2, 300, 4});
        TrainCommandTest.Result vocab = train(data, tmp.resolve("y"), "--steps", "1");
        assertThat(vocab.code()).isEqualTo(1);
        assertThat(vocab.err().lines().toList()).singleElement().asString().contains("train_3.bin")
                .contains("token 2 is 300, outside the model's vocabulary [0, 256)");
        TrainCommandTest.Result threads = train(data, tmp.resolve("z"), "--steps", "1", "--loader-threads", "0");
        assertThat(threads.code()).isEqualTo(2);
        assertThat(threads.err()).contains("--loader-threads must be in [1, 64], got 0");
    }
}
