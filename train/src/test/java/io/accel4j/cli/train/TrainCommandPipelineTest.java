package io.accel4j.cli.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code train --pp}: a short pipeline run end to end (the split printed, metrics, plot, an llm.c model file that
 * {@code sample} reads, the idle per stage beside the bubble formula), and the layouts a model cannot take refused as
 * usage errors naming the flag and the numbers before anything is written.
 */
class TrainCommandPipelineTest {

    @TempDir
    Path tmp;

    @Test
    void aPipelineRunPrintsItsSplitAndSavesTheWholeModel() throws Exception {
        Path dir = tmp.resolve("pp");
        Result r = TrainCommandTest.run(TrainCommandTest.quick(dir, "--steps", "3", "--pp", "2", "--micro-batches",
                "3", "--schedule-pp", "gpipe"));
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out()).contains("pipeline: 2 stages, 3 micro-batches, gpipe (bubble (P-1)/(M+P-1) = 0.250)")
                .contains("stage 0: layers 0-0 (embedding, h.0)").contains("stage 1: layers 1-1 (h.1, ln_f, lm_head)")
                .contains("step     3/3").contains("idle per stage (last step): 0: ");
        Path model = dir.resolve("model_00000003.bin");
        assertThat(LlmcCheckpoint.readConfig(model).L()).isEqualTo(2);
        assertThat(Files.readAllLines(dir.resolve("metrics.jsonl"))).hasSize(3);
        assertThat(dir.resolve("loss.png")).exists();
        Result s = TrainCommandTest.run("sample", "--model", model.toString(), "--prompt", "1+1=", "-n", "3");
        assertThat(s.code()).as(s.err()).isZero();
    }

    /**
     * {@code --pp 2 --micro-batches 2} starts where {@code --grad-accum 2} does (llm.c's initialisation from the seed,
     * the same data, schedule and AdamW), so it trains the same: losses within fp32's summation order.
     */
    @Test
    void aPipelineRunTrainsAsOneRankAccumulatingTheSameMicroBatches() throws Exception {
        String[] common = {"--steps", "4", "--warmup", "2", "--val-every", "0", "--samples", "0", "--eval-problems",
                "0"};
        Path oneRank = tmp.resolve("one-rank"), pipeline = tmp.resolve("pipeline");
        Result a = TrainCommandTest.run(TrainCommandTest.quick(oneRank, concat(common, "--grad-accum", "2")));
        assertThat(a.code()).as(a.err()).isZero();
        Result b = TrainCommandTest.run(TrainCommandTest.quick(pipeline, concat(common, "--pp", "2",
                "--micro-batches", "2")));
        assertThat(b.code()).as(b.err()).isZero();
        java.util.List<Double> la = losses(oneRank), lb = losses(pipeline);
        assertThat(lb).hasSize(4);
        double worst = 0;
        for (int s = 0; s < 4; s++) {
            worst = Math.max(worst, Math.abs(lb.get(s) / la.get(s) - 1));
        }
        System.out.printf("train --pp 2 vs --grad-accum 2: losses %.1e relative at worst%n", worst);
        for (int s = 0; s < 4; s++) { // fp32 sums in another order (the tied embedding's halves): 3e-9 measured
            assertThat(lb.get(s)).as("step %d", s).isCloseTo(la.get(s),
                    org.assertj.core.api.Assertions.within(1e-5 * la.get(s)));
        }
    }

    /**
     * {@code --ranks 4 --pp 2 --micro-batches 2} (two replicas of a two-stage pipeline) trains as data-parallel
     * {@code --ranks 2 --grad-accum 2}: each replica reads what that rank reads, and both average over the two.
     */
    @Test
    void replicatedPipelinesTrainAsDataParallelRanksAccumulatingTheSameMicroBatches() throws Exception {
        String[] common = {"--steps", "3", "--warmup", "2", "--val-every", "0", "--samples", "0", "--eval-problems",
                "0", "--ranks"};
        Path ddp = tmp.resolve("ddp"), pipeline = tmp.resolve("dp-pp");
        Result a = TrainCommandTest.run(TrainCommandTest.quick(ddp, concat(common, "2", "--grad-accum", "2")));
        assertThat(a.code()).as(a.err()).isZero();
        Result b = TrainCommandTest.run(TrainCommandTest.quick(pipeline, concat(common, "4", "--pp", "2",
                "--micro-batches", "2")));
        assertThat(b.code()).as(b.err()).isZero();
        assertThat(b.out()).contains("2 data-parallel replicas");
        Path zero = tmp.resolve("dp-pp-zero1"); // ZeRO-1 over each stage's replicas: DDP's bits
        Result z = TrainCommandTest.run(TrainCommandTest.quick(zero, concat(common, "4", "--pp", "2",
                "--micro-batches", "2", "--zero", "1")));
        assertThat(z.code()).as(z.err()).isZero();
        assertThat(losses(zero)).containsExactlyElementsOf(losses(pipeline));
        java.util.List<Double> la = losses(ddp), lb = losses(pipeline);
        assertThat(lb).hasSize(3);
        for (int s = 0; s < 3; s++) { // fp32 sums in another order
            assertThat(lb.get(s)).as("step %d", s).isCloseTo(la.get(s),
                    org.assertj.core.api.Assertions.within(1e-5 * la.get(s)));
        }
    }

    /**
     * Checkpoints trade between layouts: a pipeline's step-2 checkpoint resumed on one rank
     * ({@code --pp 1}), and one rank's resumed at {@code --pp 2}, both continue as the straight run does (within
     * fp32's summation order).
     */
    @Test
    void checkpointsMoveBetweenThePipelineAndOneRank() throws Exception {
        String[] common = {"--warmup", "2", "--schedule", "constant", "--save-every", "2", "--val-every", "0",
                "--samples", "0", "--eval-problems", "0"};
        Path straight = tmp.resolve("straight"), fromPp = tmp.resolve("from-pp"), toPp = tmp.resolve("to-pp");
        Result a = TrainCommandTest.run(TrainCommandTest.quick(straight, concat(common, "--steps", "4",
                "--grad-accum", "2")));
        assertThat(a.code()).as(a.err()).isZero();
        Result b1 = TrainCommandTest.run(TrainCommandTest.quick(fromPp, concat(common, "--steps", "2", "--pp", "2",
                "--micro-batches", "2")));
        assertThat(b1.code()).as(b1.err()).isZero();
        assertThat(fromPp.resolve("checkpoint.properties")).exists();
        Result b2 = TrainCommandTest.run("train", "--resume", fromPp.toString(), "--pp", "1", "--steps", "4");
        assertThat(b2.code()).as(b2.err()).isZero();
        assertThat(b2.out()).contains("resumed " + fromPp + " at step 2");
        Result c1 = TrainCommandTest.run(TrainCommandTest.quick(toPp, concat(common, "--steps", "2", "--grad-accum",
                "2")));
        assertThat(c1.code()).as(c1.err()).isZero();
        Result c2 = TrainCommandTest.run("train", "--resume", toPp.toString(), "--pp", "2", "--steps", "4");
        assertThat(c2.code()).as(c2.err()).isZero();
        assertThat(c2.out()).contains("pipeline: 2 stages, 2 micro-batches").contains("resumed " + toPp
                + " at step 2");
        java.util.List<Double> want = losses(straight);
        for (Path d : java.util.List.of(fromPp, toPp)) {
            java.util.List<Double> got = losses(d);
            assertThat(got).as("%s", d).hasSize(4);
            for (int s = 0; s < 4; s++) { // fp32 sums in another order: 3e-9 measured
                assertThat(got.get(s)).as("%s step %d", d, s).isCloseTo(want.get(s),
                        org.assertj.core.api.Assertions.within(1e-5 * want.get(s)));
            }
        }
        assertThat(toPp.resolve("model_00000004.bin")).exists();
    }

    /**
     * Replicated pipelines checkpoint as data-parallel ranks do (rank 0's loader position is every
     * rank's): {@code --ranks 4 --pp 2} stopped at step 2 and resumed continues as the {@code --ranks 2
     * --grad-accum 2} straight run — on the same layout, and by data-parallel ranks at {@code --pp 1 --ranks 2} (a layout
     * change moves {@code --ranks}, which counts D·P ranks there and D here, as long as D stays; another D is refused).
     */
    @Test
    void replicatedPipelinesCheckpointAsDataParallelRanks() throws Exception {
        String[] common = {"--warmup", "2", "--schedule", "constant", "--save-every", "2", "--val-every", "0",
                "--samples", "0", "--eval-problems", "0", "--ranks"};
        Path straight = tmp.resolve("ddp-straight"), dpPp = tmp.resolve("dp-pp");
        Result a = TrainCommandTest.run(TrainCommandTest.quick(straight, concat(common, "2", "--steps", "4",
                "--grad-accum", "2")));
        assertThat(a.code()).as(a.err()).isZero();
        Result b1 = TrainCommandTest.run(TrainCommandTest.quick(dpPp, concat(common, "4", "--steps", "2", "--pp",
                "2", "--micro-batches", "2")));
        assertThat(b1.code()).as(b1.err()).isZero();
        Path toDdp = tmp.resolve("dp-pp-to-ddp");
        copyTree(dpPp, toDdp);
        Result b2 = TrainCommandTest.run("train", "--resume", dpPp.toString(), "--steps", "4");
        assertThat(b2.code()).as(b2.err()).isZero();
        assertThat(b2.out()).contains("resumed " + dpPp + " at step 2");
        Result bad = TrainCommandTest.run("train", "--resume", toDdp.toString(), "--pp", "1", "--ranks", "3",
                "--steps", "4");
        assertThat(bad.code()).isEqualTo(2);
        assertThat(bad.err()).contains("--ranks 3 differs from the resumed run's --ranks 4");
        Result b3 = TrainCommandTest.run("train", "--resume", toDdp.toString(), "--pp", "1", "--ranks", "2",
                "--steps", "4");
        assertThat(b3.code()).as(b3.err()).isZero();
        java.util.List<Double> want = losses(straight);
        for (Path d : java.util.List.of(dpPp, toDdp)) {
            java.util.List<Double> got = losses(d);
            assertThat(got).as("%s", d).hasSize(4);
            for (int s = 0; s < 4; s++) { // fp32 sums in another order
                assertThat(got.get(s)).as("%s step %d", d, s).isCloseTo(want.get(s),
                        org.assertj.core.api.Assertions.within(1e-5 * want.get(s)));
            }
        }
    }

    /**
     * {@code --tp 2 --pp 2 --micro-batches 2} (four in-process ranks: two stages, each split over two tensor ranks)
     * trains as {@code --grad-accum 2} on one rank, and its checkpoint (the whole model) is one rank's:
     * resumed there at {@code --tp 1 --pp 1} it goes on.
     */
    @Test
    void tensorParallelStagesTrainAsOneRankAccumulatingTheSameMicroBatches() throws Exception {
        String[] common = {"--steps", "3", "--warmup", "2", "--val-every", "0", "--samples", "0", "--eval-problems",
                "0", "--save-every", "3"};
        Path oneRank = tmp.resolve("one-rank"), split = tmp.resolve("tp-pp");
        Result a = TrainCommandTest.run(TrainCommandTest.quick(oneRank, concat(common, "--grad-accum", "2")));
        assertThat(a.code()).as(a.err()).isZero();
        Result b = TrainCommandTest.run(TrainCommandTest.quick(split, concat(common, "--tp", "2", "--pp", "2",
                "--micro-batches", "2")));
        assertThat(b.code()).as(b.err()).isZero();
        assertThat(b.out()).contains("pipeline: 2 stages × 2 tensor ranks, 2 micro-batches")
                .contains("idle per stage (last step): 0: ");
        java.util.List<Double> la = losses(oneRank), lb = losses(split);
        assertThat(lb).hasSize(3);
        double worst = 0;
        for (int s = 0; s < 3; s++) { // fp32 sums in another order (row-parallel partial sums, the tied halves)
            worst = Math.max(worst, Math.abs(lb.get(s) / la.get(s) - 1));
            assertThat(lb.get(s)).as("step %d", s).isCloseTo(la.get(s),
                    org.assertj.core.api.Assertions.within(1e-5 * la.get(s)));
        }
        System.out.printf("train --tp 2 --pp 2 vs --grad-accum 2: losses %.1e relative at worst%n", worst);
        Result c = TrainCommandTest.run("train", "--resume", split.toString(), "--tp", "1", "--pp", "1", "--steps",
                "4");
        assertThat(c.code()).as(c.err()).isZero();
        assertThat(c.out()).contains("resumed " + split + " at step 3");
        assertThat(losses(split)).hasSize(4);
    }

    private static void copyTree(Path from, Path to) throws java.io.IOException {
        try (java.util.stream.Stream<Path> all = Files.walk(from)) {
            for (Path p : (Iterable<Path>) all::iterator) {
                Files.copy(p, to.resolve(from.relativize(p).toString()));
            }
        }
    }

    private static String[] concat(String[] a, String... b) {
        return java.util.stream.Stream.concat(java.util.Arrays.stream(a), java.util.Arrays.stream(b))
                .toArray(String[]::new);
    }

    private static java.util.List<Double> losses(Path dir) throws java.io.IOException {
        return Files.readAllLines(dir.resolve("metrics.jsonl")).stream().filter(l -> l.contains("train_loss"))
                .map(l -> Double.parseDouble(l.replaceAll("^.*\"train_loss\":([^,]+),.*$", "$1"))).toList();
    }

    @Test
    void layoutsTheModelCannotTakeAreUsageErrorsBeforeAnythingIsWritten() {
        Path dir = tmp.resolve("bad");
        String[][] cases = {
                {"--pp", "3"}, {"--pp", "2", "--micro-batches", "1"}, {"--micro-batches", "2"},
                {"--pp", "2", "--schedule-pp", "zigzag"}, {"--pp", "2", "--grad-accum", "2", "--micro-batches", "4"},
                {"--pp", "2", "--zero", "1", "--ranks", "2"}, {"--pp", "2", "--ranks", "3"},
                {"--tp", "2", "--pp", "2", "--ranks", "6"}, {"--tp", "3", "--pp", "2"},
                {"--tp", "2", "--pp", "2", "--precision", "fp8"}, {"--tp", "2", "--pp", "2", "--device", "cuda"}};
        String[] messages = {
                "--pp 3 is larger than the model's 2 layers (transformer blocks): each stage needs at least one",
                "--micro-batches 1 is fewer than --pp 2: 1F1B needs at least as many micro-batches as stages",
                "--micro-batches needs --pp 2 or more",
                "--schedule-pp: unknown pipeline schedule 'zigzag': use gpipe or 1f1b",
                "--grad-accum 2 and --micro-batches 4 disagree: a pipeline accumulates its micro-batches",
                "--zero 1 with --pp 2 shards each stage's optimizer state over its data-parallel replicas, but 2 ranks "
                        + "make 1: it needs --ranks 4 or more",
                "--ranks 3 is not a multiple of --pp 2: the ranks are D·P",
                "--ranks 6 is not a multiple of --tp 2 × --pp 2 = 4: the ranks are D·T·P",
                "--tp 3 must divide the attention heads NH = 4 of the model",
                "--pp 2 does not take --precision fp8 yet",
                "--pp 2 does not take --device cuda yet"};
        for (int i = 0; i < cases.length; i++) {
            Result r = TrainCommandTest.run(TrainCommandTest.quick(dir, cases[i]));
            assertThat(r.code()).as(String.join(" ", cases[i])).isEqualTo(2);
            assertThat(r.err()).contains(messages[i]).doesNotContain("Exception");
            assertThat(dir).doesNotExist();
        }
    }
}
