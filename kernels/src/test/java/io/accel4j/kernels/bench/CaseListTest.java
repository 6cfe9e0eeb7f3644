package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.core.DType;
import io.accel4j.cuda.CudaLibraries;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The case lists, built without a device (the kernels' launches are never called here). */
class CaseListTest {

    private static AttentionCases.Kernel kernel(String name, boolean nonCausal) {
        return new AttentionCases.Kernel(name, DType.BF16, Ceiling.BF16, nonCausal, (b, s) -> { }, (b, s) -> { });
    }

    @Test
    void attentionCoversFlashAttentionsGridAtSixteenThousandTokens() {
        for (int hd : AttentionCases.HEAD_SIZES) {
            List<AttentionCases.Shape> shapes = AttentionCases.shapes(hd, true);
            assertThat(shapes).extracting(AttentionCases.Shape::T).containsExactly(512, 1024, 2048, 4096, 8192,
                    16384);
            assertThat(shapes).allSatisfy(s -> {
                assertThat(s.B() * s.T()).isEqualTo(16 * 1024);
                assertThat(s.C()).isEqualTo(2048);
                assertThat(s.causal()).isTrue();
            });
        }
        assertThat(AttentionCases.shapes(128, false).getFirst().label()).isEqualTo("hd128 T512 B32 NH16 full");
    }

    @Test
    void aCausalOnlyKernelGetsOneSkipLineForTheRest() {
        List<Case> cases = AttentionCases.cases(null, List.of(kernel("causal", false), kernel("both", true)));
        List<Case> causalOnly = cases.stream().filter(c -> c.kernel().startsWith("causal")).toList();
        assertThat(causalOnly).hasSize(2 * 6 * 2 + 1);
        assertThat(causalOnly).filteredOn(c -> c.skipReason() != null).singleElement()
                .satisfies(c -> assertThat(c.skipReason()).isEqualTo("causal is causal only"));
        assertThat(causalOnly).filteredOn(c -> c.skipReason() == null)
                .allSatisfy(c -> assertThat(c.shape()).endsWith("causal"));
        List<Case> both = cases.stream().filter(c -> c.kernel().startsWith("both")).toList();
        assertThat(both).hasSize(2 * 2 * 6 * 2).allSatisfy(c -> assertThat(c.skipReason()).isNull());
        Case fwdBwd = both.stream().filter(c -> c.kernel().equals("both fwd+bwd")
                && c.shape().equals("hd64 T1024 B16 NH32 full")).findFirst().orElseThrow();
        assertThat(fwdBwd.work()).isEqualTo(3.5 * 4 * 16 * 32 * 1024.0 * 1024 * 64);
    }

    @Test
    void aKernelCanStartAtALongerSequenceHaveNoBackwardOrBeUnavailable() {
        AttentionCases.Launch none = (b, s) -> { };
        List<Case> cases = AttentionCases.cases(null, List.of(
                new AttentionCases.Kernel("long", DType.BF16, Ceiling.BF16, true, none, none, 2048, null),
                new AttentionCases.Kernel("fwd", DType.BF16, Ceiling.BF16, true, none, null, 0, null),
                new AttentionCases.Kernel("absent", DType.BF16, Ceiling.BF16, true, none, null, 0, "no such device")));
        assertThat(cases.stream().filter(c -> c.kernel().startsWith("long")).toList()).hasSize(2 * 2 * 4 * 2)
                .noneSatisfy(c -> assertThat(c.shape()).matches(".* T(512|1024) .*"));
        assertThat(cases.stream().filter(c -> c.kernel().startsWith("fwd")).toList()).hasSize(2 * 2 * 6)
                .allSatisfy(c -> assertThat(c.kernel()).isEqualTo("fwd fwd"));
        assertThat(cases.stream().filter(c -> c.kernel().startsWith("absent")).toList()).singleElement()
                .satisfies(c -> assertThat(c.skipReason()).isEqualTo("no such device"));
    }

    @Test
    void gemmRunsEveryVariantAtEveryShape() {
        List<GemmCases.Variant> variants = GemmCases.variants();
        CudaLibraries.Search found = new CudaLibraries.Search("lib", name -> java.util.Optional.empty(), "here",
                List.of("here"));
        List<Case> cases = GemmCases.cases(null, variants, found, found);
        assertThat(cases).hasSize(GemmCases.SHAPES.size() * variants.size());
        assertThat(variants).extracting(GemmCases.Variant::ceiling)
                .containsExactly(Ceiling.FP32, Ceiling.BF16, Ceiling.TF32, Ceiling.BF16, Ceiling.BF16, Ceiling.FP8,
                        Ceiling.FP8, Ceiling.FP8);
        assertThat(variants).extracting(GemmCases.Variant::name).containsExactly("GpuOps fp32", "GpuOps bf16",
                "cuBLASLt tf32", "cuBLAS bf16", "cuBLASLt bf16", "cuBLASLt fp8e4m3", "GpuMatmul fp8e4m3",
                "GpuMatmul fp8e4m3xe5m2");
        assertThat(cases).extracting(Case::shape).contains("square 8192x8192x8192", "qkv 8192x768x2304",
                "attproj 8192x768x768", "fc 8192x768x3072", "fcproj 8192x3072x768", "lmhead 8192x768x50304");
        assertThat(cases.getFirst().work()).isEqualTo(Math.pow(2, 40));
    }

    @Test
    void adamwRatioNeedsBothFigures() {
        Case adamw = Case.of("adamw", AdamWCases.ADAMW, "n 10", 2.8e9, Ceiling.HBM, () -> null);
        Case copy = Case.of("adamw", AdamWCases.COPY, "bytes 140", 2.8e9, Ceiling.HBM, () -> null);
        Result a = Result.ok(adamw, new Stats(1.25, 1, 5)); // 2240 GB/s
        Result c = Result.ok(copy, new Stats(1, 1, 5));     // 2800 GB/s
        assertThat(AdamWCases.ratio(List.of(a, c))).hasValueSatisfying(r -> {
            assertThat(r.value()).isEqualTo(0.8);
            assertThat(r.pass()).isFalse();
            assertThat(r.threshold()).isEqualTo(0.85);
        });
        assertThat(AdamWCases.ratio(List.of(a, Result.notRun(copy, Result.Status.ERROR, "x")))).isEmpty();
    }

    @Test
    void gemmTypesMapToCudaTypes() {
        for (DType t : DType.values()) {
            assertThat(GemmCases.cudaType(t)).isNotNegative();
        }
    }

    /**
     * The acceptance lines: cuBLASLt bf16 over cuBLAS bf16 per shape where both ran, and the fastest bf16 attention
     * forward at hd 128, T 16k, non-causal (a faster causal row, or another shape, must not stand in for it).
     */
    @Test
    void acceptanceFiguresComeFromTheCasesThatRan() {
        assertThat(AttentionCases.shapes(128, false).getLast().label()).isEqualTo(Acceptance.ATTENTION_SHAPE);
        String square = GemmCases.SHAPES.getFirst().label(), qkv = GemmCases.SHAPES.get(1).label();
        double sq = Flops.gemm(8192, 8192, 8192), attn = Flops.attentionForward(1, 16, 16384, 128, false);
        List<Result> results = List.of(
                ok("gemm", GemmCases.CUBLASLT_BF16, square, sq, Ceiling.BF16, 1.9),
                ok("gemm", GemmCases.CUBLAS_BF16, square, sq, Ceiling.BF16, 2.0),
                ok("gemm", GemmCases.CUBLASLT_BF16, qkv, 1e9, Ceiling.BF16, 1.0), // no cuBLAS row: no ratio
                ok("attention", "flash bf16 fwd", Acceptance.ATTENTION_SHAPE, attn, Ceiling.BF16, 2.0),
                ok("attention", "flash bf16 wgmma fwd", Acceptance.ATTENTION_SHAPE, attn, Ceiling.BF16, 1.0),
                ok("attention", "flash bf16 wgmma fwd", "hd128 T16384 B1 NH16 causal", attn / 2, Ceiling.BF16, 0.1),
                ok("attention", "flash bf16 fwd+bwd", Acceptance.ATTENTION_SHAPE, 3.5 * attn, Ceiling.BF16, 0.5));
        List<Report.Ratio> ratios = Acceptance.ratios(results);
        assertThat(ratios).extracting(Report.Ratio::name).containsExactly(
                "gemm square 8192x8192x8192: cuBLASLt bf16 / cuBLAS bf16",
                "attention hd128 T16384 B1 NH16 full: best bf16 forward TFLOP/s (flash bf16 wgmma fwd)");
        assertThat(ratios.get(0).value()).isCloseTo(2.0 / 1.9, within(1e-12));
        assertThat(ratios.get(0).pass()).isTrue();
        assertThat(ratios.get(1).value()).isCloseTo(attn / 1e-3 / 1e12, within(1e-9));
        assertThat(ratios.get(1).threshold()).isEqualTo(370);
        assertThat(Acceptance.ratios(List.of())).isEmpty();
    }

    private static Result ok(String group, String kernel, String shape, double work, Ceiling ceiling, double ms) {
        return Result.ok(Case.of(group, kernel, shape, work, ceiling, () -> null), new Stats(ms, ms, 5));
    }

    /** Issue 18, item 5: without cuBLASLt (or cuBLAS) the GEMM cases are skipped, saying so, not errors. */
    @Test
    void gemmCasesWithoutTheirLibraryAreSkippedSayingWhy() {
        CudaLibraries.Search none = new CudaLibraries.Search("libcublasLt.so.13", null, null, List.of("/x"));
        CudaLibraries.Search noBlas = new CudaLibraries.Search("libcublas.so.13", null, null, List.of("/y"));
        List<Case> cases = GemmCases.cases(null, GemmCases.variants(), noBlas, none);
        assertThat(cases).isNotEmpty().allMatch(c -> c.skipReason() != null);
        assertThat(cases).filteredOn(c -> c.kernel().equals(GemmCases.CUBLAS_BF16))
                .allMatch(c -> c.skipReason().equals("libcublas.so.13 not found (searched: /y)"));
        assertThat(cases).filteredOn(c -> !c.kernel().equals(GemmCases.CUBLAS_BF16))
                .allMatch(c -> c.skipReason().equals("libcublasLt.so.13 not found (searched: /x)"));
    }
}
