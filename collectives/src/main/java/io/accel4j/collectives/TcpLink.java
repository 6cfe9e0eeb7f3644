package io.accel4j.collectives;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One TCP connection between this rank and rank {@link #peer}, carrying framed messages. A frame is a 16-byte
 * big-endian header, {@code tag (int), signature (int), bytes (long)}, then {@code bytes} bytes of payload:
 * <ul>
 *   <li>{@link #DATA}: a collective's or a send's bytes; the signature says which call sent it, so ranks that called
 *       different collectives are told so instead of reading each other's data;</li>
 *   <li>{@link #ABORT}: the peer gave up; the payload is its reason in UTF-8, so a failure travels around the group
 *       with the name of the rank that caused it.</li>
 * </ul>
 * Reads time out at a deadline ({@link Expired}); writes are whole frames, one at a time (a lock), and are timed out
 * by the caller closing the socket.
 */
final class TcpLink implements AutoCloseable {

    static final int DATA = 0x41344444;  // "A4DD"
    static final int ABORT = 0x41344142; // "A4AB"

    private static final int CHUNK = 1 << 16;

    /** A read that did not complete by its deadline. */
    static final class Expired extends IOException {
        private static final long serialVersionUID = 1L;

        Expired(String message) {
            super(message);
        }
    }

    /** A frame's header. */
    record Header(int tag, int signature, long bytes) {}

    final int peer;
    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;
    private final ReentrantLock writing = new ReentrantLock();
    private final byte[] readBuf = new byte[CHUNK];
    private final byte[] writeBuf = new byte[CHUNK];

    TcpLink(int peer, Socket socket) throws IOException {
        this.peer = peer;
        this.socket = socket;
        socket.setTcpNoDelay(true);
        this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), CHUNK));
        this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), CHUNK));
    }

    /** Writes one DATA frame of {@code bytes} bytes of {@code src} from byte {@code off}. */
    void write(int signature, MemorySegment src, long off, long bytes) throws IOException {
        writing.lock();
        try {
            out.writeInt(DATA);
            out.writeInt(signature);
            out.writeLong(bytes);
            for (long done = 0; done < bytes; ) {
                int k = (int) Math.min(CHUNK, bytes - done);
                MemorySegment.copy(src, ValueLayout.JAVA_BYTE, off + done, writeBuf, 0, k);
                out.write(writeBuf, 0, k);
                done += k;
            }
            out.flush();
        } finally {
            writing.unlock();
        }
    }

    /** Writes one DATA frame carrying {@code body} whole, signed {@code signature} (a mailbox's message). */
    void write(int signature, byte[] body) throws IOException {
        writing.lock();
        try {
            out.writeInt(DATA);
            out.writeInt(signature);
            out.writeLong(body.length);
            out.write(body);
            out.flush();
        } finally {
            writing.unlock();
        }
    }

    /** Best effort: an ABORT frame with {@code reason}, unless a write is stuck on this link. */
    void abort(String reason) {
        try {
            if (!writing.tryLock(50, TimeUnit.MILLISECONDS)) {
                return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        try {
            byte[] msg = reason.getBytes(StandardCharsets.UTF_8);
            socket.setSoTimeout(100);
            out.writeInt(ABORT);
            out.writeInt(0);
            out.writeLong(msg.length);
            out.write(msg);
            out.flush();
        } catch (IOException ignored) {
            // the peer is gone already: closing is all that is left
        } finally {
            writing.unlock();
        }
    }

    /** The next frame's header; an ABORT frame's reason is read and returned in {@code reason[0]}. */
    Header readHeader(long deadline, String[] reason) throws IOException {
        byte[] h = new byte[16];
        readFully(h, 0, 16, deadline);
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(h);
        Header header = new Header(b.getInt(), b.getInt(), b.getLong());
        if (header.tag() == ABORT && header.bytes() >= 0 && header.bytes() < 1 << 20) {
            byte[] msg = new byte[(int) header.bytes()];
            readFully(msg, 0, msg.length, deadline);
            reason[0] = new String(msg, StandardCharsets.UTF_8);
        }
        return header;
    }

    /** The payload of the frame whose header was just read: {@code bytes} bytes into {@code dst} at {@code off}. */
    void readBody(MemorySegment dst, long off, long bytes, long deadline) throws IOException {
        for (long done = 0; done < bytes; ) {
            int k = (int) Math.min(CHUNK, bytes - done);
            readFully(readBuf, 0, k, deadline);
            MemorySegment.copy(readBuf, 0, dst, ValueLayout.JAVA_BYTE, off + done, k);
            done += k;
        }
    }

    private void readFully(byte[] buf, int off, int n, long deadline) throws IOException {
        int got = 0;
        while (got < n) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new Expired(got + " of " + n + " bytes");
            }
            socket.setSoTimeout((int) Math.max(1, Math.min(Integer.MAX_VALUE, left / 1_000_000)));
            int k;
            try {
                k = in.read(buf, off + got, n - got);
            } catch (SocketTimeoutException e) {
                continue; // the loop re-checks the deadline
            }
            if (k < 0) {
                throw new EOFException("the connection closed after " + got + " of " + n + " bytes");
            }
            got += k;
        }
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing: nothing to do about it
        }
    }
}
