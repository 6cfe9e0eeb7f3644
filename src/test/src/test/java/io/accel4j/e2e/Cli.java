package io.accel4j.e2e;

import io.accel4j.cli.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import picocli.CommandLine;

/** Runs the {@code accel4j} CLI in-process, as {@code bin/accel4j} would, and captures what it prints. */
final class Cli {

    private Cli() {}

    /** What one run printed and returned. */
    record Result(int exitCode, String out, String err) {

        List<String> outLines() {
            return out.lines().toList();
        }

        List<String> errLines() {
            return err.lines().filter(l -> !l.isBlank()).toList();
        }
    }

    static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute(args);
        return new Result(code, out.toString(), err.toString());
    }
}
