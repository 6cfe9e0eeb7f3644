package io.accel4j.collectives.mpi;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * FFM bindings of the few {@code mpi.h} functions accel4j uses, for Open MPI's ABI ({@code libmpi.so.40}), in
 * jextract's shape: a static method per function, its {@link FunctionDescriptor} and a lazily created handle in a
 * holder class. Open MPI's handles ({@code MPI_Comm}, {@code MPI_Datatype}, {@code MPI_Op}, {@code MPI_Errhandler})
 * are pointers to predefined objects: {@code MPI_COMM_WORLD} is the address of the symbol
 * {@code ompi_mpi_comm_world}, {@code MPI_FLOAT} of {@code ompi_mpi_float}, and so on (the methods named after the
 * symbols below). Every function returns an MPI error code ({@link #MPI_SUCCESS} = 0). Nothing else lives here; the
 * library is found by {@link MpiLibrary}.
 */
@SuppressWarnings({"unused", "restricted"}) // native access is the point; run with --enable-native-access
public final class mpi_h {

    private mpi_h() {}

    public static final int MPI_SUCCESS = 0;
    public static final int MPI_THREAD_SINGLE = 0;
    public static final int MPI_THREAD_FUNNELED = 1;
    public static final int MPI_THREAD_SERIALIZED = 2;
    public static final int MPI_THREAD_MULTIPLE = 3;
    public static final int MPI_MAX_ERROR_STRING = 256;
    /** Open MPI's {@code MPI_MAX_LIBRARY_VERSION_STRING}. */
    public static final int MPI_MAX_LIBRARY_VERSION_STRING = 256;
    /** {@code MPI_IN_PLACE}: {@code (void *) 1}. */
    public static final MemorySegment MPI_IN_PLACE = MemorySegment.ofAddress(1);
    /** Open MPI's {@code MPI_ANY_SOURCE}. */
    public static final int MPI_ANY_SOURCE = -1;
    /**
     * Open MPI's {@code MPI_Status}: {@code int MPI_SOURCE, MPI_TAG, MPI_ERROR, _cancelled; size_t _ucount} (24
     * bytes); {@code MPI_SOURCE} at byte 0.
     */
    public static final long MPI_STATUS_BYTES = 24;
    /** {@code MPI_STATUS_IGNORE}: {@code (MPI_Status *) 0}. */
    public static final MemorySegment MPI_STATUS_IGNORE = MemorySegment.NULL;

    private static MethodHandle downcall(String name, FunctionDescriptor desc) {
        return Linker.nativeLinker().downcallHandle(MpiLibrary.symbol(name), desc);
    }

    private static final class MPI_Init_thread {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Init_thread", DESC);
    }

    public static int MPI_Init_thread(MemorySegment argc, MemorySegment argv, int required, MemorySegment provided) {
        var mh$ = MPI_Init_thread.HANDLE;
        try {
            return (int) mh$.invokeExact(argc, argv, required, provided);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Initialized {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Initialized", DESC);
    }

    public static int MPI_Initialized(MemorySegment flag) {
        var mh$ = MPI_Initialized.HANDLE;
        try {
            return (int) mh$.invokeExact(flag);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Finalized {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Finalized", DESC);
    }

    public static int MPI_Finalized(MemorySegment flag) {
        var mh$ = MPI_Finalized.HANDLE;
        try {
            return (int) mh$.invokeExact(flag);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Finalize {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT);
        static final MethodHandle HANDLE = downcall("MPI_Finalize", DESC);
    }

    public static int MPI_Finalize() {
        var mh$ = MPI_Finalize.HANDLE;
        try {
            return (int) mh$.invokeExact();
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Abort {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT);
        static final MethodHandle HANDLE = downcall("MPI_Abort", DESC);
    }

    public static int MPI_Abort(MemorySegment comm, int errorcode) {
        var mh$ = MPI_Abort.HANDLE;
        try {
            return (int) mh$.invokeExact(comm, errorcode);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Comm_rank {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Comm_rank", DESC);
    }

    public static int MPI_Comm_rank(MemorySegment comm, MemorySegment rank) {
        var mh$ = MPI_Comm_rank.HANDLE;
        try {
            return (int) mh$.invokeExact(comm, rank);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Comm_size {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Comm_size", DESC);
    }

    public static int MPI_Comm_size(MemorySegment comm, MemorySegment size) {
        var mh$ = MPI_Comm_size.HANDLE;
        try {
            return (int) mh$.invokeExact(comm, size);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Comm_split {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Comm_split", DESC);
    }

    /** {@code int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)}. */
    public static int MPI_Comm_split(MemorySegment comm, int color, int key, MemorySegment newcomm) {
        var mh$ = MPI_Comm_split.HANDLE;
        try {
            return (int) mh$.invokeExact(comm, color, key, newcomm);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Comm_free {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Comm_free", DESC);
    }

    /** {@code int MPI_Comm_free(MPI_Comm *comm)}. */
    public static int MPI_Comm_free(MemorySegment comm) {
        var mh$ = MPI_Comm_free.HANDLE;
        try {
            return (int) mh$.invokeExact(comm);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Comm_set_errhandler {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Comm_set_errhandler", DESC);
    }

    public static int MPI_Comm_set_errhandler(MemorySegment comm, MemorySegment errhandler) {
        var mh$ = MPI_Comm_set_errhandler.HANDLE;
        try {
            return (int) mh$.invokeExact(comm, errhandler);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Error_string {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Error_string", DESC);
    }

    public static int MPI_Error_string(int errorcode, MemorySegment string, MemorySegment resultlen) {
        var mh$ = MPI_Error_string.HANDLE;
        try {
            return (int) mh$.invokeExact(errorcode, string, resultlen);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Get_library_version {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Get_library_version", DESC);
    }

    /** {@code int MPI_Get_library_version(char *version, int *resultlen)}; callable before {@code MPI_Init}. */
    public static int MPI_Get_library_version(MemorySegment version, MemorySegment resultlen) {
        var mh$ = MPI_Get_library_version.HANDLE;
        try {
            return (int) mh$.invokeExact(version, resultlen);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Allreduce {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Allreduce", DESC);
    }

    public static int MPI_Allreduce(MemorySegment sendbuf, MemorySegment recvbuf, int count, MemorySegment datatype, MemorySegment op, MemorySegment comm) {
        var mh$ = MPI_Allreduce.HANDLE;
        try {
            return (int) mh$.invokeExact(sendbuf, recvbuf, count, datatype, op, comm);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Reduce_scatter {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Reduce_scatter", DESC);
    }

    public static int MPI_Reduce_scatter(MemorySegment sendbuf, MemorySegment recvbuf, MemorySegment recvcounts, MemorySegment datatype, MemorySegment op, MemorySegment comm) {
        var mh$ = MPI_Reduce_scatter.HANDLE;
        try {
            return (int) mh$.invokeExact(sendbuf, recvbuf, recvcounts, datatype, op, comm);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Allgatherv {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Allgatherv", DESC);
    }

    public static int MPI_Allgatherv(MemorySegment sendbuf, int sendcount, MemorySegment sendtype, MemorySegment recvbuf, MemorySegment recvcounts, MemorySegment displs, MemorySegment recvtype, MemorySegment comm) {
        var mh$ = MPI_Allgatherv.HANDLE;
        try {
            return (int) mh$.invokeExact(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Bcast {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_INT, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Bcast", DESC);
    }

    public static int MPI_Bcast(MemorySegment buffer, int count, MemorySegment datatype, int root, MemorySegment comm) {
        var mh$ = MPI_Bcast.HANDLE;
        try {
            return (int) mh$.invokeExact(buffer, count, datatype, root, comm);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Barrier {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Barrier", DESC);
    }

    public static int MPI_Barrier(MemorySegment comm) {
        var mh$ = MPI_Barrier.HANDLE;
        try {
            return (int) mh$.invokeExact(comm);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Send {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Send", DESC);
    }

    public static int MPI_Send(MemorySegment buf, int count, MemorySegment datatype, int dest, int tag, MemorySegment comm) {
        var mh$ = MPI_Send.HANDLE;
        try {
            return (int) mh$.invokeExact(buf, count, datatype, dest, tag, comm);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Recv {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Recv", DESC);
    }

    public static int MPI_Recv(MemorySegment buf, int count, MemorySegment datatype, int source, int tag, MemorySegment comm, MemorySegment status) {
        var mh$ = MPI_Recv.HANDLE;
        try {
            return (int) mh$.invokeExact(buf, count, datatype, source, tag, comm, status);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Isend {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Isend", DESC);
    }

    /** {@code int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request)}: a send that returns at once; {@code MPI_Test} says when it is done. */
    public static int MPI_Isend(MemorySegment buf, int count, MemorySegment datatype, int dest, int tag, MemorySegment comm, MemorySegment request) {
        var mh$ = MPI_Isend.HANDLE;
        try {
            return (int) mh$.invokeExact(buf, count, datatype, dest, tag, comm, request);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Test {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Test", DESC);
    }

    /** {@code int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)}: whether a request completed (then freed). */
    public static int MPI_Test(MemorySegment request, MemorySegment flag, MemorySegment status) {
        var mh$ = MPI_Test.HANDLE;
        try {
            return (int) mh$.invokeExact(request, flag, status);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Iprobe {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Iprobe", DESC);
    }

    /** {@code int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)}: whether a message is waiting ({@link #MPI_ANY_SOURCE}: from any rank), its envelope in {@code status}. */
    public static int MPI_Iprobe(int source, int tag, MemorySegment comm, MemorySegment flag, MemorySegment status) {
        var mh$ = MPI_Iprobe.HANDLE;
        try {
            return (int) mh$.invokeExact(source, tag, comm, flag, status);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class MPI_Get_count {
        static final FunctionDescriptor DESC = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle HANDLE = downcall("MPI_Get_count", DESC);
    }

    /** {@code int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count)}: the elements of a probed message. */
    public static int MPI_Get_count(MemorySegment status, MemorySegment datatype, MemorySegment count) {
        var mh$ = MPI_Get_count.HANDLE;
        try {
            return (int) mh$.invokeExact(status, datatype, count);
        } catch (Throwable ex$) {
            throw new AssertionError("should not reach here", ex$);
        }
    }

    private static final class ompi_mpi_comm_world$ {
        static final MemorySegment ADDR = MpiLibrary.symbol("ompi_mpi_comm_world");
    }

    /** The address of Open MPI's predefined object {@code ompi_mpi_comm_world}. */
    public static MemorySegment ompi_mpi_comm_world() {
        return ompi_mpi_comm_world$.ADDR;
    }

    private static final class ompi_mpi_float$ {
        static final MemorySegment ADDR = MpiLibrary.symbol("ompi_mpi_float");
    }

    /** The address of Open MPI's predefined object {@code ompi_mpi_float}. */
    public static MemorySegment ompi_mpi_float() {
        return ompi_mpi_float$.ADDR;
    }

    private static final class ompi_mpi_byte$ {
        static final MemorySegment ADDR = MpiLibrary.symbol("ompi_mpi_byte");
    }

    /** The address of Open MPI's predefined object {@code ompi_mpi_byte}. */
    public static MemorySegment ompi_mpi_byte() {
        return ompi_mpi_byte$.ADDR;
    }

    private static final class ompi_mpi_op_sum$ {
        static final MemorySegment ADDR = MpiLibrary.symbol("ompi_mpi_op_sum");
    }

    /** The address of Open MPI's predefined object {@code ompi_mpi_op_sum}. */
    public static MemorySegment ompi_mpi_op_sum() {
        return ompi_mpi_op_sum$.ADDR;
    }

    private static final class ompi_mpi_op_max$ {
        static final MemorySegment ADDR = MpiLibrary.symbol("ompi_mpi_op_max");
    }

    /** The address of Open MPI's predefined object {@code ompi_mpi_op_max}. */
    public static MemorySegment ompi_mpi_op_max() {
        return ompi_mpi_op_max$.ADDR;
    }

    private static final class ompi_mpi_errors_return$ {
        static final MemorySegment ADDR = MpiLibrary.symbol("ompi_mpi_errors_return");
    }

    /** The address of Open MPI's predefined object {@code ompi_mpi_errors_return}. */
    public static MemorySegment ompi_mpi_errors_return() {
        return ompi_mpi_errors_return$.ADDR;
    }
}
