package io.accel4j.cli.train;

import io.accel4j.train.io.AtomicWrite;
import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;

/**
 * The flags a training run was started with, saved beside its checkpoint ({@value #FILE}, one {@code --flag=value}
 * per line, paths absolute) so that {@code --resume} continues the same run: every flag not given again is restored,
 * and one given again must agree with the saved value unless it is one of {@link #MAY_CHANGE} (a different value of
 * a flag that matters is a usage error naming both values).
 */
final class RunConfig {

    /** The file in the run directory. */
    static final String FILE = "run.properties";

    /** Flags that are not part of a run's configuration: how this invocation runs, not what it trains. */
    static final Set<String> NOT_SAVED = Set.of("--resume", "--out", "--overwrite", "--debug", "--help", "--version",
            "--profile", "--find-batch-size", "--memory-budget", "--global-batch",
            "--micro-batches", "--schedule-pp"); // a pipeline saves its micro-batches as --grad-accum

    /**
     * Flags a resumed run may change: how long it goes on, how often it validates and saves, where it runs and with
     * how many threads, how it shards and communicates (the results are the same), what it reports. The others change what is trained (data, model, batch, optimizer, schedule,
     * precision, ranks) and a resume keeps them.
     */
    static final List<String> MAY_CHANGE = List.of("--steps", "--val-every", "--val-batches", "--val-data",
            "--save-every", "--keep-checkpoints", "--save-every-keep", "--threads", "--device", "--recompute",
            "--bucket-mb", "--zero", "--collective-timeout", "--metrics-out", "--samples", "--eval-problems", "--pp",
            "--offload-optimizer", "--offload-overlap", "--tp", "--grad-storage");

    private final Map<String, String> values;

    private RunConfig(Map<String, String> values) {
        this.values = values;
    }

    /**
     * This invocation's configuration: each saved flag's value as given on the command line, else as
     * {@code restored} from the resumed run, else its default (flags without a value and no default are left out).
     */
    static RunConfig of(CommandSpec spec, Map<String, String> restored) {
        ParseResult pr = spec.commandLine().getParseResult();
        Map<String, String> values = new TreeMap<>();
        for (OptionSpec o : spec.options()) {
            String name = o.longestName();
            if (NOT_SAVED.contains(name) || !name.startsWith("--")) {
                continue;
            }
            String s;
            if (pr.hasMatchedOption(name)) {
                s = o.arity().max() == 0 ? String.valueOf(o.<Object>getValue()) : last(o.stringValues());
            } else if (restored.containsKey(name)) {
                s = restored.get(name);
            } else {
                s = o.arity().max() == 0 ? String.valueOf(o.<Object>getValue()) : o.defaultValue();
            }
            if (s != null) {
                values.put(name, o.type() == Path.class ? Path.of(s).toAbsolutePath().normalize().toString() : s);
            }
        }
        return new RunConfig(values);
    }

    private static String last(List<String> l) {
        return l.isEmpty() ? null : l.getLast();
    }

    /** This configuration with {@code flag} set to {@code value} (e.g. the batch --find-batch-size chose). */
    RunConfig with(String flag, Object value) {
        Map<String, String> v = new TreeMap<>(values);
        v.put(flag, String.valueOf(value));
        return new RunConfig(v);
    }

    /** The saved values, by flag. */
    Map<String, String> values() {
        return java.util.Collections.unmodifiableMap(values);
    }

    /** Writes {@value #FILE} into {@code dir} atomically. */
    void write(Path dir) throws IOException {
        StringBuilder sb = new StringBuilder("# the flags of this accel4j training run; --resume restores them\n");
        Properties p = new Properties();
        for (Map.Entry<String, String> e : values.entrySet()) {
            p.clear();
            p.setProperty(e.getKey(), e.getValue());
            StringWriter line = new StringWriter();
            p.store(line, null);
            line.toString().lines().filter(l -> !l.startsWith("#")).forEach(l -> sb.append(l).append('\n'));
        }
        byte[] bytes = sb.toString().getBytes(StandardCharsets.UTF_8);
        AtomicWrite.write(dir.resolve(FILE), ch -> {
            ByteBuffer b = ByteBuffer.wrap(bytes);
            while (b.hasRemaining()) {
                ch.write(b);
            }
        });
    }

    /** The flags saved in {@code dir}, or null when it has no {@value #FILE} (a checkpoint from an older version). */
    static Map<String, String> read(Path dir) throws IOException {
        Path file = dir.resolve(FILE);
        Properties p = new Properties();
        try (var in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            p.load(in);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IllegalArgumentException | java.nio.charset.CharacterCodingException e) {
            throw new FileFormatException(file, "contents", "are not a properties file (" + e.getMessage()
                    + "): the file is corrupt");
        }
        Map<String, String> m = new LinkedHashMap<>();
        for (String k : new TreeMap<>(p).keySet().stream().map(String::valueOf).toList()) {
            m.put(k, p.getProperty(k));
        }
        return m;
    }

    /**
     * Resuming the run in {@code dir}: sets every saved flag the command line does not give, and checks the given
     * ones that matter against the saved values (a difference is {@code usage}'s exception, naming the flag and
     * both values). Returns the restored flags' saved strings (for {@link #of}).
     *
     * @throws FileFormatException when {@value #FILE} is corrupt or holds a value its flag does not take
     */
    static Map<String, String> restore(CommandSpec spec, Path dir, Function<String, RuntimeException> usage)
            throws IOException {
        Map<String, String> saved = read(dir);
        if (saved == null) {
            return Map.of();
        }
        ParseResult pr = spec.commandLine().getParseResult();
        Map<String, String> known = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : saved.entrySet()) {
            if (spec.findOption(e.getKey()) != null && !NOT_SAVED.contains(e.getKey()) && e.getKey().startsWith("--")) {
                known.put(e.getKey(), e.getValue()); // others: flags of another version, nothing to restore
            }
        }
        Map<String, Object> values = typed(spec, dir.resolve(FILE), known);
        Map<String, String> restored = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : known.entrySet()) {
            String name = e.getKey();
            OptionSpec o = spec.findOption(name);
            Object value = values.get(name);
            if (pr.hasMatchedOption(name)) {
                if (!MAY_CHANGE.contains(name) && !same(o.getValue(), value)
                        && !(name.equals("--ranks") && sameReplicas(spec, pr, known, values))) {
                    String given = o.arity().max() == 0 ? String.valueOf(o.<Object>getValue())
                            : last(o.stringValues());
                    throw usage.apply(name + " " + given + " differs from the resumed run's " + name + " "
                            + e.getValue() + " (" + dir.resolve(FILE) + "): a resumed run keeps the flags that "
                            + "change what it trains; omit " + name + " (only " + String.join(", ", MAY_CHANGE)
                            + " may change)");
                }
            } else {
                o.setValue(value);
                restored.put(name, e.getValue());
            }
        }
        for (OptionSpec o : spec.options()) {
            String name = o.longestName();
            if (!saved.containsKey(name) && pr.hasMatchedOption(name) && !NOT_SAVED.contains(name)
                    && !MAY_CHANGE.contains(name) && name.startsWith("--")) {
                throw usage.apply(name + " was not given to the resumed run (" + dir.resolve(FILE) + "): a resumed "
                        + "run keeps the flags that change what it trains; omit " + name);
            }
        }
        return restored;
    }

    /**
     * Whether the given {@code --ranks} keeps the resumed run's data-parallel width D = ranks / (T·P) under the
     * {@code --tp} and {@code --pp} in force (given, else saved): a pipeline's or tensor-parallel run's ranks count
     * D·T·P, the trainer's D, so a layout change moves {@code --ranks} with it while the global batch stays (in
     * process, one rank with {@code --pp}/{@code --tp} means one replica).
     */
    private static boolean sameReplicas(CommandSpec spec, ParseResult pr, Map<String, String> known,
                                        Map<String, Object> saved) {
        int before = replicas(saved.get("--ranks"), saved.get("--tp"), saved.get("--pp"));
        int after = replicas(spec.findOption("--ranks").getValue(),
                pr.hasMatchedOption("--tp") || !known.containsKey("--tp") ? spec.findOption("--tp").getValue()
                        : saved.get("--tp"),
                pr.hasMatchedOption("--pp") || !known.containsKey("--pp") ? spec.findOption("--pp").getValue()
                        : saved.get("--pp"));
        return before > 0 && before == after;
    }

    /** D of {@code ranks} over T·P (1 for one in-process rank), or −1 when it is not a whole number. */
    private static int replicas(Object ranks, Object tp, Object pp) {
        int n = ranks instanceof Integer r ? r : 1;
        int split = (tp instanceof Integer t ? t : 1) * (pp instanceof Integer p ? p : 1);
        if (n == 1) {
            return 1;
        }
        return split > 0 && n % split == 0 ? n / split : -1;
    }

    /**
     * The values picocli makes of the saved flags for {@code train}, parsed together into a fresh command (so nothing
     * else changes); when that fails, flag by flag to name the one at fault.
     */
    private static Map<String, Object> typed(CommandSpec spec, Path file, Map<String, String> saved)
            throws FileFormatException {
        List<String> args = new java.util.ArrayList<>();
        saved.forEach((name, value) -> args.addAll(args(spec, name, value)));
        CommandLine fresh = new CommandLine(new TrainCommand());
        try {
            fresh.parseArgs(args.toArray(String[]::new));
        } catch (ParameterException ex) {
            for (Map.Entry<String, String> e : saved.entrySet()) {
                try {
                    new CommandLine(new TrainCommand()).parseArgs(args(spec, e.getKey(), e.getValue())
                            .toArray(String[]::new));
                } catch (ParameterException one) {
                    throw new FileFormatException(file, e.getKey(), "is '" + e.getValue() + "', which " + e.getKey()
                            + " does not take (" + one.getMessage() + "): the file is corrupt");
                }
            }
            throw new FileFormatException(file, "contents", "do not parse together (" + ex.getMessage() + "): the "
                    + "file is corrupt");
        }
        Map<String, Object> values = new LinkedHashMap<>();
        for (String name : saved.keySet()) {
            values.put(name, fresh.getCommandSpec().findOption(name).getValue());
        }
        return values;
    }

    /** The arguments that set {@code name} to {@code value}: a flag without a value only when true. */
    private static List<String> args(CommandSpec spec, String name, String value) {
        OptionSpec o = spec.findOption(name);
        return o.arity().max() == 0 ? (Boolean.parseBoolean(value) ? List.of(name) : List.of())
                : List.of(name, value);
    }

    private static boolean same(Object a, Object b) {
        if (a instanceof Path p && b instanceof Path q) {
            return p.toAbsolutePath().normalize().equals(q.toAbsolutePath().normalize());
        }
        return Objects.equals(a, b);
    }
}
