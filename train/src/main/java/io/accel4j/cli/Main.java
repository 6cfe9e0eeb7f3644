package io.accel4j.cli;

import io.accel4j.cli.bench.BenchCommand;
import io.accel4j.cli.doctor.DoctorCommand;
import io.accel4j.cli.launch.LaunchCommand;
import io.accel4j.cli.prepare.PrepareCommand;
import io.accel4j.cli.sample.SampleCommand;
import io.accel4j.cli.train.TrainCommand;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.util.Properties;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.ExecutionException;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine.Spec;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * The {@code accel4j} command line: {@code train}, {@code doctor}, {@code bench gemm} and {@code prepare}.
 *
 * <p>Exit codes: 0 success, 1 runtime failure, 2 usage error. Every error is one line on stderr,
 * {@code accel4j: error: …}; {@code --debug} adds the stack trace. Use {@link #commandLine()} (not a bare
 * {@code new CommandLine(new Main())}) to get that behaviour, in {@link #main} and in tests alike.
 */
@Command(name = "accel4j",
        mixinStandardHelpOptions = true,
        versionProvider = Main.Version.class,
        scope = ScopeType.INHERIT,
        sortOptions = false,
        description = "Pure-Java GPT-2 training: Vector API CPU kernels, CUDA through Panama (--device cuda), "
                + "data parallelism in one process, over Open MPI or over NCCL.",
        subcommands = {TrainCommand.class, LaunchCommand.class, DoctorCommand.class, BenchCommand.class,
            PrepareCommand.class, SampleCommand.class, io.accel4j.cli.plan.PlanCommand.class,
            CommandLine.HelpCommand.class},
        footer = {"", "bin/accel4j example mlp|chars trains a model of its own through the Java API (examples/)."})
public final class Main implements Callable<Integer> {

    /** What every error line starts with. */
    public static final String ERROR_PREFIX = "accel4j: error: ";

    @Spec
    CommandSpec spec;

    @Option(names = "--debug", scope = ScopeType.INHERIT,
            description = "On failure, print the stack trace after the error line.")
    boolean debug;

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    /** The CLI with its error handling: one-line messages, exit codes 1 (runtime) and 2 (usage). */
    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new Main());
        cl.setParameterExceptionHandler(Main::usageError);
        cl.setExecutionExceptionHandler(Main::runtimeError);
        cl.setExecutionStrategy(Main::executeCatchingLinkageErrors);
        return cl;
    }

    @Override
    public Integer call() {
        throw new ParameterException(spec.commandLine(), "missing command: one of train, launch, sample, prepare, doctor, bench");
    }

    /**
     * Runs the parsed command. A {@link LinkageError} (a kernel class whose static initialiser failed, e.g. on a bad
     * {@code -Daccel4j.vector.bits}, or the Vector API module missing from the launch) is an {@code Error} that
     * picocli would let escape with a stack trace; it becomes an ordinary runtime failure here.
     */
    private static int executeCatchingLinkageErrors(ParseResult parseResult) {
        try {
            return new CommandLine.RunLast().execute(parseResult);
        } catch (LinkageError e) {
            CommandLine last = parseResult.asCommandLineList().getLast();
            throw new ExecutionException(last, e.toString(), new CliException(linkageMessage(e), e));
        }
    }

    private static String linkageMessage(LinkageError e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String msg = root.getMessage() != null ? root.getMessage() : root.toString();
        if (msg.contains("jdk/incubator/vector") || msg.contains("jdk.incubator.vector")) {
            return "the Vector API module is not loaded (" + msg + "); launch with --add-modules=jdk.incubator.vector,"
                    + " as bin/accel4j does";
        }
        return msg;
    }

    /** picocli's usage errors: one line with a pointer to the help, exit 2. */
    static int usageError(ParameterException ex, String[] args) {
        CommandLine cl = ex.getCommandLine();
        String msg = oneLine(ex.getMessage());
        if (ex instanceof UnmatchedArgumentException u && !u.getSuggestions().isEmpty()) {
            msg += "; did you mean " + String.join(" or ", u.getSuggestions()) + "?";
        }
        PrintWriter err = cl.getErr();
        err.println(ERROR_PREFIX + msg + " (see '" + cl.getCommandSpec().qualifiedName() + " --help')");
        err.flush();
        return cl.getCommandSpec().exitCodeOnInvalidInput();
    }

    /** Exceptions from a running command: one line, the stack trace only with --debug, exit 1. */
    static int runtimeError(Exception ex, CommandLine cl, ParseResult parseResult) {
        PrintWriter err = cl.getErr();
        boolean debug = debugRequested(parseResult);
        String msg;
        if (ex instanceof CliException) {
            msg = ex.getMessage();
        } else if (ex instanceof java.io.IOException || ex instanceof java.io.UncheckedIOException) {
            msg = IoMessages.describe(ex); // a file the user named or owns: the file and the problem in words
        } else {
            msg = ex.getMessage() != null ? ex.getMessage() : ex.getClass().getSimpleName();
            if (!debug) {
                msg += " (rerun with --debug for the stack trace)";
            }
        }
        err.println(ERROR_PREFIX + oneLine(msg));
        if (debug) {
            ex.printStackTrace(err);
        }
        err.flush();
        return cl.getCommandSpec().exitCodeOnExecutionException();
    }

    private static boolean debugRequested(ParseResult parseResult) {
        for (ParseResult pr = parseResult; pr != null; pr = pr.subcommand()) {
            if (pr.hasMatchedOption("--debug")) {
                return true;
            }
        }
        return false;
    }

    private static String oneLine(String s) {
        return s == null ? "" : s.strip().replaceAll("\\s*\\R\\s*", "; ");
    }

    /** {@code --version}: the project version (filtered in by Maven) and the JVM running it. */
    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[] {
                "accel4j " + projectVersion(),
                "Java " + Runtime.version() + " (" + System.getProperty("java.vendor") + ", "
                        + System.getProperty("java.home") + ")"
            };
        }
    }

    /** The project version from {@code io/accel4j/cli/version.properties}, or {@code "unknown"}. */
    public static String projectVersion() {
        try (InputStream in = Main.class.getResourceAsStream("version.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }
}
