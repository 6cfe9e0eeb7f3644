package io.accel4j.cli.plan;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.core.DType;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.plan.Bf16ParamsLayouts;
import io.accel4j.train.plan.Bf16ParamsPlan;
import io.accel4j.train.plan.Cluster;
import io.accel4j.train.plan.Layout;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.plan.OffloadPlan;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code accel4j plan --bf16-params} (with {@code --offload}): the rows' device bytes are the trainer's
 * ({@link Bf16ParamsPlan}), and with the optimizer offloaded the device holds bf16 weights and gradients only — less
 * than fp32 offload's weights and gradients, so a device too small for it gets the bf16 offload command line.
 */
class PlanBf16ParamsTest {

    @Test
    void theRowsAreTheTrainersPlans() {
        GptConfig c = GptConfig.GPT2;
        Cluster cluster = new Cluster(2, 16L << 30, 1e11, 1e14);
        for (boolean offload : new boolean[] {false, true}) {
            List<Layout> rows = new Bf16ParamsLayouts(offload).layouts(c, 16, 1024, cluster);
            assertThat(rows).hasSize(4).allSatisfy(l -> {
                assertThat(l.zeroStage()).isZero();
                assertThat(l.strategy()).isEqualTo("DDP+bf16-params" + (offload ? "+off" : ""));
                assertThat(l.trainArgs()).containsSubsequence("--precision", "bf16", "--grad-storage", "bf16",
                        "--bf16-params");
                MemoryPlan want = offload
                        ? Bf16ParamsPlan.offloaded(c, l.microBatch(), 1024, l.recompute(), DType.BF16, DType.BF16)
                                .device()
                        : Bf16ParamsPlan.of(c, l.microBatch(), 1024, l.recompute(), DType.BF16, DType.BF16);
                assertThat(l.memory()).isEqualTo(want);
                assertThat(l.trainArgs().contains("--offload-optimizer")).isEqualTo(offload);
            });
        }
    }

    @Test
    void aDeviceTooSmallForFp32OffloadGetsTheBf16OffloadCommandLine() {
        GptConfig c = GptConfig.GPT2;
        // between the two offload layouts' device needs at B = 1 with --recompute layer
        long fp32 = OffloadPlan.of(c, 1, 1024, io.accel4j.train.model.Recompute.LAYER).device().total();
        long bf16 = Bf16ParamsPlan.offloaded(c, 1, 1024, io.accel4j.train.model.Recompute.LAYER, DType.BF16,
                DType.BF16).device().total();
        assertThat(bf16).isLessThan(fp32);
        long memory = (fp32 + bf16) / 2;
        StringWriter out = new StringWriter(), err = new StringWriter();
        var cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute("plan", "--model", "gpt2", "--global-batch", "1", "--device-memory",
                Long.toString(memory), "--offload", "--bf16-params");
        assertThat(code).as(err.toString()).isZero();
        assertThat(out.toString()).contains("single+bf16-params+off")
                .contains("--precision bf16 --grad-storage bf16 --bf16-params --offload-optimizer");
        int without = Main.commandLine().setOut(new PrintWriter(new StringWriter()))
                .setErr(new PrintWriter(new StringWriter())).execute("plan", "--model", "gpt2", "--global-batch",
                        "1", "--device-memory", Long.toString(memory), "--offload");
        assertThat(without).isEqualTo(1); // fp32 offload does not fit
    }
}
