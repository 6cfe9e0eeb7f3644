package io.accel4j.cli.prepare;

import io.accel4j.cli.CliException;
import io.accel4j.cli.IoMessages;
import io.accel4j.cli.token.TokenizerOptions;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.token.Tokenizer;
import io.accel4j.train.token.TokenizerFile;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j prepare --text FILE… --out DIR [--tokenizer byte|gpt2 | --tokenizer-files DIR]}: text files to
 * llm.c token files. Byte-level by default: every byte is a token (0..255), a 256-token vocabulary that needs no
 * tokenizer. With {@code --tokenizer gpt2} (or GPT-2-format files) the text is GPT-2 BPE tokens, each part of a file
 * preceded by the end-of-text token (as llm.c's data scripts mark documents), and {@code DIR/tokenizer.bin} (llm.c's
 * tokenizer format) is written for {@code sample}. The last {@code --val-fraction} of each file, moved to the
 * nearest line start within half the validation part's length, goes to {@code DIR/val.bin}, the rest to
 * {@code DIR/train.bin}, each in file order.
 */
@Command(name = "prepare", sortOptions = false,
        description = {
            "Turn text files into token files for training, in llm.c's format: byte-level tokens (each byte is a "
                    + "token, vocabulary 256) or GPT-2's BPE (--tokenizer gpt2, vocabulary 50257).",
            "Writes DIR/train.bin and DIR/val.bin (the last --val-fraction of each file, split at a line start); "
                    + "with a BPE tokenizer also DIR/tokenizer.bin for sample.",
            "Text that is not valid UTF-8 is encoded as bytes (each invalid byte its own token), as GPT-2 does."})
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

    @Mixin
    TokenizerOptions tokenizerOptions;

    @Override
    public Integer call() {
        if (!(valFraction >= 0 && valFraction < 1)) {
            throw new ParameterException(spec.commandLine(), "--val-fraction must be in [0, 1), got " + valFraction);
        }
        Tokenizer tokenizer = tokenizerOptions.encoder(m -> new ParameterException(spec.commandLine(), m));
        if (tokenizer.size() - 1 > TokenFile.MAX_TOKEN) {
            throw new CliException("the tokenizer (" + tokenizer.describe() + ") has ids above " + TokenFile.MAX_TOKEN
                    + ", more than an llm.c token file (uint16) can hold");
        }
        PrintWriter err = spec.commandLine().getErr();
        List<int[]> trainParts = new ArrayList<>();
        List<int[]> valParts = new ArrayList<>();
        long total = 0;
        long trainCount = 0;
        long valCount = 0;
        for (Path text : texts) {
            byte[] bytes = read(text);
            int cut = split(bytes, valFraction);
            total += bytes.length;
            long invalid = tokenizer.invalidBytes(bytes);
            if (invalid > 0) {
                err.println("accel4j: note: " + text + " has " + invalid + " byte" + (invalid == 1 ? "" : "s")
                        + " that are not valid UTF-8; each is encoded as its own byte token (GPT-2's BPE works on "
                        + "bytes), so the text decodes back exactly");
                err.flush();
            }
            int[] train = document(tokenizer, Arrays.copyOfRange(bytes, 0, cut));
            int[] val = document(tokenizer, Arrays.copyOfRange(bytes, cut, bytes.length));
            trainParts.add(train);
            valParts.add(val);
            trainCount += train.length;
            valCount += val.length;
        }
        if (total == 0) {
            throw new CliException("the text file" + (texts.size() == 1 ? " " : "s ") + String.join(", ",
                    texts.stream().map(Path::toString).toList()) + (texts.size() == 1 ? " is" : " are") + " empty: "
                    + "nothing to prepare");
        }
        if (trainCount + valCount > Integer.MAX_VALUE) {
            throw new CliException("the text files hold " + (trainCount + valCount) + " tokens, more than one token "
                    + "file can take (" + Integer.MAX_VALUE + "): prepare them in parts");
        }
        if (trainCount == 0 || (valFraction > 0 && valCount == 0)) {
            throw new CliException("the input (" + total + " bytes) is too small to split with --val-fraction "
                    + valFraction + ": give more text" + (valFraction > 0 ? " or use --val-fraction 0" : ""));
        }
        Path trainFile = out.resolve("train.bin");
        Path valFile = out.resolve("val.bin");
        Path tokenizerFile = out.resolve("tokenizer.bin");
        boolean writeTokenizer = !tokenizerOptions.byteLevel();
        try {
            Files.createDirectories(out);
            TokenFile.write(trainFile, concat(trainParts, trainCount));
            if (valCount > 0) {
                TokenFile.write(valFile, concat(valParts, valCount));
            }
            if (writeTokenizer) {
                TokenizerFile.write(tokenizerFile, tokenizer);
            }
        } catch (IOException e) {
            throw new CliException("cannot write the token files in " + out + ": " + IoMessages.describe(e, out), e);
        }
        PrintWriter w = spec.commandLine().getOut();
        w.println(String.format(Locale.ROOT, "prepared %d file%s (%,d bytes): %s %,d tokens%s (%s)%s",
                texts.size(), texts.size() == 1 ? "" : "s", total, trainFile, trainCount,
                valCount > 0 ? String.format(Locale.ROOT, ", %s %,d tokens", valFile, valCount) : ", no val.bin",
                tokenizer.describe(), writeTokenizer ? "; tokenizer for sample: " + tokenizerFile : ""));
        w.flush();
        return 0;
    }

    /**
     * One part of a file as tokens: the end-of-text token first if the tokenizer has one (as llm.c's data scripts
     * mark each document), then the text's tokens; empty if the text is.
     */
    private static int[] document(Tokenizer tokenizer, byte[] text) {
        if (text.length == 0) {
            return new int[0];
        }
        int[] body = tokenizer.encode(text);
        if (tokenizer.eotToken() < 0) {
            return body;
        }
        int[] doc = new int[body.length + 1];
        doc[0] = tokenizer.eotToken();
        System.arraycopy(body, 0, doc, 1, body.length);
        return doc;
    }

    private static int[] concat(List<int[]> parts, long count) {
        int[] all = new int[(int) count];
        int p = 0;
        for (int[] part : parts) {
            System.arraycopy(part, 0, all, p, part.length);
            p += part.length;
        }
        return all;
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
