package io.accel4j.collectives;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * A {@link Mailbox} over a {@link TcpCommunicator}'s links: one daemon reader thread per peer reads its frames and
 * puts them, tagged with the peer, on one queue, so {@link #receive} returns whichever rank's message came first. A
 * link that closes or carries an abort becomes a lost letter naming the peer. A send is one frame on the pair's link,
 * written by that peer's sender thread. While the mailbox is open the readers own the links: the communicator's
 * collectives must not run.
 */
final class TcpMailbox implements Mailbox {

    /** The signature of a mailbox frame ("A4MB"). */
    static final int MAIL = 0x41344d42;

    private final TcpLink[] links;
    private final int rank;
    private final LinkedBlockingQueue<Letter> queue = new LinkedBlockingQueue<>();
    private volatile boolean closed;
    private final ExecutorService[] senders;
    private final String[] sendFailures;
    private final AtomicInteger pendingSends = new AtomicInteger();

    TcpMailbox(TcpLink[] links, int rank) {
        this.links = links;
        this.rank = rank;
        this.senders = new ExecutorService[links.length];
        this.sendFailures = new String[links.length];
        for (TcpLink l : links) {
            if (l != null) {
                int peer = l.peer;
                senders[peer] = Executors.newSingleThreadExecutor(r -> {
                    Thread t = new Thread(r, "accel4j-tcp-mailbox-" + rank + "-to-" + peer);
                    t.setDaemon(true);
                    return t;
                });
                Thread t = new Thread(() -> read(l), "accel4j-tcp-mailbox-" + rank + "-from-" + l.peer);
                t.setDaemon(true);
                t.start();
            }
        }
    }

    private void read(TcpLink link) {
        String[] reason = new String[1];
        try {
            while (!closed) {
                TcpLink.Header h = link.readHeader(Long.MAX_VALUE / 4 + System.nanoTime(), reason);
                if (h.tag() == TcpLink.ABORT) {
                    queue.add(new Letter(link.peer, null, "rank " + link.peer + " aborted: " + reason[0]));
                    return;
                }
                if (h.tag() != TcpLink.DATA || h.signature() != MAIL || h.bytes() < 0
                        || h.bytes() > Integer.MAX_VALUE) {
                    queue.add(new Letter(link.peer, null, "rank " + link.peer + " sent a frame that is not a "
                            + "mailbox message"));
                    return;
                }
                byte[] body = new byte[(int) h.bytes()];
                link.readBody(MemorySegment.ofArray(body), 0, body.length, Long.MAX_VALUE / 4 + System.nanoTime());
                queue.add(new Letter(link.peer, body, null));
            }
        } catch (IOException e) {
            if (!closed) {
                queue.add(new Letter(link.peer, null, "the connection to rank " + link.peer + " closed ("
                        + e.getMessage() + ")"));
            }
        }
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return links.length;
    }

    /**
     * Queues {@code body} for rank {@code to}'s sender thread, so that a peer that stops reading (hung, not dead)
     * blocks only its own messages; a write that fails becomes a lost letter naming that peer, and later sends to it
     * fail at once.
     */
    @Override
    public void send(int to, byte[] body) {
        if (to < 0 || to >= links.length || links[to] == null) {
            throw new IllegalArgumentException("rank " + to + " is not a peer of rank " + rank);
        }
        String failed = sendFailures[to];
        if (failed != null) {
            throw new CollectiveException("send", List.of(to), Duration.ZERO, failed, null);
        }
        pendingSends.incrementAndGet();
        senders[to].execute(() -> {
            try {
                if (sendFailures[to] == null) {
                    links[to].write(MAIL, body);
                }
            } catch (IOException e) {
                sendFailures[to] = "rank " + rank + " cannot send to rank " + to + ": " + e.getMessage();
                queue.add(new Letter(to, null, "rank " + rank + " cannot send to rank " + to + " ("
                        + e.getMessage() + ")"));
            } finally {
                pendingSends.decrementAndGet();
            }
        });
    }

    @Override
    public Letter receive(long timeoutNanos) throws InterruptedException {
        return queue.poll(timeoutNanos, TimeUnit.NANOSECONDS);
    }

    /** Waits (up to 10 s) for the queued sends, so the last messages leave before the links close. */
    @Override
    public void close() {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (pendingSends.get() > 0 && System.nanoTime() < deadline) {
            LockSupport.parkNanos(1_000_000);
        }
        closed = true;
        for (ExecutorService e : senders) {
            if (e != null) {
                e.shutdownNow();
            }
        }
    }
}
