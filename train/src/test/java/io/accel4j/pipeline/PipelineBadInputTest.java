package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Embedding;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.LmHead;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Sequential;
import io.accel4j.nn.ShapeException;
import org.junit.jupiter.api.Test;

/** Layouts the Java API refuses, each in one message naming the numbers, before any stage is allocated. */
class PipelineBadInputTest {

    static LearnerBuilder mlp() {
        return Learner.of(() -> new Sequential("mlp", Linear.gelu("fc1", 3, 8), Linear.of("fc2", 8, 3)))
                .features(3).classes(3).batch(4, 1).threads(2).data((r, n, B, T) -> (in, tg) -> { });
    }

    @Test
    void badLayoutsAreRefusedNamingTheNumbers() {
        assertThatThrownBy(() -> mlp().pipeline(3, 4, Schedule.GPIPE).build())
                .hasMessage("3 pipeline stages are more than the model's 2 layers: each stage needs at least one");
        assertThatThrownBy(() -> mlp().pipeline(2, 1, Schedule.ONE_F_ONE_B))
                .hasMessage("1F1B needs at least as many micro-batches as stages: got 1 micro-batches for 2 stages");
        assertThatThrownBy(() -> mlp().pipeline(2, 0, Schedule.GPIPE))
                .hasMessageContaining("got 2 stages and 0 micro-batches");
        assertThatThrownBy(() -> mlp().ranks(3).pipeline(2, 2, Schedule.GPIPE).build())
                .hasMessage("pipeline(2 stages) over 3 ranks: the ranks are D·P (data-parallel replicas × stages), "
                        + "so P must divide them");
        assertThatThrownBy(() -> mlp().ranks(4).zero(1).pipeline(2, 2, Schedule.GPIPE).build())
                .hasMessageContaining("does not combine with ZeRO");
    }

    @Test
    void aHeadTiedToAnEmbeddingOnAnotherStageIsRefusedNamingTheStage() {
        LearnerBuilder b = Learner.of(() -> {
            Embedding e = Embedding.tokens("emb", 5, 4);
            return new Sequential("lm", e, new LayerNorm("ln", 4), LmHead.tied("head", e));
        }).tokens(5).classes(5).batch(2, 3).threads(2).data((r, n, B, T) -> (in, tg) -> { });
        assertThatThrownBy(() -> b.pipeline(2, 2, Schedule.GPIPE).build())
                .isInstanceOf(ShapeException.class)
                .hasMessageStartingWith("pipeline stage 1 (layers 1-2): LM head")
                .hasMessageContaining("is tied to embedding 'emb'");
    }
}
