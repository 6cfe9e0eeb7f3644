package io.accel4j.train;

import java.util.Locale;

/**
 * What one training step reports; {@link #toJson} is its line of {@code metrics.jsonl} ({@code loss_scale},
 * {@code skipped} and {@code skipped_steps} only in runs with loss scaling).
 *
 * @param step       the step's index (0-based: the number of updates before it)
 * @param trainLoss  the mean loss of this step's forward passes, before its update (NaN for a validation-only line)
 * @param valLoss    the validation loss before this step's update, NaN when not computed
 * @param stepMs     wall time of the step's forward, backward and update (validation excluded)
 * @param tokensPerS tokens trained on per second of {@code stepMs}
 * @param lr         the learning rate of the update
 * @param gradNorm   the global gradient norm before clipping (unscaled; NaN for a skipped step)
 * @param lossScale  fp16: the loss scale the step ran at; NaN without loss scaling (fp32, bf16)
 * @param skipped    fp16: whether the step's gradients overflowed, so it made no update
 * @param skippedSteps fp16: steps skipped so far in the run, this one included
 * @param dataMs     the time the step waited for its batches from the data loader (within {@code stepMs}); NaN
 *                   when not measured
 */
public record StepMetrics(int step, double trainLoss, double valLoss, double stepMs, double tokensPerS, float lr,
                          double gradNorm, float lossScale, boolean skipped, int skippedSteps, double dataMs) {

    /** A step whose data wait is not measured. */
    public StepMetrics(int step, double trainLoss, double valLoss, double stepMs, double tokensPerS, float lr,
                       double gradNorm, float lossScale, boolean skipped, int skippedSteps) {
        this(step, trainLoss, valLoss, stepMs, tokensPerS, lr, gradNorm, lossScale, skipped, skippedSteps,
                Double.NaN);
    }

    /** This step with the validation loss measured before it. */
    public StepMetrics withValLoss(double loss) {
        return new StepMetrics(step, trainLoss, loss, stepMs, tokensPerS, lr, gradNorm, lossScale, skipped,
                skippedSteps, dataMs);
    }

    /** This step with its data wait. */
    public StepMetrics withDataMs(double ms) {
        return new StepMetrics(step, trainLoss, valLoss, stepMs, tokensPerS, lr, gradNorm, lossScale, skipped,
                skippedSteps, ms);
    }

    /** A step without loss scaling (fp32, bf16). */
    public StepMetrics(int step, double trainLoss, double valLoss, double stepMs, double tokensPerS, float lr,
                       double gradNorm) {
        this(step, trainLoss, valLoss, stepMs, tokensPerS, lr, gradNorm, Float.NaN, false, 0);
    }

    /** A line for a validation without a training step (after the last one). */
    public static StepMetrics validationOnly(int step, double valLoss) {
        return new StepMetrics(step, Double.NaN, valLoss, Double.NaN, Double.NaN, Float.NaN, Double.NaN);
    }

    /** One JSON object on one line; fields that are NaN are left out. */
    public String toJson() {
        StringBuilder sb = new StringBuilder("{\"step\":").append(step);
        field(sb, "train_loss", trainLoss);
        field(sb, "val_loss", valLoss);
        field(sb, "step_ms", round(stepMs, 3));
        field(sb, "tokens_per_s", round(tokensPerS, 1));
        field(sb, "data_ms", round(dataMs, 3));
        field(sb, "lr", lr);
        field(sb, "grad_norm", gradNorm);
        if (Float.isFinite(lossScale)) {
            field(sb, "loss_scale", lossScale);
            sb.append(",\"skipped\":").append(skipped).append(",\"skipped_steps\":").append(skippedSteps);
        }
        return sb.append('}').toString();
    }

    /**
     * Reads back a line {@link #toJson} wrote (absent fields are NaN, or false/0 for the fp16 ones).
     *
     * @throws IllegalArgumentException when the line is not such an object, naming what is wrong
     */
    public static StepMetrics fromJson(String line) {
        String t = line.strip();
        if (!t.startsWith("{") || !t.endsWith("}")) {
            throw new IllegalArgumentException("not a metrics line (a JSON object): " + line);
        }
        java.util.Map<String, String> f = new java.util.HashMap<>();
        for (String kv : t.substring(1, t.length() - 1).split(",")) {
            int colon = kv.indexOf(':');
            if (colon < 0 || !kv.startsWith("\"") || kv.charAt(colon - 1) != '"') {
                throw new IllegalArgumentException("not a metrics field: '" + kv + "' in " + line);
            }
            f.put(kv.substring(1, colon - 1), kv.substring(colon + 1));
        }
        if (!f.containsKey("step")) {
            throw new IllegalArgumentException("a metrics line without a step: " + line);
        }
        try {
            return new StepMetrics(Integer.parseInt(f.get("step")), number(f, "train_loss"), number(f, "val_loss"),
                    number(f, "step_ms"), number(f, "tokens_per_s"), (float) number(f, "lr"),
                    number(f, "grad_norm"), (float) number(f, "loss_scale"), Boolean.parseBoolean(f.get("skipped")),
                    f.containsKey("skipped_steps") ? Integer.parseInt(f.get("skipped_steps")) : 0,
                    number(f, "data_ms"));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("a metrics line with a malformed number (" + e.getMessage() + "): "
                    + line, e);
        }
    }

    private static double number(java.util.Map<String, String> fields, String name) {
        String v = fields.get(name);
        return v == null ? Double.NaN : Double.parseDouble(v);
    }

    private static double round(double x, int digits) {
        if (!Double.isFinite(x)) {
            return x;
        }
        double f = Math.pow(10, digits);
        return Math.round(x * f) / f;
    }

    private static void field(StringBuilder sb, String name, double value) {
        if (Double.isFinite(value)) {
            sb.append(",\"").append(name).append("\":").append(String.format(Locale.ROOT, "%s", value));
        }
    }

    private static void field(StringBuilder sb, String name, float value) {
        if (Float.isFinite(value)) {
            sb.append(",\"").append(name).append("\":").append(Float.toString(value));
        }
    }
}
