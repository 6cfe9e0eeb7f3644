package io.accel4j.cuda.bindings;

import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * NCCL ({@code nccl.h}, 2.24 or newer for the FP8 data types; {@link #ncclConfig_t} is 2.28's layout) as jextract shapes it: a static method per function
 * with a holder owning its {@link FunctionDescriptor}, its C prototype and a downcall handle created on the first
 * call (loading this class touches no library; without {@code libnccl.so.2} a call throws
 * {@link io.accel4j.cuda.CudaException} listing where it looked). Only what the project uses is bound.
 * {@code NcclHeaderCheckTest} compiles every prototype, layout and constant against {@code nccl.h} where one is found.
 */
public final class nccl_h {

    private nccl_h() {}

    public static final ValueLayout.OfByte C_CHAR = ValueLayout.JAVA_BYTE;
    public static final ValueLayout.OfInt C_INT = ValueLayout.JAVA_INT;
    public static final ValueLayout.OfLong C_LONG = ValueLayout.JAVA_LONG;
    public static final AddressLayout C_POINTER = ValueLayout.ADDRESS;

    // typedefs (name = the C type; checked with sizeof)
    public static final ValueLayout.OfInt ncclResult_t = C_INT;
    public static final ValueLayout.OfInt ncclDataType_t = C_INT;
    public static final ValueLayout.OfInt ncclRedOp_t = C_INT;
    public static final ValueLayout.OfLong size_t = C_LONG;
    public static final AddressLayout ncclComm_t = C_POINTER;
    public static final AddressLayout cudaStream_t = C_POINTER;

    public static final int NCCL_UNIQUE_ID_BYTES = 128;
    /** {@code typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;} (passed by value). */
    public static final StructLayout ncclUniqueId = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(NCCL_UNIQUE_ID_BYTES, C_CHAR).withName("internal")).withName("ncclUniqueId");

    /** {@code NCCL_CONFIG_UNDEF_INT} ({@code INT_MIN}): a config field left to NCCL's default. */
    public static final int NCCL_CONFIG_UNDEF_INT = Integer.MIN_VALUE;

    /**
     * {@code ncclConfig_t} as NCCL 2.28 declares it ({@code struct ncclConfig_v22800}, 80 bytes). The struct is
     * versioned and append-only: {@code size}, {@code magic} and {@code version} come first, every release only adds
     * members at the end, so this layout is a prefix of newer ones (2.29+ append {@code graphUsageMode}, …) and older
     * libraries read only their own prefix: {@code ncclCommInitRankConfig} copies {@code min(size, its own sizeof)}
     * bytes and resets the members newer than {@code version}. Fill it with {@code io.accel4j.cuda.NcclConfig}
     * (the equivalent of {@code NCCL_CONFIG_INITIALIZER}); {@code NcclHeaderCheckTest} checks every offset against
     * {@code nccl.h} 2.28 or newer.
     */
    public static final StructLayout ncclConfig_t = MemoryLayout.structLayout(
            size_t.withName("size"),
            ValueLayout.JAVA_INT.withName("magic"),
            ValueLayout.JAVA_INT.withName("version"),
            C_INT.withName("blocking"),
            C_INT.withName("cgaClusterSize"),
            C_INT.withName("minCTAs"),
            C_INT.withName("maxCTAs"),
            C_POINTER.withName("netName"),
            C_INT.withName("splitShare"),
            C_INT.withName("trafficClass"),
            C_POINTER.withName("commName"),
            C_INT.withName("collnetEnable"),
            C_INT.withName("CTAPolicy"),
            C_INT.withName("shrinkShare"),
            C_INT.withName("nvlsCTAs"),
            C_INT.withName("nChannelsPerNetPeer"),
            C_INT.withName("nvlinkCentricSched")).withName("ncclConfig_t");

    // ncclResult_t
    public static final int ncclSuccess = 0;
    public static final int ncclUnhandledCudaError = 1;
    public static final int ncclSystemError = 2;
    public static final int ncclInternalError = 3;
    public static final int ncclInvalidArgument = 4;
    public static final int ncclInvalidUsage = 5;
    public static final int ncclRemoteError = 6;
    public static final int ncclInProgress = 7;

    // ncclRedOp_t
    public static final int ncclSum = 0;
    public static final int ncclProd = 1;
    public static final int ncclMax = 2;
    public static final int ncclMin = 3;
    public static final int ncclAvg = 4;

    // ncclDataType_t
    public static final int ncclInt8 = 0;
    public static final int ncclUint8 = 1;
    public static final int ncclInt32 = 2;
    public static final int ncclUint32 = 3;
    public static final int ncclInt64 = 4;
    public static final int ncclUint64 = 5;
    public static final int ncclFloat16 = 6;
    public static final int ncclFloat32 = 7;
    public static final int ncclFloat64 = 8;
    public static final int ncclBfloat16 = 9;
    public static final int ncclFloat8e4m3 = 10;
    public static final int ncclFloat8e5m2 = 11;

    private static final class ncclGetVersion {
        static final String PROTOTYPE = "ncclResult_t ncclGetVersion(int *version)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclGetVersion", DESC);
    }

    /** {@code ncclResult_t ncclGetVersion(int *version)} */
    public static int ncclGetVersion(MemorySegment version) {
        try {
            return (int) ncclGetVersion.HANDLE.handle().invokeExact(version);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclGetUniqueId {
        static final String PROTOTYPE = "ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclGetUniqueId", DESC);
    }

    /** {@code ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)} */
    public static int ncclGetUniqueId(MemorySegment uniqueId) {
        try {
            return (int) ncclGetUniqueId.HANDLE.handle().invokeExact(uniqueId);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclCommInitRank {
        static final String PROTOTYPE = "ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, C_INT, ncclUniqueId, C_INT);
        static final Downcall HANDLE = Downcall.nccl("ncclCommInitRank", DESC);
    }

    /** {@code ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)} */
    public static int ncclCommInitRank(MemorySegment comm, int nranks, MemorySegment commId, int rank) {
        try {
            return (int) ncclCommInitRank.HANDLE.handle().invokeExact(comm, nranks, commId, rank);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclCommInitRankConfig {
        static final String PROTOTYPE = "ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, C_INT, ncclUniqueId, C_INT, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclCommInitRankConfig", DESC);
    }

    /** {@code ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)} */
    public static int ncclCommInitRankConfig(MemorySegment comm, int nranks, MemorySegment commId, int rank, MemorySegment config) {
        try {
            return (int) ncclCommInitRankConfig.HANDLE.handle().invokeExact(comm, nranks, commId, rank, config);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclCommDestroy {
        static final String PROTOTYPE = "ncclResult_t ncclCommDestroy(ncclComm_t comm)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclCommDestroy", DESC);
    }

    /** {@code ncclResult_t ncclCommDestroy(ncclComm_t comm)} */
    public static int ncclCommDestroy(MemorySegment comm) {
        try {
            return (int) ncclCommDestroy.HANDLE.handle().invokeExact(comm);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclCommAbort {
        static final String PROTOTYPE = "ncclResult_t ncclCommAbort(ncclComm_t comm)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclCommAbort", DESC);
    }

    /** {@code ncclResult_t ncclCommAbort(ncclComm_t comm)} */
    public static int ncclCommAbort(MemorySegment comm) {
        try {
            return (int) ncclCommAbort.HANDLE.handle().invokeExact(comm);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclCommGetAsyncError {
        static final String PROTOTYPE = "ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclCommGetAsyncError", DESC);
    }

    /** {@code ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)} */
    public static int ncclCommGetAsyncError(MemorySegment comm, MemorySegment asyncError) {
        try {
            return (int) ncclCommGetAsyncError.HANDLE.handle().invokeExact(comm, asyncError);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclGetErrorString {
        static final String PROTOTYPE = "const char *ncclGetErrorString(ncclResult_t result)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(C_POINTER, ncclResult_t);
        static final Downcall HANDLE = Downcall.nccl("ncclGetErrorString", DESC);
    }

    /** {@code const char *ncclGetErrorString(ncclResult_t result)} */
    public static MemorySegment ncclGetErrorString(int result) {
        try {
            return (MemorySegment) ncclGetErrorString.HANDLE.handle().invokeExact(result);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclAllReduce {
        static final String PROTOTYPE = "ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, C_POINTER, size_t, C_INT, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclAllReduce", DESC);
    }

    /** {@code ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)} */
    public static int ncclAllReduce(MemorySegment sendbuff, MemorySegment recvbuff, long count, int datatype, int op, MemorySegment comm, MemorySegment stream) {
        try {
            return (int) ncclAllReduce.HANDLE.handle().invokeExact(sendbuff, recvbuff, count, datatype, op, comm, stream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclReduce {
        static final String PROTOTYPE = "ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, C_POINTER, size_t, C_INT, C_INT, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclReduce", DESC);
    }

    /** {@code ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)} */
    public static int ncclReduce(MemorySegment sendbuff, MemorySegment recvbuff, long count, int datatype, int op, int root, MemorySegment comm, MemorySegment stream) {
        try {
            return (int) ncclReduce.HANDLE.handle().invokeExact(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclReduceScatter {
        static final String PROTOTYPE = "ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, C_POINTER, size_t, C_INT, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclReduceScatter", DESC);
    }

    /** {@code ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)} */
    public static int ncclReduceScatter(MemorySegment sendbuff, MemorySegment recvbuff, long recvcount, int datatype, int op, MemorySegment comm, MemorySegment stream) {
        try {
            return (int) ncclReduceScatter.HANDLE.handle().invokeExact(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclAllGather {
        static final String PROTOTYPE = "ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, C_POINTER, size_t, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclAllGather", DESC);
    }

    /** {@code ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)} */
    public static int ncclAllGather(MemorySegment sendbuff, MemorySegment recvbuff, long sendcount, int datatype, MemorySegment comm, MemorySegment stream) {
        try {
            return (int) ncclAllGather.HANDLE.handle().invokeExact(sendbuff, recvbuff, sendcount, datatype, comm, stream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclBroadcast {
        static final String PROTOTYPE = "ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, C_POINTER, size_t, C_INT, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclBroadcast", DESC);
    }

    /** {@code ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)} */
    public static int ncclBroadcast(MemorySegment sendbuff, MemorySegment recvbuff, long count, int datatype, int root, MemorySegment comm, MemorySegment stream) {
        try {
            return (int) ncclBroadcast.HANDLE.handle().invokeExact(sendbuff, recvbuff, count, datatype, root, comm, stream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclSend {
        static final String PROTOTYPE = "ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, size_t, C_INT, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclSend", DESC);
    }

    /** {@code ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream)} */
    public static int ncclSend(MemorySegment sendbuff, long count, int datatype, int peer, MemorySegment comm, MemorySegment stream) {
        try {
            return (int) ncclSend.HANDLE.handle().invokeExact(sendbuff, count, datatype, peer, comm, stream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclRecv {
        static final String PROTOTYPE = "ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t, C_POINTER, size_t, C_INT, C_INT, C_POINTER, C_POINTER);
        static final Downcall HANDLE = Downcall.nccl("ncclRecv", DESC);
    }

    /** {@code ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream)} */
    public static int ncclRecv(MemorySegment recvbuff, long count, int datatype, int peer, MemorySegment comm, MemorySegment stream) {
        try {
            return (int) ncclRecv.HANDLE.handle().invokeExact(recvbuff, count, datatype, peer, comm, stream);
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclGroupStart {
        static final String PROTOTYPE = "ncclResult_t ncclGroupStart(void)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t);
        static final Downcall HANDLE = Downcall.nccl("ncclGroupStart", DESC);
    }

    /** {@code ncclResult_t ncclGroupStart(void)} */
    public static int ncclGroupStart() {
        try {
            return (int) ncclGroupStart.HANDLE.handle().invokeExact();
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }

    private static final class ncclGroupEnd {
        static final String PROTOTYPE = "ncclResult_t ncclGroupEnd(void)";
        static final FunctionDescriptor DESC = FunctionDescriptor.of(ncclResult_t);
        static final Downcall HANDLE = Downcall.nccl("ncclGroupEnd", DESC);
    }

    /** {@code ncclResult_t ncclGroupEnd(void)} */
    public static int ncclGroupEnd() {
        try {
            return (int) ncclGroupEnd.HANDLE.handle().invokeExact();
        } catch (Throwable t) {
            throw Downcall.rethrow(t);
        }
    }
}
