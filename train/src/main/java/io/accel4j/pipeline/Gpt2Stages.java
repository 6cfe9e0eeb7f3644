package io.accel4j.pipeline;

import io.accel4j.nn.Embedding;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.LmHead;
import io.accel4j.nn.Module;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.Sequential;
import io.accel4j.nn.TransformerBlock;
import io.accel4j.nn.VocabParallelEmbedding;
import io.accel4j.nn.VocabParallelHead;
import io.accel4j.train.model.GptConfig;
import java.util.ArrayList;
import java.util.List;

/**
 * llm.c's GPT-2 cut between its L transformer blocks: the first stage also holds the embeddings (wte, wpe), the last
 * the final LayerNorm and the head. The head is tied to wte; when the two are on different stages the last stage's
 * head has a weight of its own, {@code lm_head.weight}, tied to {@code wte} ({@link StagedModel.Tie}). Parameter names
 * and, within a stage, their order are {@link Gpt2Blocks}'s, so stage 0 of one stage is the llm.c buffer.
 */
public final class Gpt2Stages implements StagedModel {

    /** The last stage's copy of the tied token table. */
    public static final String HEAD = "lm_head.weight";

    private final GptConfig c;
    private final boolean parallel;

    private Gpt2Stages(GptConfig c, boolean parallel) {
        this.c = c;
        this.parallel = parallel;
    }

    /** The stages of {@code config}. */
    public static Gpt2Stages of(GptConfig config) {
        return new Gpt2Stages(java.util.Objects.requireNonNull(config, "config"), false);
    }

    /**
     * The stages of {@code config} built from the tensor-parallel blocks ({@link Gpt2Blocks#parallelBody}'s: a
     * vocab-parallel embedding and head, blocks split by heads), which a stage built over a tensor group splits over
     * it and a stage without one runs whole; the same tensors by name as {@link #of}'s.
     */
    public static Gpt2Stages parallel(GptConfig config) {
        return new Gpt2Stages(java.util.Objects.requireNonNull(config, "config"), true);
    }

    @Override
    public int layers() {
        return c.L();
    }

    @Override
    public long[] parameters() {
        long C = c.C(), block = 12 * C * C + 13 * C;
        long[] p = new long[c.L()];
        java.util.Arrays.fill(p, block);
        p[0] += (long) c.Vp() * C + (long) c.maxT() * C;
        p[c.L() - 1] += 2 * C + (c.L() > 1 ? (long) c.Vp() * C : 0);
        return p;
    }

    @Override
    public String layerName(int i) {
        return (i == 0 ? "embedding, " : "") + "h." + i + (i == c.L() - 1 ? ", ln_f, lm_head" : "");
    }

    @Override
    public int inputWidth(int i) {
        return i == 0 ? 1 : c.C();
    }

    @Override
    public Module stage(int from, int to) {
        return parallel ? parallelStage(from, to) : plainStage(from, to);
    }

    private Module plainStage(int from, int to) {
        List<Module> parts = new ArrayList<>();
        Embedding embedding = null;
        if (from == 0) {
            embedding = new Embedding("", c.V(), c.Vp(), c.C(), c.maxT(), true);
            parts.add(embedding);
        }
        List<Module> blocks = new ArrayList<>();
        for (int l = from; l < to; l++) {
            blocks.add(new TransformerBlock(Integer.toString(l), c.C(), c.NH()));
        }
        parts.add(new Sequential("h", blocks));
        if (to == c.L()) {
            parts.add(new LayerNorm("ln_f", c.C()));
            parts.add(embedding != null ? LmHead.tied("lm_head", embedding) : LmHead.untied("lm_head", c.C(), c.Vp()));
        }
        return new Sequential("", parts);
    }

    private Module parallelStage(int from, int to) {
        List<Module> parts = new ArrayList<>();
        VocabParallelEmbedding embedding = null;
        if (from == 0) {
            embedding = new VocabParallelEmbedding("", c.V(), c.Vp(), c.C(), c.maxT(), true);
            parts.add(embedding);
        }
        List<Module> blocks = new ArrayList<>();
        for (int l = from; l < to; l++) {
            blocks.add(TransformerBlock.parallel(Integer.toString(l), c.C(), c.NH(), 4 * c.C()));
        }
        parts.add(new Sequential("h", blocks));
        if (to == c.L()) {
            parts.add(new LayerNorm("ln_f", c.C()));
            parts.add(embedding != null ? VocabParallelHead.tied("lm_head", embedding)
                    : VocabParallelHead.untied("lm_head", c.C(), c.Vp()));
        }
        return new Sequential("", parts);
    }

    @Override
    public ParameterTable.Order order() {
        return ParameterTable.Order.grouped(name -> name.equals(HEAD) ? 16 : Gpt2Blocks.llmcKey(name));
    }

    @Override
    public List<Tie> ties() {
        return List.of(new Tie("wte", HEAD));
    }
}
