package io.accel4j.nn;

import io.accel4j.train.model.GptConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * llm.c's GPT-2 as a composition of blocks: {@code Embedding(wte, wpe) → h.0 … h.L−1 (TransformerBlock) → ln_f →
 * LmHead tied to wte}, the loss over the first V of the Vp padded logits. Its parameter table groups the tensors as
 * llm.c's checkpoint stacks them ({@link #LLMC_ORDER}: wte, wpe, every block's ln_1.weight, …, ln_f.bias), so the
 * flat buffer is byte for byte an llm.c model file's body and the {@code io.accel4j.train.model.ParameterLayout}
 * offsets hold.
 */
public final class Gpt2Blocks {

    /** The tensor names of one block, below {@code h.<l>.}, in llm.c's file order. */
    private static final List<String> BLOCK_TENSORS = List.of(
            "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
            "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
            "mlp.c_proj.bias");

    private static final Pattern BLOCK = Pattern.compile("h\\.\\d+\\.(.+)");
    private static final Pattern LAYER = Pattern.compile("h\\.(\\d+)\\..+");

    private static final Map<String, Integer> TOP = Map.of("wte", 0, "wpe", 1, "ln_f.weight", 14, "ln_f.bias", 15);

    /** llm.c's order: wte, wpe, the 12 per-block tensors each stacked over the blocks, ln_f's weight and bias. */
    public static final ParameterTable.Order LLMC_ORDER = ParameterTable.Order.grouped(Gpt2Blocks::llmcKey);

    private Gpt2Blocks() {}

    /**
     * Where tensor {@code name} stands in llm.c's file order: 0 wte, 1 wpe, 2 … 13 the per-block tensors (ln_1.weight …
     * mlp.c_proj.bias), 14 ln_f.weight, 15 ln_f.bias — the ordinal of
     * {@code io.accel4j.train.model.ParameterLayout.Param}.
     *
     * @throws ShapeException for a name that is not one of GPT-2's
     */
    public static int llmcKey(String name) {
        Integer top = TOP.get(name);
        if (top != null) {
            return top;
        }
        Matcher m = BLOCK.matcher(name);
        int i = m.matches() ? BLOCK_TENSORS.indexOf(m.group(1)) : -1;
        if (i < 0) {
            throw new ShapeException("parameter '" + name + "' is not one of GPT-2's");
        }
        return 2 + i;
    }

    /**
     * The module tree of {@code c}: embedding, the blocks, the final LayerNorm and the tied head, each in the
     * {@link UnitScope} of its unit as {@code io.accel4j.train.model.ParameterLayout} numbers them (0 the embeddings —
     * opened by the head's backward, closed by the embedding's —, 1 + l block l, L + 1 the final LayerNorm), so that
     * sharded weights can gather each unit before its use; the gradient listener hears l once block l's gradients
     * are final and −1 once the embeddings' are.
     */
    public static Sequential body(GptConfig c) {
        Embedding embedding = new Embedding("", c.V(), c.Vp(), c.C(), c.maxT(), true);
        return body(c, embedding, LmHead.tied("lm_head", embedding),
                l -> new TransformerBlock(Integer.toString(l), c.C(), c.NH()));
    }

    /**
     * GPT-2 {@code c} split over the network's tensor group ({@link NetworkSpec#tensorParallel}), Megatron-LM's
     * scheme: a vocab-parallel embedding and tied head (the loss vocab-parallel), every block's attention split by
     * heads and its MLP by hidden features ({@link TransformerBlock#parallel}); LayerNorms, position table and the
     * row-parallel biases whole on every rank. The same parameter names, in the same order, as {@link #body(GptConfig)}
     * (each rank holding its shards); the unit scopes as there. One rank: the same model.
     */
    public static Sequential parallelBody(GptConfig c) {
        VocabParallelEmbedding embedding = new VocabParallelEmbedding("", c.V(), c.Vp(), c.C(), c.maxT(), true);
        return body(c, embedding, VocabParallelHead.tied("lm_head", embedding),
                l -> TransformerBlock.parallel(Integer.toString(l), c.C(), c.NH(), 4 * c.C()));
    }

    private static Sequential body(GptConfig c, Module embedding, Module head,
                                   java.util.function.IntFunction<Module> block) {
        int L = c.L(), fin = L + 1;
        List<Module> blocks = new ArrayList<>(L);
        for (int l = 0; l < L; l++) {
            blocks.add(new UnitScope(block.apply(l), 1 + l,
                    l + 1 < L ? 2 + l : fin, l > 0 ? l : -1, UnitScope.Backward.FULL, l));
        }
        return new Sequential("",
                new UnitScope(embedding, 0, 1, -1, UnitScope.Backward.CLOSES, -1),
                Sequential.checkpointed("h", blocks),
                new UnitScope(new LayerNorm("ln_f", c.C()), fin, 0, L, UnitScope.Backward.FULL, -2),
                new UnitScope(head, 0, -1, fin, UnitScope.Backward.OPENS, -2));
    }

    /** The block a per-block tensor belongs to ({@code h.<l>.…}), or −1 for wte, wpe and ln_f's. */
    public static int layerOf(String name) {
        Matcher m = LAYER.matcher(name);
        return m.matches() ? Integer.parseInt(m.group(1)) : -1;
    }

    /**
     * A network spec of GPT-2 {@code c} split over {@code tensorGroup} ({@link #parallelBody}; null or one rank: the
     * tensor-parallel blocks on one rank): token inputs, loss over V classes, llm.c's parameter order.
     */
    public static NetworkSpec parallelSpec(GptConfig c, io.accel4j.collectives.Communicator tensorGroup) {
        return Network.of(parallelBody(c)).tokens(c.V()).classes(c.V()).parameterOrder(LLMC_ORDER)
                .tensorParallel(tensorGroup);
    }

    /** A network spec of GPT-2 {@code c}: token inputs, loss over V classes, llm.c's parameter order. */
    public static NetworkSpec spec(GptConfig c) {
        return Network.of(body(c)).tokens(c.V()).classes(c.V()).parameterOrder(LLMC_ORDER);
    }
}
