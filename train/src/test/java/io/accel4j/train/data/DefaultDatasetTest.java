package io.accel4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.data.DefaultDataset.Problem;
import io.accel4j.train.data.DefaultDataset.Splits;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class DefaultDatasetTest {

    private static final Pattern LINE = Pattern.compile("(\\d+)\\+(\\d+)=(\\d+)");

    @Test
    void isDeterministicBySeed() {
        Splits a = DefaultDataset.generate(42, 5000, 1000);
        Splits b = DefaultDataset.generate(42, 5000, 1000);
        Splits c = DefaultDataset.generate(43, 5000, 1000);
        assertThat(a.train()).hasSize(5000).containsExactly(b.train());
        assertThat(a.val()).hasSize(1000).containsExactly(b.val());
        assertThat(a.train()).isNotEqualTo(c.train());
    }

    @Test
    void linesAreCorrectSumsAndValProblemsAreNeverTrainedOn() {
        long seed = 42;
        List<Problem> train = DefaultDataset.trainProblems(seed);
        List<Problem> held = DefaultDataset.heldOut(seed);
        assertThat(train.size() + held.size()).isEqualTo(100 * 100);
        assertThat(held.size()).isBetween(900, 1100);
        Set<Problem> trainSet = new HashSet<>(train);
        for (Problem p : held) {
            assertThat(trainSet).as("held-out %s", p).doesNotContain(p, new Problem(p.b(), p.a()));
        }

        Splits s = DefaultDataset.generate(seed, 50_000, 5_000);
        Set<Problem> inTrain = problems(s.train());
        Set<Problem> inVal = problems(s.val());
        assertThat(trainSet).containsAll(inTrain);
        assertThat(new HashSet<>(held)).containsAll(inVal);
        assertThat(inVal).hasSizeGreaterThan(300); // a varied val set
    }

    /** The problems of the complete lines in the tokens, checking each is a correct sum. */
    private static Set<Problem> problems(int[] tokens) {
        StringBuilder sb = new StringBuilder();
        for (int t : tokens) {
            assertThat(t).isBetween(0, 255);
            sb.append((char) t);
        }
        String[] lines = sb.toString().split("\n", -1);
        Set<Problem> out = new HashSet<>();
        for (int i = 0; i < lines.length - 1; i++) { // the last line may be cut short
            Matcher m = LINE.matcher(lines[i]);
            assertThat(m.matches()).as("line '%s'", lines[i]).isTrue();
            int a = Integer.parseInt(m.group(1)), b = Integer.parseInt(m.group(2));
            assertThat(Integer.parseInt(m.group(3))).isEqualTo(a + b);
            out.add(new Problem(a, b));
        }
        return out;
    }

    @Test
    void accuracyScoresExactAnswersUpToTheNewline() {
        List<Problem> ps = List.of(new Problem(17, 25), new Problem(1, 2), new Problem(50, 50), new Problem(9, 0));
        assertThat(ps.get(0).line()).isEqualTo("17+25=42\n");
        assertThat(DefaultDataset.accuracy(ps, prompt -> solve(prompt) + "\n3+4=7")).isEqualTo(1.0);
        assertThat(DefaultDataset.accuracy(ps, prompt -> solve(prompt) + "0")).isEqualTo(0.0);
        assertThat(DefaultDataset.accuracy(ps, prompt -> prompt.startsWith("1") ? solve(prompt) : "?"))
                .isEqualTo(0.5);
        assertThatThrownBy(() -> DefaultDataset.accuracy(List.of(), p -> "")).hasMessageContaining("no problems");
    }

    private static String solve(String prompt) {
        String[] ab = prompt.substring(0, prompt.length() - 1).split("\\+");
        return Integer.toString(Integer.parseInt(ab[0]) + Integer.parseInt(ab[1]));
    }

    /**
     * 13 symbols (digits, '+', '=', newline): the unigram entropy is at most ln 13 ≈ 2.56 nats, and well above the
     * loss a model that adds can reach (the answer tokens become free).
     */
    @Test
    void unigramEntropyIsThatOfTheSymbols() {
        Splits s = DefaultDataset.generate(1, 20_000, 2_000);
        double h = DefaultDataset.unigramEntropyNats(s.val());
        assertThat(h).isBetween(2.0, Math.log(13));
        assertThat(DefaultDataset.unigramEntropyBits(s.val())).isCloseTo(h / Math.log(2),
                org.assertj.core.data.Offset.offset(1e-12));
        assertThat(DefaultDataset.unigramEntropyNats(new int[] {7, 7, 7})).isZero();
        assertThat(DefaultDataset.unigramEntropyNats(new int[] {1, 2})).isCloseTo(Math.log(2),
                org.assertj.core.data.Offset.offset(1e-12));
        assertThat(DefaultDataset.tokens("a\u00ff")).containsExactly(97, 255);
    }
}
