package io.accel4j.train.data;

import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The token files one data set is split into (llm.c's {@code fineweb_train_*.bin} shards), opened and memory-mapped
 * together, in the order given; {@link #close} unmaps them all. One file is the common case: a list of one.
 *
 * <p>{@link #expand} turns a specification into files: a comma-separated list, each item a file or a glob over file
 * names in one directory ({@code data/train_*.bin}, {@code ?}, {@code [..]}, {@code {a,b}} as
 * {@link java.nio.file.FileSystem#getPathMatcher}'s glob), a glob's matches sorted by name.
 */
public final class TokenShards implements AutoCloseable {

    private final List<TokenFile> files;

    private TokenShards(List<TokenFile> files) {
        this.files = List.copyOf(files);
    }

    /** One file as a set of one shard; closing the set closes it. */
    public static TokenShards of(TokenFile file) {
        return new TokenShards(List.of(file));
    }

    /** Opens every file (a {@link FileFormatException} names the one at fault, and nothing stays open). */
    public static TokenShards open(List<Path> paths) throws IOException {
        if (paths.isEmpty()) {
            throw new IllegalArgumentException("no token files");
        }
        List<TokenFile> opened = new ArrayList<>();
        try {
            for (Path p : paths) {
                opened.add(TokenFile.open(p));
            }
        } catch (IOException | RuntimeException e) {
            opened.forEach(TokenFile::close);
            throw e;
        }
        return new TokenShards(opened);
    }

    /** Whether {@code spec} is more than one plain path: a list or a glob. */
    public static boolean isPattern(String spec) {
        return spec.contains(",") || hasGlob(spec);
    }

    private static boolean hasGlob(String s) {
        return s.indexOf('*') >= 0 || s.indexOf('?') >= 0 || s.indexOf('[') >= 0 || s.indexOf('{') >= 0;
    }

    /**
     * The files of {@code spec} (see the class comment), duplicates kept out; a {@link NoSuchFileException} names a
     * listed file that does not exist or a glob that matches nothing.
     */
    public static List<Path> expand(String spec) throws IOException {
        List<Path> out = new ArrayList<>();
        for (String item : spec.split(",", -1)) {
            String s = item.strip();
            if (s.isEmpty()) {
                throw new IllegalArgumentException("'" + spec + "' has an empty item in its comma-separated list");
            }
            if (!hasGlob(s)) {
                Path p = Path.of(s);
                if (!Files.isRegularFile(p)) {
                    throw new NoSuchFileException(s, null, Files.isDirectory(p) ? "is a directory, not a token file"
                            : "does not exist");
                }
                add(out, p);
                continue;
            }
            Path glob = Path.of(s);
            Path dir = glob.getParent() == null ? Path.of(".") : glob.getParent();
            if (hasGlob(dir.toString())) {
                throw new IllegalArgumentException("'" + s + "': a glob may only match file names, not directories");
            }
            List<Path> matches = new ArrayList<>();
            if (Files.isDirectory(dir)) {
                try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, glob.getFileName().toString())) {
                    for (Path p : ds) {
                        if (Files.isRegularFile(p)) {
                            matches.add(glob.getParent() == null ? p.getFileName() : p);
                        }
                    }
                }
            }
            if (matches.isEmpty()) {
                throw new NoSuchFileException(s, null, "matches no file" + (Files.isDirectory(dir) ? "" : " ("
                        + dir + " is not a directory)"));
            }
            matches.sort(null);
            matches.forEach(p -> add(out, p));
        }
        return out;
    }

    private static void add(List<Path> out, Path p) {
        if (!out.contains(p)) {
            out.add(p);
        }
    }

    /** The shards, in order. */
    public List<TokenFile> files() {
        return files;
    }

    /** Shard {@code k}. */
    public TokenFile file(int k) {
        return files.get(k);
    }

    /** The number of shards. */
    public int count() {
        return files.size();
    }

    /** Tokens in all the shards. */
    public long tokens() {
        long n = 0;
        for (TokenFile f : files) {
            n += f.size();
        }
        return n;
    }

    /** The first shard's path, or a description of the set ({@code 3 shards: data/a.bin, …}). */
    public String describe() {
        return files.size() == 1 ? files.get(0).path().toString() : files.size() + " shards: "
                + files.get(0).path() + " … " + files.get(files.size() - 1).path();
    }

    /** {@link TokenFile#checkVocabulary} of every shard (the error names the shard and the position). */
    public void checkVocabulary(int V) throws FileFormatException {
        for (TokenFile f : files) {
            f.checkVocabulary(V);
        }
    }

    /** Unmaps every shard; idempotent. */
    @Override
    public void close() {
        files.forEach(TokenFile::close);
    }
}
