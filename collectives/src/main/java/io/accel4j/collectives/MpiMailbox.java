package io.accel4j.collectives;

import io.accel4j.collectives.mpi.mpi_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * A {@link Mailbox} over an Open MPI communicator: {@link #receive} polls {@code MPI_Iprobe} on
 * {@code MPI_ANY_SOURCE} (whichever rank's message came first, its size from {@code MPI_Get_count}) and then
 * {@code MPI_Recv}s it; {@link #send} is an {@code MPI_Isend} whose buffer lives until {@code MPI_Test} says it is done
 * (tested on every call), so two ranks sending each other large messages never wait on each other. Its own tag keeps
 * it apart from the communicator's send/recv. A rank that dies ends the job under mpirun: there are no lost letters.
 * Every call is made from the calling thread, one at a time (MPI_THREAD_SERIALIZED suffices).
 */
final class MpiMailbox implements Mailbox {

    /** The tag of mailbox messages ("A4"), below MPI's smallest allowed upper bound (32767). */
    static final int TAG = 0x4134;

    private record Outgoing(Arena arena, MemorySegment request) {}

    private final MemorySegment comm;
    private final int rank;
    private final int size;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment flag = arena.allocate(ValueLayout.JAVA_INT);
    private final MemorySegment count = arena.allocate(ValueLayout.JAVA_INT);
    private final MemorySegment status = arena.allocate(mpi_h.MPI_STATUS_BYTES, 8);
    private final List<Outgoing> sending = new ArrayList<>();

    MpiMailbox(MemorySegment comm, int rank, int size) {
        this.comm = comm;
        this.rank = rank;
        this.size = size;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public synchronized void send(int to, byte[] body) {
        if (to < 0 || to >= size || to == rank) {
            throw new IllegalArgumentException("rank " + to + " is not a peer of rank " + rank);
        }
        Arena a = Arena.ofShared();
        MemorySegment buf = a.allocate(Math.max(1, body.length));
        MemorySegment.copy(body, 0, buf, ValueLayout.JAVA_BYTE, 0, body.length);
        MemorySegment request = a.allocate(ValueLayout.ADDRESS);
        MpiCommunicator.check("MPI_Isend", mpi_h.MPI_Isend(buf, body.length, mpi_h.ompi_mpi_byte(), to, TAG, comm,
                request), rank);
        sending.add(new Outgoing(a, request));
        progress();
    }

    /** Frees the sends that completed. */
    private void progress() {
        for (Iterator<Outgoing> it = sending.iterator(); it.hasNext(); ) {
            Outgoing o = it.next();
            MpiCommunicator.check("MPI_Test", mpi_h.MPI_Test(o.request(), flag, mpi_h.MPI_STATUS_IGNORE), rank);
            if (flag.get(ValueLayout.JAVA_INT, 0) != 0) {
                o.arena().close();
                it.remove();
            }
        }
    }

    @Override
    public synchronized Letter receive(long timeoutNanos) throws InterruptedException {
        long deadline = System.nanoTime() + timeoutNanos;
        long pause = 20_000; // ns: from 20 µs up to 1 ms between probes
        while (true) {
            progress();
            MpiCommunicator.check("MPI_Iprobe", mpi_h.MPI_Iprobe(mpi_h.MPI_ANY_SOURCE, TAG, comm, flag, status),
                    rank);
            if (flag.get(ValueLayout.JAVA_INT, 0) != 0) {
                int from = status.get(ValueLayout.JAVA_INT, 0);
                MpiCommunicator.check("MPI_Get_count", mpi_h.MPI_Get_count(status, mpi_h.ompi_mpi_byte(), count),
                        rank);
                int n = count.get(ValueLayout.JAVA_INT, 0);
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment buf = a.allocate(Math.max(1, n));
                    MpiCommunicator.check("MPI_Recv", mpi_h.MPI_Recv(buf, n, mpi_h.ompi_mpi_byte(), from, TAG, comm,
                            mpi_h.MPI_STATUS_IGNORE), rank);
                    return new Letter(from, buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), null);
                }
            }
            if (System.nanoTime() >= deadline) {
                return null;
            }
            if (Thread.interrupted()) {
                throw new InterruptedException();
            }
            java.util.concurrent.locks.LockSupport.parkNanos(pause);
            pause = Math.min(1_000_000, pause * 2);
        }
    }

    /** Waits (up to 10 s) for the sends still under way, so that the last messages leave before MPI_Finalize. */
    @Override
    public synchronized void close() {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!sending.isEmpty() && System.nanoTime() < deadline) {
            progress();
            java.util.concurrent.locks.LockSupport.parkNanos(100_000);
        }
        if (sending.isEmpty()) {
            arena.close();
        }
    }
}
