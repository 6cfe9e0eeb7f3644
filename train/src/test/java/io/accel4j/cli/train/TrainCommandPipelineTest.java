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

    @Test
    void layoutsTheModelCannotTakeAreUsageErrorsBeforeAnythingIsWritten() {
        Path dir = tmp.resolve("bad");
        String[][] cases = {
                {"--pp", "3"}, {"--pp", "2", "--micro-batches", "1"}, {"--micro-batches", "2"},
                {"--pp", "2", "--schedule-pp", "zigzag"}, {"--pp", "2", "--grad-accum", "2"}};
        String[] messages = {
                "--pp 3 is larger than the model's 2 layers (transformer blocks): each stage needs at least one",
                "--micro-batches 1 is fewer than --pp 2: 1F1B needs at least as many micro-batches as stages",
                "--micro-batches needs --pp 2 or more",
                "--schedule-pp: unknown pipeline schedule 'zigzag': use gpipe or 1f1b",
                "--pp 2 does not take --grad-accum (use --micro-batches) yet"};
        for (int i = 0; i < cases.length; i++) {
            Result r = TrainCommandTest.run(TrainCommandTest.quick(dir, cases[i]));
            assertThat(r.code()).as(String.join(" ", cases[i])).isEqualTo(2);
            assertThat(r.err()).contains(messages[i]).doesNotContain("Exception");
            assertThat(dir).doesNotExist();
        }
    }
}
