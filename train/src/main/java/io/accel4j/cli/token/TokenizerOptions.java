package io.accel4j.cli.token;

import io.accel4j.cli.CliException;
import io.accel4j.cli.IoMessages;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.token.BpeTokenizer;
import io.accel4j.train.token.ByteTokenizer;
import io.accel4j.train.token.Gpt2Files;
import io.accel4j.train.token.Tokenizer;
import io.accel4j.train.token.TokenizerFile;
import io.accel4j.train.token.Vocabularies;
import io.accel4j.train.token.Vocabulary;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Function;
import picocli.CommandLine.Option;

/**
 * {@code --tokenizer byte|gpt2|FILE} and {@code --tokenizer-files DIR}, shared by {@code prepare} and {@code sample}:
 * byte-level (each byte a token), GPT-2's BPE (JTokkit's r50k_base, inside the jar), GPT-2-format
 * {@code encoder.json}/{@code vocab.bpe} in a directory, or (decoding only) an llm.c tokenizer file.
 */
public final class TokenizerOptions {

    @Option(names = "--tokenizer", paramLabel = "byte|gpt2|FILE", defaultValue = "byte",
            description = "byte: each byte is a token (vocabulary 256); gpt2: GPT-2's byte-level BPE (50257 tokens, "
                    + "shipped in the jar, nothing downloaded); for sample also an llm.c tokenizer file "
                    + "(gpt2_tokenizer.bin, e.g. the tokenizer.bin prepare writes) (default: ${DEFAULT-VALUE}).")
    String tokenizer;

    @Option(names = "--tokenizer-files", paramLabel = "DIR", description = "A directory with GPT-2-format "
            + "encoder.json and vocab.bpe to use instead of --tokenizer.")
    Path files;

    /** The name for messages. */
    private String spec() {
        return files != null ? "--tokenizer-files " + files : "--tokenizer " + tokenizer;
    }

    /** Whether the text stays byte-level (no end-of-text token, no tokenizer file). */
    public boolean byteLevel() {
        return files == null && "byte".equals(tokenizer);
    }

    /** A tokenizer that can encode; usage error for a decode-only tokenizer file. */
    public Tokenizer encoder(Function<String, RuntimeException> usage) {
        check(usage);
        if (files != null) {
            return readFiles(usage);
        }
        return switch (tokenizer) {
            case "byte" -> ByteTokenizer.INSTANCE;
            case "gpt2" -> BpeTokenizer.gpt2();
            default -> throw usage.apply("--tokenizer " + tokenizer + ": expected byte or gpt2 here (a tokenizer "
                    + "file holds no merges and can only decode; give --tokenizer-files DIR for encoder.json and "
                    + "vocab.bpe)");
        };
    }

    /**
     * A vocabulary to decode with and a tokenizer to encode a prompt with: for a tokenizer file, GPT-2's or the byte
     * tokenizer if the file holds exactly their tokens, else a usage error.
     */
    public Pair both(Function<String, RuntimeException> usage) {
        check(usage);
        if (files != null || tokenizer.equals("byte") || tokenizer.equals("gpt2")) {
            Tokenizer t = encoder(usage);
            return new Pair(t, t);
        }
        Path file = Path.of(tokenizer);
        Vocabulary table;
        try {
            table = TokenizerFile.read(file);
        } catch (FileFormatException e) {
            throw new CliException("--tokenizer: " + e.getMessage(), e);
        } catch (IOException e) {
            throw new CliException("cannot read the tokenizer file " + file + ": " + IoMessages.describe(e, file), e);
        }
        if (Vocabularies.sameTokens(table, ByteTokenizer.INSTANCE)) {
            return new Pair(ByteTokenizer.INSTANCE, table);
        }
        if (table.size() == 50257) {
            BpeTokenizer gpt2 = BpeTokenizer.gpt2();
            if (Vocabularies.sameTokens(table, gpt2)) {
                return new Pair(gpt2, table);
            }
        }
        throw usage.apply("--tokenizer " + file + " is not GPT-2's vocabulary, and a tokenizer file holds no merges "
                + "to encode the prompt with: give --tokenizer-files DIR (encoder.json, vocab.bpe)");
    }

    /** An encoder (for the prompt) and the vocabulary to decode with. */
    public record Pair(Tokenizer encoder, Vocabulary decoder) {}

    private void check(Function<String, RuntimeException> usage) {
        if (files != null) {
            if (!"byte".equals(tokenizer)) {
                throw usage.apply("give either --tokenizer or --tokenizer-files, not both");
            }
            if (!Files.isDirectory(files)) {
                throw usage.apply("--tokenizer-files " + files + " is not a directory (it should hold "
                        + Gpt2Files.ENCODER + " and " + Gpt2Files.MERGES + ")");
            }
            return;
        }
        if (!tokenizer.equals("byte") && !tokenizer.equals("gpt2") && !Files.isRegularFile(Path.of(tokenizer))) {
            throw usage.apply("--tokenizer must be byte, gpt2 or an existing llm.c tokenizer file, got '" + tokenizer
                    + "'");
        }
    }

    private Tokenizer readFiles(Function<String, RuntimeException> usage) {
        try {
            return Gpt2Files.read(files);
        } catch (FileFormatException e) {
            throw new CliException("--tokenizer-files: " + e.getMessage(), e);
        } catch (java.nio.file.NoSuchFileException e) {
            throw usage.apply(spec() + ": " + e.getFile() + " does not exist (the directory should hold "
                    + Gpt2Files.ENCODER + " and " + Gpt2Files.MERGES + ")");
        } catch (IOException e) {
            throw new CliException("cannot read the tokenizer files in " + files + ": " + IoMessages.describe(e,
                    files), e);
        }
    }
}
