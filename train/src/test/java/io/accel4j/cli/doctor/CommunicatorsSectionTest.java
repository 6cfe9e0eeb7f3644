package io.accel4j.cli.doctor;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.mpi.MpiLibrary;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class CommunicatorsSectionTest {

    private static final CudaProbe NO_DRIVER = new CudaProbe.DriverNotFound(List.of("dynamic loader (libcuda.so.1)"));
    private static final CudaProbe GPU = new CudaProbe.Ready("NVIDIA H200", 90, 132, 150L << 30, 13000, 1, "x");

    @Test
    void openMpiUnderMpirunWithoutAGpu() {
        CommunicatorsSection s = new CommunicatorsSection(() -> new CommunicatorsSection.Facts(
                "libmpi.so.40", null, "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4", Path.of("/usr/bin/mpirun"),
                true, Map.of("OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_RANK", "1"), NO_DRIVER,
                new CudaLibraries.Search("libnccl.so.2", null, null, List.of("dynamic loader", "/usr/local/cuda/lib64")),
                null));

        assertThat(s.title()).isEqualTo("Communicators");
        assertThat(s.lines()).containsExactly(
                new DoctorSection.Line("in-process", "available: train --ranks N runs N ranks as threads of one JVM "
                        + "(ring)"),
                new DoctorSection.Line("Open MPI", "available: Open MPI v4.1.4 (libmpi.so.40)"),
                new DoctorSection.Line("mpirun", "/usr/bin/mpirun (as root: mpirun --allow-run-as-root -np N "
                        + "bin/accel4j train …)"),
                new DoctorSection.Line("this process", "started by mpirun: rank 1 of 2"),
                new DoctorSection.Line("NCCL", "library not found: libnccl.so.2 not found (searched: dynamic loader,"
                        + " /usr/local/cuda/lib64); unavailable: needs a CUDA GPU (no NVIDIA driver, see CUDA below)"));
    }

    @Test
    void missingPiecesSayWhy() {
        CommunicatorsSection s = new CommunicatorsSection(() -> new CommunicatorsSection.Facts(null,
                "Open MPI not found: libmpi.so.40 could not be loaded (searched: a, b)", null, null, false, Map.of(),
                GPU, new CudaLibraries.Search("libnccl.so.2", null, null, List.of("/opt/nccl")), null));

        assertThat(s.lines()).extracting(DoctorSection.Line::value).containsExactly(
                "available: train --ranks N runs N ranks as threads of one JVM (ring)",
                "unavailable: Open MPI not found: libmpi.so.40 could not be loaded (searched: a, b)",
                "not on PATH (scripts/install-openmpi.sh installs it)",
                "not started by mpirun",
                "library not found: libnccl.so.2 not found (searched: /opt/nccl)");
    }

    @Test
    void ncclFoundSaysItsVersionAndWhetherAGpuIsThere() {
        // any lookup makes a Search "found"; the facts are made up, nothing is called
        java.lang.foreign.SymbolLookup any = java.lang.foreign.Linker.nativeLinker().defaultLookup();
        CudaLibraries.Search nccl = new CudaLibraries.Search("libnccl.so.2", any, "/opt/nccl/lib/libnccl.so.2",
                List.of("dynamic loader"));
        for (var c : List.of(new Object[]{GPU, "library found: NCCL 2.28.3 (/opt/nccl/lib/libnccl.so.2); usable by"
                        + " NcclCommunicator"},
                new Object[]{NO_DRIVER, "library found: NCCL 2.28.3 (/opt/nccl/lib/libnccl.so.2); unavailable: needs a"
                        + " CUDA GPU (no NVIDIA driver, see CUDA below)"})) {
            CommunicatorsSection s = new CommunicatorsSection(() -> new CommunicatorsSection.Facts(null, "x", null, null,
                    false, Map.of(), (CudaProbe) c[0], nccl, "2.28.3"));
            assertThat(s.lines()).last().isEqualTo(new DoctorSection.Line("NCCL", (String) c[1]));
        }
    }

    @Test
    void theReportHasTheSectionMatchingThisMachine() {
        assertThat(DoctorCommand.sections()).filteredOn(s -> s.title().equals("Communicators")).singleElement()
                .satisfies(s -> assertThat(s.lines().get(1).value()).startsWith(MpiLibrary.available()
                        ? "available: Open MPI v" : "unavailable: Open MPI not found"));
    }
}
