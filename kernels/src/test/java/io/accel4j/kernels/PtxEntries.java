package io.accel4j.kernels;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Reads the {@code .entry} declarations of a PTX text: each kernel's name and its parameters' PTX types in order. */
final class PtxEntries {

    private PtxEntries() {}

    private static final Pattern ENTRY = Pattern.compile("\\.entry\\s+(\\w+)\\s*\\(([^)]*)\\)");
    /** {@code .param .u64 name} or {@code .param .align 8 .b8 name[16]} (structs, reported as {@code .b8[16]}). */
    private static final Pattern PARAM =
            Pattern.compile("\\.param\\s+(?:\\.align\\s+\\d+\\s+)?(\\.\\w+)\\s+\\w+(?:\\[(\\d+)])?");

    /** Entry name → parameter types ({@code .u64}, {@code .u32}, {@code .f32}, …), in PTX order. */
    static Map<String, List<String>> parse(String ptx) {
        Map<String, List<String>> entries = new LinkedHashMap<>();
        Matcher e = ENTRY.matcher(ptx);
        while (e.find()) {
            List<String> types = new ArrayList<>();
            String list = e.group(2).trim();
            if (!list.isEmpty()) {
                for (String decl : list.split(",")) {
                    Matcher p = PARAM.matcher(decl.trim());
                    if (!p.matches()) {
                        throw new IllegalArgumentException("unparsed parameter of " + e.group(1) + ": " + decl.trim());
                    }
                    types.add(p.group(2) == null ? p.group(1) : p.group(1) + "[" + p.group(2) + "]");
                }
            }
            if (entries.put(e.group(1), types) != null) {
                throw new IllegalArgumentException("entry " + e.group(1) + " declared twice");
            }
        }
        return entries;
    }

    /** The size in bytes of a PTX scalar type ({@code .u64} → 8) or {@code .b8[n]} → n. */
    static int bytes(String type) {
        if (type.contains("[")) {
            return Integer.parseInt(type.substring(type.indexOf('[') + 1, type.length() - 1));
        }
        return Integer.parseInt(type.substring(2)) / 8;
    }

    /** The PTX without nvcc's leading {@code //} comment header (compiler build id and version lines). */
    static String withoutHeader(String ptx) {
        String[] lines = ptx.split("\n", -1);
        int i = 0;
        while (i < lines.length && (lines[i].startsWith("//") || lines[i].isBlank())) {
            i++;
        }
        return String.join("\n", java.util.Arrays.asList(lines).subList(i, lines.length));
    }
}
