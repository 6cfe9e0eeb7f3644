package io.accel4j.cli.doctor;

import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.collectives.mpi.MpiLibrary;
import io.accel4j.collectives.mpi.Mpirun;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.cuda.NcclComm;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Which communicator backends {@code accel4j train} can use here, and why not: the in-process ring (always), Open MPI
 * (libmpi found? its version, {@code mpirun} on PATH, whether this process was started by it) and NCCL (libnccl found
 * where, its version, or the places searched; and whether a CUDA GPU is there to use it).
 */
final class CommunicatorsSection implements DoctorSection {

    /** What the section reports on, gathered by {@link #probe()} (or made up by a test). */
    record Facts(String mpiLibrary, String mpiMissing, String mpiVersion, Path mpirun, boolean root,
                 Map<String, String> env, CudaProbe cuda, CudaLibraries.Search nccl, String ncclVersion) {}

    private final Supplier<Facts> facts;

    CommunicatorsSection(Supplier<Facts> facts) {
        this.facts = facts;
    }

    /** This machine's facts; loads libmpi (without initializing MPI) and probes CUDA. */
    static Facts probe() {
        String version = null;
        if (MpiLibrary.available()) {
            try {
                version = MpiCommunicator.libraryVersion();
            } catch (RuntimeException | LinkageError e) {
                version = "unknown (" + DoctorCommand.rootMessage(e) + ")";
            }
        }
        CudaProbe cuda = Cuda.probe();
        CudaLibraries.Search nccl = CudaLibraries.nccl(); // loading libnccl needs no GPU; ncclGetVersion neither
        String ncclVersion = null;
        if (nccl.found()) {
            try {
                ncclVersion = NcclComm.versionString(NcclComm.version());
            } catch (RuntimeException | LinkageError e) {
                ncclVersion = "version unknown (" + DoctorCommand.rootMessage(e) + ")";
            }
        }
        return new Facts(MpiLibrary.loadedFrom(), MpiLibrary.unavailableReason(), version,
                Mpirun.find().orElse(null), Mpirun.root(), System.getenv(), cuda, nccl, ncclVersion);
    }

    @Override
    public String title() {
        return "Communicators";
    }

    @Override
    public List<Line> lines() {
        Facts f = facts.get();
        List<Line> lines = new ArrayList<>();
        lines.add(new Line("in-process", "available: train --ranks N runs N ranks as threads of one JVM (ring)"));
        if (f.mpiLibrary() == null) {
            lines.add(new Line("Open MPI", "unavailable: " + f.mpiMissing()));
        } else {
            lines.add(new Line("Open MPI", "available: " + firstPart(f.mpiVersion()) + " (" + f.mpiLibrary() + ")"));
        }
        lines.add(new Line("mpirun", f.mpirun() == null ? "not on PATH (scripts/install-openmpi.sh installs it)"
                : f.mpirun() + (f.root() ? " (as root: mpirun --allow-run-as-root -np N bin/accel4j train …)"
                : " (mpirun -np N bin/accel4j train …)")));
        String size = f.env().get("OMPI_COMM_WORLD_SIZE");
        lines.add(new Line("this process", size == null ? "not started by mpirun"
                : "started by mpirun: rank " + f.env().getOrDefault("OMPI_COMM_WORLD_RANK", "?") + " of " + size));
        lines.add(new Line("NCCL", nccl(f)));
        return lines;
    }

    /** The library (found where, which version, or where it was searched), then whether a GPU is there to use it. */
    private static String nccl(Facts f) {
        String library;
        if (f.nccl() == null) {
            library = "library not searched";
        } else if (!f.nccl().found()) {
            library = "library not found: " + f.nccl().notFoundMessage();
        } else {
            String v = f.ncclVersion() == null ? "version unknown" : f.ncclVersion();
            library = "library found: " + (Character.isDigit(v.charAt(0)) ? "NCCL " + v : v) + " ("
                    + f.nccl().loadedFrom() + ")";
        }
        if (!(f.cuda() instanceof CudaProbe.Ready)) {
            return library + "; unavailable: needs a CUDA GPU (" + (f.cuda() instanceof CudaProbe.DriverNotFound
                    ? "no NVIDIA driver, see CUDA below" : "CUDA: " + f.cuda().describe()) + ")";
        }
        return f.nccl() != null && f.nccl().found() ? library + "; usable by NcclCommunicator" : library;
    }

    /** {@code "Open MPI v4.1.4"} of {@code "Open MPI v4.1.4, package: …, ident: …"}. */
    private static String firstPart(String version) {
        if (version == null) {
            return "version unknown";
        }
        int comma = version.indexOf(',');
        return comma > 0 ? version.substring(0, comma) : version.lines().findFirst().orElse(version);
    }
}
