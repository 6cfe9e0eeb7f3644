package io.accel4j.cli.doctor;

import io.accel4j.cuda.Cuda;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/** {@code accel4j doctor}: what this machine and JVM offer the kernels, section by section. */
@Command(name = "doctor",
        description = "Report the JVM, the CPU and its vector features, the kernels' width and threads, memory, the "
                + "communicator backends (in-process, Open MPI, NCCL) and CUDA.")
public final class DoctorCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    /** The report, in order. A new backend (CUDA, MPI) adds its section here. */
    static List<DoctorSection> sections() {
        return List.of(
                new JvmSection(),
                new CpuSection(CpuInfo.read(Path.of(CpuInfo.PROC_CPUINFO))),
                new KernelsSection(),
                new MemorySection(),
                new CommunicatorsSection(CommunicatorsSection::probe),
                new CudaSection(Cuda::probe));
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        print(sections(), out);
        out.flush();
        return 0;
    }

    /** Prints the sections with every value in one column. */
    static void print(List<DoctorSection> sections, PrintWriter out) {
        List<String> titles = new ArrayList<>();
        List<List<DoctorSection.Line>> blocks = new ArrayList<>();
        int keyWidth = 0;
        for (DoctorSection s : sections) {
            List<DoctorSection.Line> lines;
            try {
                lines = s.lines();
            } catch (RuntimeException | LinkageError e) {
                lines = List.of(new DoctorSection.Line("error", rootMessage(e)));
            }
            titles.add(s.title());
            blocks.add(lines);
            for (DoctorSection.Line l : lines) {
                keyWidth = Math.max(keyWidth, l.key().length());
            }
        }
        for (int i = 0; i < titles.size(); i++) {
            if (i > 0) {
                out.println();
            }
            out.println(titles.get(i));
            for (DoctorSection.Line l : blocks.get(i)) {
                out.println("  " + pad(l.key(), keyWidth) + "  " + l.value());
            }
        }
    }

    /** The innermost cause's message (an ExceptionInInitializerError says nothing by itself). */
    static String rootMessage(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return root.getMessage() != null ? root.getMessage() : root.toString();
    }

    private static String pad(String s, int width) {
        return s + " ".repeat(Math.max(0, width - s.length()));
    }
}
