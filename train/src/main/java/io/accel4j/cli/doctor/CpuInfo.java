package io.accel4j.cli.doctor;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The CPU model and feature flags, as {@code /proc/cpuinfo} states them for its first processor.
 *
 * @param model  the model name, or {@code "unknown"}
 * @param flags  the feature flags (x86 {@code flags}, Arm {@code Features}); empty when unknown
 * @param source where they came from, or why they are unknown
 */
record CpuInfo(String model, Set<String> flags, String source) {

    static final String PROC_CPUINFO = "/proc/cpuinfo";

    /** The features that matter to the kernels, in the order doctor lists them (x86, then Arm). */
    static final List<String> INTERESTING = List.of(
            "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni",
            "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
            "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
            "asimd", "asimdhp", "fphp", "bf16", "i8mm", "sve", "sve2", "sme");

    /** Reads {@code file}; a missing or unreadable file gives model and flags "unknown". */
    static CpuInfo read(Path file) {
        try {
            return parse(Files.readAllLines(file), file.toString());
        } catch (NoSuchFileException e) {
            return new CpuInfo("unknown", Set.of(), file + " not found");
        } catch (IOException | SecurityException e) {
            return new CpuInfo("unknown", Set.of(), file + " unreadable: " + e.getMessage());
        }
    }

    /** Parses the text of a cpuinfo file: the first processor's model and flags. */
    static CpuInfo parse(List<String> lines, String source) {
        String model = null;
        String hardware = null;
        String implementer = null;
        String part = null;
        Set<String> flags = new LinkedHashSet<>();
        boolean flagsSeen = false;
        for (String line : lines) {
            int colon = line.indexOf(':');
            if (colon < 0) {
                if (line.isBlank() && (model != null || flagsSeen)) {
                    break; // end of the first processor's block
                }
                continue;
            }
            String key = line.substring(0, colon).strip();
            String value = line.substring(colon + 1).strip();
            switch (key) {
                case "model name" -> model = model == null ? value : model;
                case "Hardware" -> hardware = value;
                case "CPU implementer" -> implementer = implementer == null ? value : implementer;
                case "CPU part" -> part = part == null ? value : part;
                case "flags", "Features" -> {
                    if (!flagsSeen && !value.isEmpty()) {
                        flags.addAll(List.of(value.split("\\s+")));
                    }
                    flagsSeen = true;
                }
                default -> { }
            }
        }
        if (model == null) {
            if (hardware != null) {
                model = hardware;
            } else if (implementer != null) {
                model = "Arm CPU (implementer " + implementer + (part != null ? ", part " + part : "") + ")";
            } else {
                model = "unknown";
            }
        }
        return new CpuInfo(model, Set.copyOf(flags), source);
    }

    /** The {@link #INTERESTING} features present, in that order. */
    List<String> present() {
        return INTERESTING.stream().filter(flags::contains).toList();
    }

    /** The {@link #INTERESTING} features of this architecture that are absent. */
    List<String> absent() {
        boolean arm = flags.contains("asimd") || flags.contains("fp");
        List<String> family = arm
                ? INTERESTING.subList(INTERESTING.indexOf("asimd"), INTERESTING.size())
                : INTERESTING.subList(0, INTERESTING.indexOf("asimd"));
        return family.stream().filter(f -> !flags.contains(f)).toList();
    }
}
