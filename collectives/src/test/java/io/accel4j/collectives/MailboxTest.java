package io.accel4j.collectives;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@link Mailbox}es: a receiver takes messages from whichever rank sends, tagged with the sender, each sender's in
 * the order sent, the bytes exactly (odd sizes, empty included; a sender's later change to its array does not reach
 * the receiver); over TCP a sender that closes becomes a lost letter naming it, after its messages; a receive with
 * nothing to take returns null at its timeout.
 */
class MailboxTest {

    private static final int[] SIZES = {0, 1, 1001, 70_001}; // the last above TcpLink's 64 KiB chunk

    private static byte[] message(int sender, int i) {
        byte[] b = new byte[SIZES[i]];
        new Random(31L * sender + i).nextBytes(b);
        return b;
    }

    /** Takes letters until {@code messages} messages and {@code lost} lost letters came; fails after 20 s. */
    private static List<Mailbox.Letter> take(Mailbox box, int messages, int lost) throws InterruptedException {
        List<Mailbox.Letter> got = new ArrayList<>();
        long deadline = System.nanoTime() + 20_000_000_000L;
        int m = 0, l = 0;
        while (m < messages || l < lost) {
            Mailbox.Letter letter = box.receive(Math.max(1, deadline - System.nanoTime()));
            assertThat(letter).as("a letter within 20 s (%d messages, %d lost so far)", m, l).isNotNull();
            got.add(letter);
            if (letter.lost()) {
                l++;
            } else {
                m++;
            }
        }
        return got;
    }

    /** Each sender's messages in order and intact; returns the letters by sender. */
    private static Map<Integer, List<Mailbox.Letter>> checkOrder(List<Mailbox.Letter> got, int... senders) {
        Map<Integer, List<Mailbox.Letter>> by = new HashMap<>();
        for (Mailbox.Letter l : got) {
            by.computeIfAbsent(l.from(), k -> new ArrayList<>()).add(l);
        }
        for (int s : senders) {
            List<Mailbox.Letter> mine = by.get(s);
            for (int i = 0; i < SIZES.length; i++) {
                assertThat(mine.get(i).body()).as("rank %d's message %d", s, i).isEqualTo(message(s, i));
            }
        }
        return by;
    }

    @Test
    void inProcessLettersComeTaggedInOrderAndCopied() throws InterruptedException {
        Mailbox[] boxes = InProcessMailboxes.create(3);
        for (int s = 1; s <= 2; s++) {
            for (int i = 0; i < SIZES.length; i++) {
                byte[] b = message(s, i);
                boxes[s].send(0, b);
                if (b.length > 0) {
                    b[0]++; // after the send: the receiver must not see it
                }
            }
        }
        checkOrder(take(boxes[0], 2 * SIZES.length, 0), 1, 2);
        assertThat(boxes[0].receive(20_000_000L)).as("nothing more").isNull();
    }

    @Test
    void overTcpAClosedSenderIsALostLetterNamingItAfterItsMessages() {
        List<Object> results = TcpCommunicatorTest.group(3, Duration.ofSeconds(20), null, comm -> {
            try (Mailbox box = comm.mailbox()) {
                if (comm.rank() > 0) {
                    for (int i = 0; i < SIZES.length; i++) {
                        box.send(0, message(comm.rank(), i));
                    }
                    return "sent"; // the group closes the communicator: rank 0 sees the link close
                }
                List<Mailbox.Letter> got = take(box, 2 * SIZES.length, 2);
                Map<Integer, List<Mailbox.Letter>> by = checkOrder(got, 1, 2);
                for (int s = 1; s <= 2; s++) {
                    Mailbox.Letter last = by.get(s).get(by.get(s).size() - 1);
                    assertThat(last.lost()).as("rank %d's last letter", s).isTrue();
                    assertThat(last.why()).contains("rank " + s);
                    assertThat(by.get(s)).hasSize(SIZES.length + 1);
                }
                long t0 = System.nanoTime();
                assertThat(box.receive(50_000_000L)).isNull();
                assertThat(System.nanoTime() - t0).isGreaterThanOrEqualTo(40_000_000L);
                return "received";
            }
        });
        assertThat(results).containsExactly("received", "sent", "sent");
    }
}
