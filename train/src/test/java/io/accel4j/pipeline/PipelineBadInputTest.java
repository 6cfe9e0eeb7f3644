package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
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
        assertThatThrownBy(() -> mlp().ranks(4).zero(2).pipeline(2, 2, Schedule.GPIPE).build())
                .hasMessageContaining("does not combine with ZeRO-2 (ZeRO-1 it does) yet");
        assertThatThrownBy(() -> mlp().ranks(6).tensorParallel(2).pipeline(2, 2, Schedule.GPIPE).build())
                .hasMessage("pipeline(2 stages) × tensorParallel(2) over 6 ranks: the ranks are D·T·P (data-parallel "
                        + "replicas × tensor ranks × stages), so T·P = 4 must divide them");
    }

    /** T that does not divide the heads of a stage's blocks: refused naming the stage, before any step. */
    @Test
    void aTensorSplitTheStagesCannotTakeIsRefusedNamingTheStage() {
        assertThatThrownBy(() -> PipelineGpt2Test.gpt2().pipeline(Gpt2Stages.parallel(PipelineGpt2Test.TINY), 2, 2,
                Schedule.GPIPE).tensorParallel(4).build())
                .isInstanceOf(ShapeException.class)
                .hasMessageStartingWith("pipeline stage ")
                .hasMessageContaining("4");
    }

    /**
     * A rank of a tp=2 × pp=2 grid that hangs (its data never comes in time) fails the step within the collective
     * timeout, naming the group and the rank that did not arrive, instead of hanging every rank.
     */
    @Test
    void aHungRankInTheGridFailsWithinTheTimeoutNamingItsGroup() {
        java.util.concurrent.atomic.AtomicInteger opened = new java.util.concurrent.atomic.AtomicInteger();
        io.accel4j.fit.DataSource.Factory data = PipelineGpt2Test.tokens(PipelineGpt2Test.TINY.V(), 3);
        io.accel4j.fit.DataSource.Factory slow = (replica, replicas, B, T) -> {
            io.accel4j.fit.DataSource d = data.open(replica, replicas, B, T);
            boolean hangs = opened.getAndIncrement() == 0;
            return (in, tg) -> {
                if (hangs) {
                    try {
                        Thread.sleep(1500);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                d.next(in, tg);
            };
        };
        long t0 = System.nanoTime();
        try (Learner l = PipelineGpt2Test.gpt2().data(slow).pipeline(Gpt2Stages.parallel(PipelineGpt2Test.TINY), 2,
                2, Schedule.GPIPE).tensorParallel(2).collectiveTimeout(java.time.Duration.ofMillis(300)).build()) {
            Throwable e = org.assertj.core.api.Assertions.catchThrowable(() -> l.fit(1, null));
            assertThat(e).isInstanceOf(io.accel4j.collectives.CollectiveException.class)
                    .hasMessageContaining("of group color").hasMessageContaining("(parent ranks [")
                    .hasMessageContaining("did not arrive").hasMessageContaining("within the timeout (PT0.3S");
            System.out.println("hung rank: " + e.getMessage() + " (after " + (System.nanoTime() - t0) / 1_000_000
                    + " ms, the hung thread's own 1.5 s included)");
        }
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
