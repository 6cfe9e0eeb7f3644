package io.accel4j.train.io;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.io.Mutations.Mutation;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Fuzzing of every parser of a file the user hands accel4j (issue 21 item 10): valid files (an llm.c model fp32 and
 * bf16, a token file, a train state with loader and FP8 state, the checkpoint pointer, the loader-state and FP8-state
 * blocks) mutated by {@link Mutations}. Property: each input either parses or throws the project's
 * {@link FileFormatException} naming the file and a field (the in-memory blocks: the {@link IllegalArgumentException}
 * their contract names, which {@code LearnerLlmcCheckpoints.resume} turns into a {@link FileFormatException} of the
 * state file); no other exception, and no allocation beyond the file's size (the model's parameters, fp32 from bf16:
 * twice). jqwik generates the inputs (not coverage-guided: Jazzer is not among the packages available here); the
 * tries are fixed, so the time is bounded (a few seconds in all), and a failure prints the seed that reproduces it.
 */
class ParserFuzzTest {

    /** A tiny model: maxT 8, V 20 (Vp 24), L 1, NH 2, C 8. */
    static final GptConfig CONFIG = new GptConfig(8, 20, 24, 1, 2, 8);
    private static final DelayedScaling RECIPE = new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0,
            DelayedScaling.Algorithm.MAX);
    private static final int TRIES = 250;

    private static final Path DIR;
    private static final byte[] MODEL, MODEL_BF16, TOKENS, STATE, POINTER, LOADER, FP8;

    static {
        try {
            DIR = Files.createTempDirectory("accel4j-fuzz");
            DIR.toFile().deleteOnExit();
            Arena arena = Arena.ofAuto();
            long count = CONFIG.parameterCount();
            MemorySegment params = arena.allocate(count * Float.BYTES);
            for (long i = 0; i < count; i++) {
                params.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) Math.sin(i));
            }
            Path f = DIR.resolve("seed.bin");
            LlmcCheckpoint.write(f, CONFIG, params, LlmcCheckpoint.VERSION_FP32);
            MODEL = Files.readAllBytes(f);
            LlmcCheckpoint.write(f, CONFIG, params, LlmcCheckpoint.VERSION_BF16);
            MODEL_BF16 = Files.readAllBytes(f);
            int[] tokens = new int[200];
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = (i * 7) % CONFIG.V();
            }
            TokenFile.write(f, tokens);
            TOKENS = Files.readAllBytes(f);
            try (TokenFile tf = TokenFile.open(f);
                 DataLoader dl = new DataLoader(tf, 2, 4, 0, 1, SampleOrder.Mode.SHUFFLED, 42)) {
                dl.next(new int[8], new int[8]);
                LOADER = dl.position().encode();
            }
            Fp8State fp8 = new Fp8State(RECIPE, CONFIG.L());
            FP8 = fp8.encode();
            TrainState.write(f, new TrainState.Header(4, 2, 4, 1, CONFIG, LOADER, 1024f, 3, 1, FP8), params, params);
            STATE = Files.readAllBytes(f);
            Files.delete(f);
            Files.writeString(DIR.resolve("model_00000004.bin"), "m");
            Files.writeString(DIR.resolve("state_00000004.bin"), "s");
            POINTER = "# the latest complete accel4j checkpoint\nstep=4\nmodel=model_00000004.bin\nstate=state_00000004.bin\n"
                    .getBytes(StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @Provide
    Arbitrary<List<Mutation>> mutations() {
        return Mutations.mutations();
    }

    private static Path file(String name, byte[] bytes) throws IOException {
        Path f = Files.createTempFile(DIR, name, ".bin");
        Files.write(f, bytes);
        return f;
    }

    private static void named(FileFormatException e, Path f) {
        assertThat(e.file()).isEqualTo(f);
        assertThat(e.field()).isNotBlank();
        assertThat(e.getMessage()).startsWith(f + ": " + e.field() + " ").doesNotContain("\n");
    }

    /** An arena that refuses (before allocating) more than {@code limit} bytes in all. */
    static final class BoundedArena implements Arena {
        private final Arena inner = Arena.ofConfined();
        private final long limit;
        private long allocated;

        BoundedArena(long limit) {
            this.limit = limit;
        }

        @Override
        public MemorySegment allocate(long byteSize, long byteAlignment) {
            allocated += byteSize;
            assertThat(allocated).as("bytes allocated for a file of %d", limit / 2).isLessThanOrEqualTo(limit);
            return inner.allocate(byteSize, byteAlignment);
        }

        @Override
        public MemorySegment.Scope scope() {
            return inner.scope();
        }

        @Override
        public void close() {
            inner.close();
        }
    }

    @Property(tries = TRIES)
    void llmcModelFiles(@ForAll("mutations") List<Mutation> ms, @ForAll boolean bf16) throws IOException {
        byte[] bytes = Mutations.apply(bf16 ? MODEL_BF16 : MODEL, ms);
        Path f = file("model", bytes);
        try {
            try {
                LlmcCheckpoint.readConfig(f);
            } catch (FileFormatException e) {
                named(e, f);
            }
            try (BoundedArena arena = new BoundedArena(2L * bytes.length)) {
                LlmcCheckpoint.read(f, arena);
            } catch (FileFormatException e) {
                named(e, f);
            }
        } finally {
            Files.delete(f);
        }
    }

    @Property(tries = TRIES)
    void tokenFiles(@ForAll("mutations") List<Mutation> ms) throws IOException {
        Path f = file("tokens", Mutations.apply(TOKENS, ms));
        try (TokenFile t = TokenFile.open(f)) {
            int[] all = new int[(int) t.size()];
            t.read(0, all, all.length);
            t.checkVocabulary(CONFIG.V());
        } catch (FileFormatException e) {
            named(e, f);
        } finally {
            Files.delete(f);
        }
    }

    @Property(tries = TRIES)
    void trainStateFiles(@ForAll("mutations") List<Mutation> ms) throws IOException {
        Path f = file("state", Mutations.apply(STATE, ms));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(CONFIG.parameterCount() * Float.BYTES);
            MemorySegment v = arena.allocate(CONFIG.parameterCount() * Float.BYTES);
            TrainState.read(f, CONFIG, m, v);
        } catch (FileFormatException e) {
            named(e, f);
        } finally {
            Files.delete(f);
        }
    }

    @Property(tries = TRIES)
    void checkpointPointers(@ForAll("mutations") List<Mutation> ms) throws IOException {
        Path pointer = DIR.resolve(CheckpointFiles.POINTER);
        Files.write(pointer, Mutations.apply(POINTER, ms));
        try {
            CheckpointFiles c = CheckpointFiles.latest(DIR);
            assertThat(c.model().getParent()).isEqualTo(DIR);
            assertThat(c.state().getParent()).isEqualTo(DIR);
        } catch (FileFormatException e) {
            named(e, pointer);
        }
    }

    @Property(tries = TRIES)
    void loaderStates(@ForAll("mutations") List<Mutation> ms) throws IOException {
        byte[] bytes = Mutations.apply(LOADER, ms);
        Path f = file("tokens", TOKENS);
        try (TokenFile tf = TokenFile.open(f);
             DataLoader dl = new DataLoader(tf, 2, 4, 0, 1, SampleOrder.Mode.SHUFFLED, 42)) {
            dl.seek(DataLoader.State.decode(bytes));
            dl.next(new int[8], new int[8]);
        } catch (IllegalArgumentException e) {
            assertThat(e.getMessage()).isNotBlank();
        } finally {
            Files.delete(f);
        }
    }

    @Property(tries = TRIES)
    void fp8States(@ForAll("mutations") List<Mutation> ms) {
        try {
            new Fp8State(RECIPE, CONFIG.L()).restore(Mutations.apply(FP8, ms));
        } catch (IllegalArgumentException e) {
            assertThat(e.getMessage()).isNotBlank();
        }
    }
}
