package io.accel4j.collectives;

/**
 * An asynchronous collective in flight, returned by the {@code …Async} methods of {@link Communicator}. The buffers
 * passed to the call belong to the collective until {@link #await()} returns: do not read or write them before.
 */
public interface Pending {

    /**
     * Waits until the collective has finished on this rank. Never hangs: the collective itself gives up after the
     * communicator's timeout.
     *
     * @throws CollectiveException if the collective failed (a rank failed, left or did not arrive in time)
     */
    void await();

    /** True once the collective has finished on this rank, successfully or not ({@link #await()} then returns at once). */
    boolean isDone();
}
