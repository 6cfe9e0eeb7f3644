package io.accel4j.nn;

/**
 * Brackets around the use of a group of parameters (a "unit": GPT-2's embeddings, each block, the final LayerNorm),
 * for a parameter source that must fetch a unit before its use and reduce its gradients after (ZeRO-3 gathers a
 * unit's shards on {@link #acquire} and reduce-scatters its gradients on {@link #gradientsDone}). {@link UnitScope}
 * makes the calls; {@link #NONE}, the default, ignores them. Every call may be a collective: ranks run their
 * networks in step.
 */
public interface Units {

    /** Unit {@code unit}'s parameters are about to be read. */
    void acquire(int unit);

    /** The network will acquire {@code unit} next: a hint to start fetching it. */
    void prefetch(int unit);

    /** Unit {@code unit}'s parameters are not read again until the next {@link #acquire}. */
    void release(int unit);

    /** This backward is about to add its first gradient into unit {@code unit}'s. */
    void beginGradients(int unit);

    /** This backward has finished unit {@code unit}'s gradients. */
    void gradientsDone(int unit);

    /** A new accumulation of gradients starts ({@link Network#zeroGrad} of a network whose owner holds them). */
    default void zeroGrad() {
    }

    /** No brackets: flat buffers. */
    Units NONE = new Units() {
        @Override
        public void acquire(int unit) {
        }

        @Override
        public void prefetch(int unit) {
        }

        @Override
        public void release(int unit) {
        }

        @Override
        public void beginGradients(int unit) {
        }

        @Override
        public void gradientsDone(int unit) {
        }
    };
}
