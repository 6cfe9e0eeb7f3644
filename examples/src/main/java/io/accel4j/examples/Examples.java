package io.accel4j.examples;

import io.accel4j.core.DType;
import java.util.Locale;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The examples' entry point: {@code bin/accel4j example mlp|chars [options]}. Each trains a model of its own through
 * the Java API ({@link io.accel4j.fit.Learner}) on data it makes or ships.
 */
@Command(name = "accel4j example", mixinStandardHelpOptions = true,
        description = "Trains an example model through accel4j's Java API.",
        subcommands = {MlpSpirals.class, CharTransformer.class})
public final class Examples implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "name an example: mlp or chars");
    }

    public static void main(String[] args) {
        CommandLine cl = new CommandLine(new Examples());
        cl.setExecutionExceptionHandler((e, line, parsed) -> {
            if (e instanceof IllegalArgumentException || e instanceof IllegalStateException) {
                line.getErr().println("accel4j example: error: " + e.getMessage());
                return 1;
            }
            throw e;
        });
        System.exit(cl.execute(args));
    }

    /** Fails a usage check with its message (exit 2). */
    static void check(boolean ok, String message) {
        if (!ok) {
            throw new CommandLine.ParameterException(new CommandLine(new Examples()), message);
        }
    }

    /**
     * adamw, adamw-bf16 (fp32 master weights, bf16 working weights by stochastic rounding, seeded by {@code seed}),
     * sgd (momentum 0.9) or lion, each with {@code weightDecay} on the tensors that take it.
     */
    static io.accel4j.optim.OptimizerSpec optimizer(String name, float weightDecay, long seed) {
        return switch (name) {
            case "adamw" -> io.accel4j.optim.AdamW.of(weightDecay);
            case "adamw-bf16" -> io.accel4j.optim.Bf16AdamW.of(weightDecay, seed);
            case "sgd" -> io.accel4j.optim.Sgd.of(0.9f, weightDecay);
            case "lion" -> io.accel4j.optim.Lion.of(weightDecay);
            default -> throw new CommandLine.ParameterException(new CommandLine(new Examples()),
                    "--optimizer must be adamw, adamw-bf16, sgd or lion, got '" + name + "'");
        };
    }

    /** fp32, bf16 or fp16. */
    static final class PrecisionConverter implements CommandLine.ITypeConverter<DType> {
        @Override
        public DType convert(String value) {
            return switch (value.toLowerCase(Locale.ROOT)) {
                case "fp32" -> DType.FP32;
                case "bf16" -> DType.BF16;
                case "fp16" -> DType.FP16;
                default -> throw new CommandLine.TypeConversionException("expected fp32, bf16 or fp16, got '" + value
                        + "'");
            };
        }
    }
}
