package io.accel4j.collectives;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A {@link Mailbox} over a {@link TcpCommunicator}'s links: one daemon reader thread per peer reads its frames and
 * puts them, tagged with the peer, on one queue, so {@link #receive} returns whichever rank's message came first. A
 * link that closes or carries an abort becomes a lost letter naming the peer. Sends write one frame on the pair's
 * link. While the mailbox is open the readers own the links: the communicator's collectives must not run.
 */
final class TcpMailbox implements Mailbox {

    /** The signature of a mailbox frame ("A4MB"). */
    static final int MAIL = 0x41344d42;

    private final TcpLink[] links;
    private final int rank;
    private final LinkedBlockingQueue<Letter> queue = new LinkedBlockingQueue<>();
    private volatile boolean closed;

    TcpMailbox(TcpLink[] links, int rank) {
        this.links = links;
        this.rank = rank;
        for (TcpLink l : links) {
            if (l != null) {
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

    @Override
    public void send(int to, byte[] body) {
        if (to < 0 || to >= links.length || links[to] == null) {
            throw new IllegalArgumentException("rank " + to + " is not a peer of rank " + rank);
        }
        try {
            links[to].write(MAIL, body);
        } catch (IOException e) {
            throw new CollectiveException("send", java.util.List.of(to), java.time.Duration.ZERO, "rank " + rank
                    + " cannot send to rank " + to + ": " + e.getMessage(), e);
        }
    }

    @Override
    public Letter receive(long timeoutNanos) throws InterruptedException {
        return queue.poll(timeoutNanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void close() {
        closed = true;
    }
}
