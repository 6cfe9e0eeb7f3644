package io.accel4j.cli.prepare;

import io.accel4j.cli.CliException;
import io.accel4j.cli.IoMessages;
import io.accel4j.train.data.TokenFile;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.ShortBuffer;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j prepare --text FILE… --out DIR}: text files to llm.c token files with a byte-level vocabulary.
 * Every byte is a token (0..255): a 256-token vocabulary that needs no tokenizer (the ids are in range for a GPT-2
 * sized model too, but they are not GPT-2's BPE tokens). The last {@code --val-fraction} of each file, moved to the
 * nearest line start within half the validation part's length, goes to {@code DIR/val.bin}, the rest to
 * {@code DIR/train.bin}, each in file order.
 */
@Command(name = "prepare", sortOptions = false,
        description = {
            "Turn text files into token files for training: byte-level tokens (each byte is a token, vocabulary 256),"
                    + " llm.c's format.",
            "Writes DIR/train.bin and DIR/val.bin (the last --val-fraction of each file, split at a line start)."})
public final class PrepareCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--text", arity = "1..*", required = true, paramLabel = "FILE",
            description = "Text files to read as bytes.")
    List<Path> texts;

    @Option(names = "--out", required = true, paramLabel = "DIR",
            description = "Directory for train.bin and val.bin (created if missing).")
    Path out;

    @Option(names = "--val-fraction", paramLabel = "F", defaultValue = "0.1",
            description = "Fraction of each file for validation, in [0, 1); 0: no val.bin (default: ${DEFAULT-VALUE}).")
    double valFraction;

    @Override
    public Integer call() {
        if (!(valFraction >= 0 && valFraction < 1)) {
            throw new ParameterException(spec.commandLine(), "--val-fraction must be in [0, 1), got " + valFraction);
        }
        List<byte[]> contents = new ArrayList<>();
        List<Integer> cuts = new ArrayList<>();
        long trainCount = 0;
        long valCount = 0;
        for (Path text : texts) {
            byte[] bytes = read(text);
            int cut = split(bytes, valFraction);
            contents.add(bytes);
            cuts.add(cut);
            trainCount += cut;
            valCount += bytes.length - cut;
        }
        long total = trainCount + valCount;
        if (total == 0) {
            throw new CliException("the text file" + (texts.size() == 1 ? " " : "s ") + String.join(", ",
                    texts.stream().map(Path::toString).toList()) + (texts.size() == 1 ? " is" : " are") + " empty: "
                    + "nothing to prepare");
        }
        if (trainCount + valCount > Integer.MAX_VALUE) {
            throw new CliException("the text files hold " + total + " bytes, more than one token file can take ("
                    + Integer.MAX_VALUE + "): prepare them in parts");
        }
        if (trainCount == 0 || (valFraction > 0 && valCount == 0)) {
            throw new CliException("the input (" + total + " bytes) is too small to split with --val-fraction "
                    + valFraction + ": give more text" + (valFraction > 0 ? " or use --val-fraction 0" : ""));
        }
        ShortBuffer train = ShortBuffer.allocate((int) trainCount);
        ShortBuffer val = ShortBuffer.allocate((int) valCount);
        for (int i = 0; i < contents.size(); i++) {
            byte[] bytes = contents.get(i);
            int cut = cuts.get(i);
            for (int j = 0; j < bytes.length; j++) {
                (j < cut ? train : val).put((short) (bytes[j] & 0xFF));
            }
        }
        Path trainFile = out.resolve("train.bin");
        Path valFile = out.resolve("val.bin");
        try {
            Files.createDirectories(out);
            TokenFile.write(trainFile, train.flip());
            if (valCount > 0) {
                TokenFile.write(valFile, val.flip());
            }
        } catch (IOException e) {
            throw new CliException("cannot write the token files in " + out + ": " + IoMessages.describe(e, out), e);
        }
        PrintWriter w = spec.commandLine().getOut();
        w.println(String.format(Locale.ROOT, "prepared %d file%s (%,d bytes): %s %,d tokens%s (byte-level, "
                        + "vocabulary 256)", texts.size(), texts.size() == 1 ? "" : "s", total, trainFile, trainCount,
                valCount > 0 ? String.format(Locale.ROOT, ", %s %,d tokens", valFile, valCount) : ", no val.bin"));
        w.flush();
        return 0;
    }

    private static byte[] read(Path text) {
        if (Files.isDirectory(text)) {
            throw new CliException("the text file " + text + " is a directory");
        }
        try {
            return Files.readAllBytes(text);
        } catch (NoSuchFileException e) {
            throw new CliException("the text file " + text + " does not exist", e);
        } catch (IOException | OutOfMemoryError e) {
            throw new CliException("cannot read the text file " + text + ": " + (e instanceof OutOfMemoryError
                    ? "it does not fit in memory (" + message(e) + ")" : IoMessages.describe(e, text)), e);
        }
    }

    private static String message(Throwable e) {
        return e.getMessage() != null ? e.getMessage() : e.toString();
    }

    /**
     * Where the validation part of a file starts: {@code length − round(length·fraction)}, moved to the nearest line
     * start (a position after a newline) at most half the validation part's length away, if there is one.
     */
    static int split(byte[] bytes, double fraction) {
        int n = bytes.length;
        int valLength = (int) Math.round(n * fraction);
        int cut = n - valLength;
        if (valLength == 0 || cut == 0) {
            return cut;
        }
        int reach = valLength / 2;
        for (int d = 0; d <= reach; d++) {
            if (lineStart(bytes, cut - d)) {
                return cut - d;
            }
            if (lineStart(bytes, cut + d)) {
                return cut + d;
            }
        }
        return cut;
    }

    /** Whether p is a line start strictly inside the file, so that both parts stay non-empty. */
    private static boolean lineStart(byte[] bytes, int p) {
        return p > 0 && p < bytes.length && bytes[p - 1] == '\n';
    }
}
