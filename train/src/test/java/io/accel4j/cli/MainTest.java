package io.accel4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** Exit codes and the one-line error format, with commands that fail on purpose. */
class MainTest {

    @Command(name = "boom")
    static final class Boom implements Callable<Integer> {
        @CommandLine.Option(names = "--kind")
        String kind = "runtime";

        @Override
        public Integer call() {
            switch (kind) {
                case "cli" -> throw new CliException("the token file data/x.bin is missing: run prepare first");
                case "linkage" -> throw new ExceptionInInitializerError(new IllegalArgumentException("bad width"));
                default -> throw new IllegalStateException("kernel exploded");
            }
        }
    }

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.addSubcommand(new Boom());
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Result(cl.execute(args), out.toString(), err.toString());
    }

    @Test
    void aRuntimeFailureIsOneLineAndExit1() {
        Result r = run("boom");

        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err().lines().toList()).containsExactly(
                "accel4j: error: kernel exploded (rerun with --debug for the stack trace)");
    }

    @Test
    void aCliExceptionIsItsMessageAlone() {
        Result r = run("boom", "--kind", "cli");

        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err().lines().toList()).containsExactly(
                "accel4j: error: the token file data/x.bin is missing: run prepare first");
    }

    @Test
    void aFailedStaticInitialiserIsARuntimeFailureToo() {
        Result r = run("boom", "--kind", "linkage");

        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err().lines().toList()).containsExactly("accel4j: error: bad width");
    }

    @Test
    void debugAddsTheStackTrace() {
        Result r = run("--debug", "boom");

        assertThat(r.code()).isEqualTo(1);
        assertThat(r.err().lines().findFirst()).hasValue("accel4j: error: kernel exploded");
        assertThat(r.err()).contains("java.lang.IllegalStateException: kernel exploded", "at io.accel4j.cli.MainTest");
    }

    @Test
    void debugIsAcceptedAfterTheSubcommandToo() {
        Result r = run("boom", "--debug");

        assertThat(r.err()).contains("at io.accel4j.cli.MainTest");
    }

    @Test
    void usageErrorsExit2WithAPointerToHelp() {
        Result r = run("boom", "--kind");

        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err().lines().toList()).singleElement().asString()
                .startsWith("accel4j: error: ").endsWith("(see 'accel4j boom --help')");
    }

    @Test
    void versionNamesTheProjectVersion() {
        Result r = run("--version");

        assertThat(r.code()).isZero();
        assertThat(r.out()).startsWith("accel4j ").doesNotContain("${project.version}").doesNotContain("unknown");
    }
}
