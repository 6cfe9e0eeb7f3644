package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The PTX pipeline without a GPU, for both committed sets ({@link Kernels#ARCHS}: portable sm_80 and sm_90a): the
 * committed PTX is what {@code build-ptx.sh} makes from the sources (when nvcc is here), {@code ptxas -arch=sm_90a}
 * accepts every module without spills (when ptxas is here; the report goes to {@code target/ptxas-report.txt}),
 * and every {@code .entry} matches its {@link KernelSignature} in {@link Kernels#ALL}. Runs in the module directory
 * ({@code kernels/}), as Maven does.
 */
class KernelPtxTest {

    private static final Path SOURCES = Path.of("src/main/cuda");
    private static final Path COMMITTED = Path.of("src/main/resources/io/accel4j/kernels/ptx");
    /** Where the Maven build writes the PTX it compiles (kernels/pom.xml, build-ptx.sh --build). */
    private static final Path BUILT = Path.of("target/generated-resources/ptx/io/accel4j/kernels/ptx");

    /** Where build-ptx.sh puts {@code module}'s PTX for {@code arch}, relative to its output folder. */
    static String ptxFile(String arch, String module) {
        return (arch.equals(Kernels.PORTABLE_ARCH) ? "" : arch + "/") + module + ".ptx";
    }

    /** {@code tool} on the PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin, or null. */
    static Path findTool(String tool) {
        List<String> dirs = new ArrayList<>(List.of(System.getenv().getOrDefault("PATH", "").split(":")));
        if (System.getenv("CUDA_HOME") != null) {
            dirs.add(System.getenv("CUDA_HOME") + "/bin");
        }
        dirs.add("/usr/local/cuda/bin");
        for (String d : dirs) {
            Path p = Path.of(d.isEmpty() ? "." : d, tool);
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }

    /** Runs {@code command}, returns stdout+stderr; fails the test on a non-zero exit. */
    static String run(List<String> command, Map<String, String> env) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().putAll(env);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("%s finished", command).isTrue();
        assertThat(p.exitValue()).as("%s exit status; output:%n%s", command, out).isZero();
        return out;
    }

    @Test
    void everyCudaSourceHasCommittedPtx() throws IOException {
        try (var files = Files.list(SOURCES)) {
            List<String> sources = files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".cu"))
                    .map(n -> n.substring(0, n.length() - 3)).sorted().toList();
            assertThat(sources).containsExactlyElementsOf(Kernels.MODULES);
        }
        for (String arch : Kernels.ARCHS) {
            for (String m : Kernels.MODULES) {
                // ISA 8.0 so that any driver panama-cuda accepts can JIT it (build-ptx.sh lowers nvcc 13's 9.0)
                assertThat(Kernels.ptx(m, arch)).as("%s", ptxFile(arch, m))
                        .contains("\n.version 8.0\n", "\n.target " + arch + "\n");
            }
        }
    }

    /**
     * Issue 18, item 1: the driver floor ({@link io.accel4j.cuda.Cuda#REQUIRED_DRIVER_VERSION}, 12.0) rests on the
     * PTX ISA of every committed module being {@link io.accel4j.cuda.Cuda#PTX_ISA}, the one a 12.0 driver JITs.
     */
    @Test
    void everyModuleIsThePtxIsaTheDriverFloorAssumes() {
        for (String arch : Kernels.ARCHS) {
            for (String module : Kernels.MODULES) {
                Matcher m = Pattern.compile("(?m)^\\.version (\\S+)$").matcher(Kernels.ptx(module, arch));
                assertThat(m.find()).as("%s/%s has a .version", arch, module).isTrue();
                assertThat(m.group(1)).as("%s/%s", arch, module).isEqualTo(io.accel4j.cuda.Cuda.PTX_ISA);
            }
        }
    }

    @Test
    void hopperPtxOnlyForComputeCapability90() {
        assertThat(Kernels.ptxArch(90)).isEqualTo("sm_90a");
        for (int cc : new int[] {80, 86, 89, 100, 103, 120}) {
            assertThat(Kernels.ptxArch(cc)).as("compute capability %d", cc).isEqualTo("sm_80");
        }
        assertThat(Kernels.ptx("gelu", "sm_90a")).isNotEqualTo(Kernels.ptx("gelu"));
        assertThatThrownBy(() -> Kernels.ptx("gelu", "sm_70")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("no PTX for sm_70");
    }

    /**
     * The committed PTX against nvcc's from the same sources: the build's own (the Maven build compiles them when
     * nvcc is here, {@link #BUILT}) when it is newer than every source, else a fresh run of build-ptx.sh.
     */
    @Test
    void committedPtxIsNotStale(@TempDir Path tmp) throws Exception {
        Path fresh = BUILT;
        if (!builtIsCurrent()) {
            Path nvcc = findTool("nvcc");
            assumeTrue(nvcc != null, "nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): staleness not checked");
            run(List.of("bash", "build-ptx.sh", tmp.toString()), Map.of("NVCC", nvcc.toString()));
            fresh = tmp;
        }
        for (String arch : Kernels.ARCHS) {
            for (String m : Kernels.MODULES) {
                checkSame(ptxFile(arch, m), fresh.resolve(ptxFile(arch, m)));
            }
        }
    }

    /**
     * The committed sm_90a cubins (issue 18: loaded before the PTX on compute capability 9.0, no JIT) are ptxas's
     * output of the committed sm_90a PTX, byte for byte (ptxas is deterministic); skipped without ptxas.
     */
    @Test
    void committedCubinsAreFresh(@TempDir Path tmp) throws Exception {
        Path ptxas = findTool("ptxas");
        assumeTrue(ptxas != null, "ptxas not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): cubins not checked");
        for (String m : Kernels.MODULES) {
            Path cubin = tmp.resolve(m + ".cubin");
            run(List.of(ptxas.toString(), "-arch=sm_90a", "-o", cubin.toString(),
                    COMMITTED.resolve(ptxFile(Kernels.HOPPER_ARCH, m)).toString()), Map.of());
            byte[] committed = Kernels.cubin(m, Kernels.HOPPER_ARCH).orElseThrow(
                    () -> new AssertionError("no committed cubin for " + m + ": run kernels/build-ptx.sh"));
            assertThat(java.util.Arrays.equals(committed, Files.readAllBytes(cubin)))
                    .as("%s.cubin is stale: run kernels/build-ptx.sh and commit it", m).isTrue();
        }
        assertThat(Kernels.cubin("gelu", Kernels.PORTABLE_ARCH)).as("no cubin for sm_80").isEmpty();
    }

    /** Whether the build compiled every module's PTX after the last change to any CUDA source. */
    private static boolean builtIsCurrent() throws IOException {
        long newestSource = 0;
        try (var files = Files.list(SOURCES)) {
            for (Path f : files.toList()) {
                newestSource = Math.max(newestSource, Files.getLastModifiedTime(f).toMillis());
            }
        }
        for (String arch : Kernels.ARCHS) {
            for (String m : Kernels.MODULES) {
                Path p = BUILT.resolve(ptxFile(arch, m));
                if (!Files.exists(p) || Files.getLastModifiedTime(p).toMillis() <= newestSource) {
                    return false;
                }
            }
        }
        return true;
    }

    private static void checkSame(String file, Path freshFile) throws IOException {
        String fresh = PtxEntries.withoutHeader(Files.readString(freshFile));
        String committed = PtxEntries.withoutHeader(Files.readString(COMMITTED.resolve(file)));
        if (!committed.equals(fresh)) {
            String[] a = committed.split("\n", -1), b = fresh.split("\n", -1);
            int line = 0;
            while (line < Math.min(a.length, b.length) && a[line].equals(b[line])) {
                line++;
            }
            throw new AssertionError(file + " is stale (after its header, first difference at line " + (line + 1)
                    + ": committed \"" + (line < a.length ? a[line] : "<end>") + "\", nvcc \""
                    + (line < b.length ? b[line] : "<end>") + "\"): run kernels/build-ptx.sh and commit it");
        }
    }

    private static final Pattern FUNCTION = Pattern.compile("Function properties for (\\w+)");
    private static final Pattern SPILLS =
            Pattern.compile("(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads");
    private static final Pattern USED = Pattern.compile("Used (\\d+) registers(?:.*?, (\\d+) bytes smem)?");

    /** One kernel's line of the ptxas report (module: the PTX file, e.g. {@code sm_90a/gelu.ptx}). */
    record Usage(String module, int registers, int stack, int spillStores, int spillLoads, int smem) {}

    @Test
    void ptxasAcceptsEveryModuleForHopperWithoutSpills() throws Exception {
        Path ptxas = findTool("ptxas");
        assumeTrue(ptxas != null, "ptxas not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): PTX not validated");
        Map<String, Usage> usage = new TreeMap<>();
        StringBuilder raw = new StringBuilder();
        for (String arch : Kernels.ARCHS) {
            for (String m : Kernels.MODULES) {
                ptxas(ptxas, arch, m, usage, raw);
            }
        }
        StringBuilder report = new StringBuilder("# ptxas -arch=sm_90a -v on kernels/src/main/resources/.../ptx\n");
        report.append(String.format("%-36s %-26s %5s %6s %7s %7s %6s%n",
                "ptx kernel", "file", "regs", "stack", "spillSt", "spillLd", "smem"));
        usage.forEach((k, u) -> report.append(String.format("%-36s %-26s %5d %6d %7d %7d %6d%n",
                k, u.module(), u.registers(), u.stack(), u.spillStores(), u.spillLoads(), u.smem())));
        report.append("\n# raw output\n").append(raw);
        Files.createDirectories(Path.of("target"));
        Files.writeString(Path.of("target/ptxas-report.txt"), report);

        assertThat(usage.keySet()).as("kernels in the ptxas report").containsExactlyInAnyOrderElementsOf(
                Kernels.ARCHS.stream().flatMap(a -> Kernels.ALL.stream().map(s -> a + " " + s.entry())).toList());
        usage.forEach((k, u) -> {
            assertThat(u.spillStores() + u.spillLoads()).as("%s spills (see target/ptxas-report.txt)", k).isZero();
            assertThat(u.stack()).as("%s stack frame", k).isZero();
        });
    }

    /** Runs ptxas on the committed {@code module} PTX of {@code arch}; adds its kernels to usage ("arch entry"). */
    private static void ptxas(Path ptxas, String arch, String m, Map<String, Usage> usage, StringBuilder raw)
            throws IOException, InterruptedException {
        String file = ptxFile(arch, m);
        Path cubin = Files.createTempFile("accel4j-" + m, ".cubin");
        try {
            String out = run(List.of(ptxas.toString(), "-arch=sm_90a", "-v", "-o", cubin.toString(),
                    COMMITTED.resolve(file).toString()), Map.of());
            raw.append("== ").append(file).append("\n").append(out);
            String current = null;
            Matcher s = null;
            for (String line : out.split("\n")) {
                Matcher f = FUNCTION.matcher(line);
                if (f.find()) {
                    current = f.group(1);
                    continue;
                }
                Matcher sp = SPILLS.matcher(line);
                if (sp.find()) {
                    s = sp;
                    continue;
                }
                Matcher u = USED.matcher(line);
                if (u.find() && current != null && s != null) {
                    usage.put(arch + " " + current, new Usage(file, Integer.parseInt(u.group(1)),
                            Integer.parseInt(s.group(1)), Integer.parseInt(s.group(2)), Integer.parseInt(s.group(3)),
                            u.group(2) == null ? 0 : Integer.parseInt(u.group(2))));
                    current = null;
                    s = null;
                }
            }
        } finally {
            Files.deleteIfExists(cubin);
        }
    }

    @Test
    void everyEntryMatchesItsLauncherSignature() {
        Map<String, KernelSignature> byName = Kernels.ALL.stream()
                .collect(Collectors.toMap(KernelSignature::entry, s -> s));
        assertThat(byName).as("entry names are unique").hasSameSizeAs(Kernels.ALL);
        for (String arch : Kernels.ARCHS) {
            entriesMatch(arch, byName);
        }
    }

    private static void entriesMatch(String arch, Map<String, KernelSignature> byName) {
        int seen = 0;
        for (String m : Kernels.MODULES) {
            Map<String, List<String>> entries = PtxEntries.parse(Kernels.ptx(m, arch));
            assertThat(entries).as("entries of %s", ptxFile(arch, m)).isNotEmpty();
            for (var e : entries.entrySet()) {
                KernelSignature s = byName.get(e.getKey());
                assertThat(s).as("launcher signature for .entry %s of %s (add it to Kernels)", e.getKey(),
                                ptxFile(arch, m))
                        .isNotNull();
                assertThat(s.module()).as("module of %s", e.getKey()).isEqualTo(m);
                List<String> expected = s.params().stream().map(KernelSignature.Param::ptxType).toList();
                assertThat(e.getValue()).as("parameter types of %s (PTX vs Kernels.%s)", e.getKey(), e.getKey())
                        .containsExactlyElementsOf(expected);
                assertThat(e.getValue().stream().map(PtxEntries::bytes).toList()).as("parameter sizes of %s",
                        e.getKey()).containsExactlyElementsOf(s.params().stream()
                        .map(KernelSignature.Param::bytes).toList());
                seen++;
            }
        }
        assertThat(seen).as("every signature has its .entry in the %s PTX", arch).isEqualTo(Kernels.ALL.size());
    }

    @Test
    void parserReadsParamListsAndHeaders() {
        String ptx = "//\n// Generated by NVIDIA NVVM Compiler\n//\n\n.version 9.0\n"
                + ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u32 k_param_1,\n"
                + "\t.param .align 8 .b8 k_param_2[16]\n)\n{\n}\n.visible .entry empty()\n{\n}\n";
        Map<String, List<String>> e = PtxEntries.parse(ptx);
        assertThat(e).containsOnlyKeys("k", "empty");
        assertThat(e.get("k")).containsExactly(".u64", ".u32", ".b8[16]");
        assertThat(e.get("k").stream().map(PtxEntries::bytes).toList()).containsExactly(8, 4, 16);
        assertThat(e.get("empty")).isEmpty();
        assertThat(PtxEntries.withoutHeader(ptx)).startsWith(".version 9.0");
    }

    @Test
    void packChecksCountAndKinds() {
        KernelSignature s = Kernels.GELU_FORWARD;
        MemorySegment dev = MemorySegment.ofAddress(0x1000);
        assertThat(s.pack(dev, dev, 5L)).containsExactly(0x1000L, 0x1000L, 5L);
        assertThatThrownBy(() -> s.pack(dev, dev)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("gelu_forward takes 3 parameters, got 2");
        assertThatThrownBy(() -> s.pack(dev, dev, 5)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("parameter 2 is I64, got Integer");
        assertThatThrownBy(() -> s.pack(dev, 1.0f, 5L)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("parameter 1 is PTR");
    }
}
