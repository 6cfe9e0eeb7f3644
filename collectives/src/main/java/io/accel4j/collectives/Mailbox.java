package io.accel4j.collectives;

/**
 * Point-to-point messages between the ranks of a group, received from whichever rank sends first: the transport of
 * asynchronous data parallelism's parameter servers, which cannot know which worker pushes next (no collective on
 * that path). Messages between one pair of ranks arrive in the order they were sent. Implementations: in-process
 * queues ({@link InProcessMailboxes}), one reader thread per TCP link ({@link TcpCommunicator#mailbox}) and Open
 * MPI's {@code MPI_Iprobe} on {@code MPI_ANY_SOURCE} ({@link MpiCommunicator#mailbox}).
 */
public interface Mailbox extends AutoCloseable {

    /**
     * A message from rank {@code from}; a null {@code body} says that rank is gone (its connection closed or it
     * aborted), with {@code why}.
     */
    record Letter(int from, byte[] body, String why) {

        /** Whether this says the sender is gone rather than carrying a message. */
        public boolean lost() {
            return body == null;
        }
    }

    /** This rank. */
    int rank();

    /** The ranks in the group. */
    int size();

    /**
     * Sends {@code body} to rank {@code to} (a copy is taken or it is written before the call returns).
     *
     * @throws CollectiveException when {@code to} cannot be reached, naming it
     */
    void send(int to, byte[] body);

    /** The next message from any rank, waiting at most {@code timeoutNanos}; null when none came. */
    Letter receive(long timeoutNanos) throws InterruptedException;

    /** Stops receiving; what the group's communicator does afterwards is its close. */
    @Override
    void close();
}
