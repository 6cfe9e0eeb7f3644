package io.accel4j.cli.bench;

import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/** {@code accel4j bench}: quick timings of the kernels, one subcommand per kernel family. */
@Command(name = "bench",
        description = "Quick kernel timings (rigorous ones: the JMH module, see docs/PERFORMANCE.md).",
        subcommands = {GemmBenchCommand.class, TrainBenchCommand.class, LayoutBenchCommand.class,
            AsyncBenchCommand.class})
public final class BenchCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        throw new ParameterException(spec.commandLine(), "missing kernel: one of gemm, train, layouts, async");
    }
}
