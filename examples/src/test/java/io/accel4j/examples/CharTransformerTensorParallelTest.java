package io.accel4j.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.fit.Learner;
import io.accel4j.nn.Module;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.TreeSet;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The character transformer split over two tensor ranks ({@link CharTransformer#parallelModel}, tp = 2) trains as the
 * plain model on one rank does: the same first V rows of the tables (drawn from the same per-name streams; the padded
 * rows are never looked up and their logits are the loss's padding), the same batches. Per-step loss within 1e-5
 * relative over 10 AdamW steps (the split sums in another order; measured ≤ 1e-7). And {@code chars --tp 2} runs.
 */
class CharTransformerTensorParallelTest {

    static List<StepMetrics> train(Supplier<Module> model, int ranks, int tp, int V, int[] ids) {
        try (Learner l = Learner.of(model).tokens(V).classes(V).batch(4, 16).optimizer(AdamW.of(0.1f))
                .schedule(LrSchedule.constant(3e-3f)).gradClip(1f).ranks(ranks).tensorParallel(tp).threads(2)
                .seed(11).data((rank, n, B, T) -> CharTransformer.windows(ids, B, T, 5 + rank)).build()) {
            return l.fit(10, null);
        }
    }

    @Test
    void splitOverTwoRanksTrainsAsThePlainModel() {
        String text = CharTransformer.corpus();
        List<Character> alphabet = List.copyOf(new TreeSet<>(text.chars().mapToObj(c -> (char) c).toList()));
        int V = alphabet.size();
        int[] ids = text.chars().map(c -> alphabet.indexOf((char) c)).toArray();
        List<StepMetrics> plain = train(() -> CharTransformer.model(V, 16, 4, 2, 16), 1, 1, V, ids);
        List<StepMetrics> split = train(() -> CharTransformer.parallelModel(V, 16, 4, 2, 16), 2, 2, V, ids);
        for (int s = 0; s < 10; s++) {
            double w = plain.get(s).trainLoss();
            assertThat(split.get(s).trainLoss()).as("step %d", s).isCloseTo(w, within(1e-5 * w));
        }
    }

    @Test
    void theExampleRunsSplit() {
        CharTransformer c = new CharTransformer();
        c.run.steps = 2;
        c.run.ranks = 2;
        c.tp = 2;
        c.batch = 2;
        c.seq = 16;
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        CharTransformer.Result r = c.run(new PrintStream(bytes, true, StandardCharsets.UTF_8));
        assertThat(r.trainLoss()).isFinite();
        assertThat(bytes.toString(StandardCharsets.UTF_8)).contains("1 data-parallel × 2 tensor",
                "held-out loss and sample skipped under --tp");
    }
}
