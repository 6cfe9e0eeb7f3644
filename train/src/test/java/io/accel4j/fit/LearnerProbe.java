package io.accel4j.fit;

/**
 * What a {@link Learner} keeps package-private, for the tests of other packages (the GPT-2 runs that replaced the
 * old trainer's tests): the buckets its first rank started during backward.
 */
public final class LearnerProbe {

    private LearnerProbe() {
    }

    /** Buckets the first rank held by {@code l} started during backward so far ({@code Learner.buckets()}). */
    public static int buckets(Learner l) {
        return l.buckets();
    }
}
