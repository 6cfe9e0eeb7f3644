package io.accel4j.collectives;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** {@link Mailbox}es of ranks that are threads of this process: one queue per rank, a send copies into it. */
public final class InProcessMailboxes {

    private InProcessMailboxes() {}

    /** The mailboxes of ranks {@code 0 … n−1}. */
    public static Mailbox[] create(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("ranks must be >= 1, got " + n);
        }
        @SuppressWarnings("unchecked")
        LinkedBlockingQueue<Mailbox.Letter>[] queues = new LinkedBlockingQueue[n];
        for (int r = 0; r < n; r++) {
            queues[r] = new LinkedBlockingQueue<>();
        }
        Mailbox[] boxes = new Mailbox[n];
        for (int r = 0; r < n; r++) {
            boxes[r] = new Box(r, queues);
        }
        return boxes;
    }

    private record Box(int rank, LinkedBlockingQueue<Mailbox.Letter>[] queues) implements Mailbox {

        @Override
        public int size() {
            return queues.length;
        }

        @Override
        public void send(int to, byte[] body) {
            if (to < 0 || to >= queues.length) {
                throw new IllegalArgumentException("rank " + to + " is not in [0, " + queues.length + ")");
            }
            queues[to].add(new Letter(rank, body.clone(), null));
        }

        @Override
        public Letter receive(long timeoutNanos) throws InterruptedException {
            return queues[rank].poll(timeoutNanos, TimeUnit.NANOSECONDS);
        }

        @Override
        public void close() {
        }
    }
}
