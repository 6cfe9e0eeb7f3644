package io.accel4j.cli.bench;

import io.accel4j.core.DType;
import io.accel4j.cpu.gemm.Layout;
import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/** How the CLI spells dtypes and layouts, both ways. */
final class Names {

    private Names() {}

    /** {@code fp32}, {@code bf16}, {@code fp16}, {@code fp8_e4m3} ({@code fp8}, {@code e4m3}), {@code fp8_e5m2}. */
    static DType dtype(String text) {
        String s = text.strip().toLowerCase(Locale.ROOT).replace('-', '_');
        return switch (s) {
            case "fp32", "f32", "float" -> DType.FP32;
            case "bf16" -> DType.BF16;
            case "fp16", "f16", "half" -> DType.FP16;
            case "fp8", "fp8_e4m3", "e4m3" -> DType.FP8_E4M3;
            case "fp8_e5m2", "e5m2" -> DType.FP8_E5M2;
            default -> throw new IllegalArgumentException("'" + text + "' is not a dtype: expected one of "
                    + Arrays.stream(DType.values()).map(Names::name).collect(Collectors.joining(", ")));
        };
    }

    /** The CLI's name of a dtype: {@code fp32}, {@code bf16}, {@code fp16}, {@code fp8_e4m3}, {@code fp8_e5m2}. */
    static String name(DType t) {
        return t.name().toLowerCase(Locale.ROOT);
    }

    /** {@code NN}, {@code NT}, {@code TN}, {@code TT}, any case. */
    static Layout layout(String text) {
        try {
            return Layout.valueOf(text.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("'" + text + "' is not a layout: expected one of "
                    + Arrays.stream(Layout.values()).map(Enum::name).collect(Collectors.joining(", ")));
        }
    }

    static final class DTypeConverter extends ParsingConverter<DType> {
        DTypeConverter() {
            super(Names::dtype);
        }
    }

    static final class LayoutConverter extends ParsingConverter<Layout> {
        LayoutConverter() {
            super(Names::layout);
        }
    }
}
