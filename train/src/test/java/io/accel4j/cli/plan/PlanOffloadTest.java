package io.accel4j.cli.plan;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.Main;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.Cluster;
import io.accel4j.train.plan.Layout;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.plan.OffloadPlan;
import io.accel4j.train.plan.Planner;
import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;

/**
 * The offload layouts ({@code accel4j plan --offload}): their device bytes are {@link OffloadPlan}'s (the trainer's
 * allocation with the optimizer on the host: 8Ψ less than the same micro-batch without), they fit a larger
 * micro-batch at the same device memory, and a device too small for any fp32 layout gets the offload command line.
 */
class PlanOffloadTest {

    @Test
    void offloadLayoutsHoldNoOptimizerStateOnTheDeviceAndFitLargerBatches() {
        GptConfig c = GptConfig.GPT2;
        long psi = new ParameterLayout(c).count();
        Cluster cluster = new Cluster(1, 3L << 30, 1e11, 1e14);
        Planner.Result r = Planner.withOffload().plan(c, 16, 1024, cluster);
        assertThat(r.all()).hasSize(4 + 4); // single and offload × none, gelu, layer, every:3
        for (Layout l : r.all().stream().filter(l -> l.trainArgs().contains("--offload-optimizer")).toList()) {
            assertThat(l.memory()).isEqualTo(OffloadPlan.of(c, l.microBatch(), 1024, l.recompute()).device());
            assertThat(l.memory().optimizer()).isZero();
            assertThat(l.memory().total()).isEqualTo(
                    MemoryPlan.of(c, l.microBatch(), 1024, l.recompute()).total() - 8 * psi);
            Layout plain = r.all().stream().filter(p -> p.strategy().equals("single")
                    && p.recompute().equals(l.recompute())).findFirst().orElseThrow();
            assertThat(l.microBatch()).isGreaterThanOrEqualTo(plain.microBatch());
            assertThat(l.step().commSeconds()).isEqualTo(8.0 * c.parameterCount() / cluster.bandwidth());
        }
        assertThat(Planner.standard().plan(c, 16, 1024, cluster).all()).hasSize(4); // without --offload: as before
    }

    @Test
    void aDeviceTooSmallForFp32StatesGetsTheOffloadCommandLine() {
        StringWriter out = new StringWriter(), err = new StringWriter();
        var cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute("plan", "--model", "gpt2", "--global-batch", "4", "--device-memory", "1.6g",
                "--offload");
        assertThat(code).as(err.toString()).isZero();
        assertThat(out.toString()).contains("best: offload with --recompute layer")
                .contains("train --device cuda --model gpt2 --offload-optimizer --recompute layer --batch 2");
        int without = Main.commandLine().setOut(new PrintWriter(new StringWriter()))
                .setErr(new PrintWriter(new StringWriter())).execute("plan", "--model", "gpt2", "--global-batch",
                        "4", "--device-memory", "1.6g");
        assertThat(without).isEqualTo(1); // does not fit without offload
    }
}
