package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.quick;
import static io.accel4j.cli.train.TrainCommandTest.run;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train --offload-optimizer}: the same losses and the same checkpoint bytes (llm.c model and state files) as
 * without it, a resume continues to the same files, and the combinations not supported yet exit 2 naming the flags.
 */
class TrainCommandOffloadTest {

    @TempDir
    Path tmp;

    private static final String[] COMMON = {"--steps", "4", "--val-every", "0", "--save-every", "2", "--samples", "0",
            "--eval-problems", "0", "--grad-accum", "2", "--grad-clip", "0.5"};

    private static String[] args(Path dir, String... more) {
        return quick(dir, Stream.concat(Stream.of(COMMON), Stream.of(more)).toArray(String[]::new));
    }

    @Test
    void theSameLossesAndCheckpointBytesAsWithoutOffloadAndAResumeContinues() throws IOException {
        Path plain = tmp.resolve("plain"), off = tmp.resolve("off"), split = tmp.resolve("split");
        TrainCommandTest.Result a = run(args(plain));
        TrainCommandTest.Result b = run(args(off, "--offload-optimizer"));
        assertThat(a.code()).as(a.err()).isZero();
        assertThat(b.code()).as(b.err()).isZero();
        assertThat(b.out()).contains("optimizer offloaded to host memory: ").contains("on the host");
        assertThat(losses(off)).containsExactlyElementsOf(losses(plain));
        for (String f : new String[] {"model_00000004.bin", "state_00000004.bin", "model_00000002.bin",
                "state_00000002.bin"}) {
            assertThat(Files.readAllBytes(off.resolve(f))).as(f).isEqualTo(Files.readAllBytes(plain.resolve(f)));
        }
        String[] firstHalf = args(split, "--offload-optimizer");
        firstHalf[List.of(firstHalf).indexOf("--steps") + 1] = "2";
        TrainCommandTest.Result c = run(firstHalf);
        assertThat(c.code()).as(c.err()).isZero();
        TrainCommandTest.Result d = run("train", "--resume", split.toString(), "--steps", "4", "--threads", "2");
        assertThat(d.code()).as(d.err()).isZero();
        for (String f : new String[] {"model_00000004.bin", "state_00000004.bin"}) {
            assertThat(Files.readAllBytes(split.resolve(f))).as(f).isEqualTo(Files.readAllBytes(plain.resolve(f)));
        }
    }

    @Test
    void twoDataParallelRanksOffloadedAreTheSameBits() throws IOException {
        Path plain = tmp.resolve("ddp"), off = tmp.resolve("ddp-off");
        TrainCommandTest.Result a = run(oneStep(args(plain, "--ranks", "2")));
        TrainCommandTest.Result b = run(oneStep(args(off, "--ranks", "2", "--offload-optimizer")));
        assertThat(a.code()).as(a.err()).isZero();
        assertThat(b.code()).as(b.err()).isZero();
        assertThat(losses(off)).containsExactlyElementsOf(losses(plain));
        for (String f : new String[] {"model_00000001.bin", "state_00000001.bin"}) {
            assertThat(Files.readAllBytes(off.resolve(f))).as(f).isEqualTo(Files.readAllBytes(plain.resolve(f)));
        }
    }

    @Test
    void whatItDoesNotComposeWithYetExitsTwoNamingBoth() {
        record Case(String other, String[] flags) {}
        for (Case c : List.of(new Case("--zero 1", new String[] {"--ranks", "2", "--zero", "1"}),
                new Case("--sync async", new String[] {"--ranks", "3", "--sync", "async"}),
                new Case("--pp", new String[] {"--ranks", "2", "--pp", "2"}),
                new Case("--tp", new String[] {"--ranks", "2", "--tp", "2"}),
                new Case("--find-batch-size", new String[] {"--find-batch-size", "--memory-budget", "64m"}))) {
            String[] a = Stream.concat(Stream.of(args(tmp.resolve("x"), "--offload-optimizer")), Stream.of(c.flags()))
                    .toArray(String[]::new);
            TrainCommandTest.Result r = run(a);
            assertThat(r.code()).as(c.other()).isEqualTo(2);
            assertThat(r.err()).contains("--offload-optimizer does not go with " + c.other()).doesNotContain("\tat ");
        }
    }

    /** --offload-overlap off (three serial moves) is the bits of the default, overlapped step; a resume may change it. */
    @Test
    void serialAndOverlappedStepsAreTheSameBits() throws IOException {
        Path on = tmp.resolve("on"), off = tmp.resolve("serial");
        TrainCommandTest.Result a = run(args(on, "--offload-optimizer", "--offload-overlap", "on"));
        String[] firstHalf = args(off, "--offload-optimizer", "--offload-overlap", "off");
        firstHalf[List.of(firstHalf).indexOf("--steps") + 1] = "2";
        TrainCommandTest.Result b = run(firstHalf);
        assertThat(a.code()).as(a.err()).isZero();
        assertThat(b.code()).as(b.err()).isZero();
        TrainCommandTest.Result c = run("train", "--resume", off.toString(), "--steps", "4", "--threads", "2",
                "--offload-overlap", "on");
        assertThat(c.code()).as(c.err()).isZero();
        for (String f : new String[] {"model_00000004.bin", "state_00000004.bin", "model_00000002.bin",
                "state_00000002.bin"}) {
            assertThat(Files.readAllBytes(off.resolve(f))).as(f).isEqualTo(Files.readAllBytes(on.resolve(f)));
        }
    }

    @Test
    void offloadOverlapNeedsOffloadAndOnOrOff() {
        TrainCommandTest.Result r = run(args(tmp.resolve("y"), "--offload-overlap", "off"));
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("--offload-overlap off needs --offload-optimizer").doesNotContain("\tat ");
        r = run(args(tmp.resolve("z"), "--offload-optimizer", "--offload-overlap", "maybe"));
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("--offload-overlap takes on or off, got 'maybe'").doesNotContain("\tat ");
        assertThat(tmp.resolve("y")).doesNotExist();
        assertThat(tmp.resolve("z")).doesNotExist();
    }

    /** {@code a} with --steps 1 and --save-every 0. */
    private static String[] oneStep(String[] a) {
        List<String> l = new java.util.ArrayList<>(List.of(a));
        l.set(l.indexOf("--steps") + 1, "1");
        l.set(l.indexOf("--save-every") + 1, "0");
        return l.toArray(String[]::new);
    }

    private static List<String> losses(Path dir) throws IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream()
                .map(l -> l.replaceAll(".*\"train_loss\":([^,]*),.*", "$1")).toList();
    }
}
