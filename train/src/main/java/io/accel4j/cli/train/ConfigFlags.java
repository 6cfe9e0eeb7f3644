package io.accel4j.cli.train;

import io.accel4j.train.TrainConfig;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** {@link TrainConfig}'s messages in the user's words: its field names as the {@code train} flags that set them. */
final class ConfigFlags {

    private ConfigFlags() {}

    /** {@link TrainConfig}'s field names and the flags that set them. */
    private static final Map<String, String> FLAGS = Map.ofEntries(
            Map.entry("batch", "--batch"), Map.entry("seq", "--seq"),
            Map.entry("steps", "--steps"), Map.entry("gradAccum", "--grad-accum"),
            Map.entry("lr", "--lr"), Map.entry("minLrFraction", "--min-lr-fraction"),
            Map.entry("gradClip", "--grad-clip"), Map.entry("valEvery", "--val-every"),
            Map.entry("valBatches", "--val-batches"), Map.entry("saveEvery", "--save-every"),
            Map.entry("warmup", "--warmup"), Map.entry("weightDecay", "--weight-decay"),
            Map.entry("beta1", "--beta1"), Map.entry("beta2", "--beta2"),
            Map.entry("eps", "--eps"), Map.entry("bucketBytes", "--bucket-mb"),
            Map.entry("zeroStage", "--zero"), Map.entry("seed", "--seed"));
    /** A whole word of a message that may be one of {@link #FLAGS}' names (not a part of a word). */
    private static final Pattern WORD = Pattern.compile("(?<![\\w-])[A-Za-z]\\w*");

    /**
     * The config's field names in {@code msg} as the flags the user typed: each whole word that is a field name is
     * replaced (so "steps" becomes "--steps" and the "eps" inside it stays as it is).
     */
    static String flagNames(String msg) {
        return WORD.matcher(msg).replaceAll(m -> Matcher.quoteReplacement(
                FLAGS.getOrDefault(m.group(), m.group())));
    }
}
