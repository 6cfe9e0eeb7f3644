package io.accel4j.train.profile;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.core.ops.SgdConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** {@link ProfilingOps} passes every {@link Ops} method through and counts it under its name. */
class ProfilingOpsTest {

    private record Call(String name, Object[] args) {}

    /** An Ops that records its calls and answers each with a recognisable value. */
    private static Ops fake(List<Call> calls) {
        return (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, m, args) -> {
                    calls.add(new Call(m.getName(), args == null ? new Object[0] : args));
                    return answer(m.getReturnType());
                });
    }

    private static Object answer(Class<?> type) {
        if (type == double.class) {
            return 2.5;
        } else if (type == float.class) {
            return 1.5f;
        } else if (type == boolean.class) {
            return true;
        } else if (type == String.class) {
            return "fake";
        }
        return null;
    }

    /** Distinct, recognisable arguments: sizes 3, longs 5, floats 0.5, the FP32 dtype, a valid AdamW config. */
    private static Object argument(Class<?> type) {
        if (type == int.class) {
            return 3;
        } else if (type == long.class) {
            return 5L;
        } else if (type == float.class) {
            return 0.5f;
        } else if (type == boolean.class) {
            return true;
        } else if (type == DType.class) {
            return DType.BF16;
        } else if (type == AdamWConfig.class) {
            return new AdamWConfig(1e-3f, 0.9f, 0.999f, 1e-8f, 0f);
        } else if (type == SgdConfig.class) {
            return new SgdConfig(1e-2f, 0.9f, 0f, 0f, true);
        } else if (type == LionConfig.class) {
            return new LionConfig(1e-4f, 0.9f, 0.99f, 0f);
        } else if (type == List.class) { // the multi-range AdamW's ranges: one of length 5
            return List.of(new AdamWRange(0, 0, 5, true));
        }
        return null; // MemorySegment: the fake never reads it
    }

    @Test
    void everyMethodIsDelegatedAndCountedOnceUnderItsName() throws IllegalAccessException, InvocationTargetException {
        List<Call> calls = new ArrayList<>();
        ProfilingOps prof = new ProfilingOps(fake(calls));
        Method[] methods = Ops.class.getMethods();
        assertThat(methods).hasSizeGreaterThanOrEqualTo(23);

        for (Method m : methods) {
            Object[] args = Arrays.stream(m.getParameterTypes()).map(ProfilingOpsTest::argument).toArray();
            Object result = m.invoke(prof, args);

            assertThat(calls).as(m.getName()).hasSize(1);
            assertThat(calls.getFirst().name()).isEqualTo(m.getName());
            assertThat(calls.getFirst().args()).as(m.getName()).containsExactly(args);
            assertThat(result).as(m.getName()).isEqualTo(answer(m.getReturnType()));
            calls.clear();
        }

        Map<String, ProfilingOps.Entry> byName = prof.entries().stream()
                .collect(Collectors.toMap(ProfilingOps.Entry::op, Function.identity()));
        assertThat(byName.keySet()).containsExactlyInAnyOrderElementsOf(
                Arrays.stream(methods).map(Method::getName).distinct().toList());
        Map<String, Long> overloads = Arrays.stream(methods)
                .collect(Collectors.groupingBy(Method::getName, Collectors.counting()));
        assertThat(byName.values()).allSatisfy(e -> {
            assertThat((long) e.calls()).as(e.op()).isEqualTo(overloads.get(e.op())); // once per overload
            assertThat(e.nanos()).as(e.op()).isNotNegative();
        });
        // the work counted: sizes are all 3 (N, C, OC; B, T, C), lengths 5
        // fp32, bf16 and fp8 (Fp8Scaling) operands
        assertThat(byName.get("matmulForward").flops()).isEqualTo(3 * 2.0 * 27);
        assertThat(byName.get("matmulBackward").flops()).isEqualTo(3 * 4.0 * 27);
        // attention: fp32 and with an operand precision
        assertThat(byName.get("attentionForward").flops()).isEqualTo(2 * 4.0 * 3 * 9 * 3 / 2);
        assertThat(byName.get("attentionBackward").flops()).isEqualTo(2 * 2.5 * 4.0 * 3 * 9 * 3 / 2);
        assertThat(byName.get("adamw").bytes()).isEqualTo(2 * 7.0 * 4 * 5); // one range and a list of one
        assertThat(byName.get("adamwBf16").bytes()).isEqualTo(2 * (7.0 * 4 + 2) * 5);
        assertThat(byName.get("sgd").bytes()).isEqualTo(2 * 5.0 * 4 * 5); // reads p, g, buf; writes p, buf
        assertThat(byName.get("lion").bytes()).isEqualTo(2 * 5.0 * 4 * 5);
        assertThat(byName.get("castFromFp32").bytes()).isEqualTo((4.0 + 2) * 5);
        assertThat(prof.totalNanos()).isEqualTo(byName.values().stream().mapToLong(ProfilingOps.Entry::nanos).sum());

        prof.reset();
        assertThat(prof.entries()).isEmpty();
    }

    @Test
    void phasesFollowTheNames() {
        assertThat(ProfilingOps.phaseOf("matmulForward")).isEqualTo("forward");
        assertThat(ProfilingOps.phaseOf("matmulForwardGelu")).isEqualTo("forward");
        assertThat(ProfilingOps.phaseOf("matmulBackwardGelu")).isEqualTo("backward");
        assertThat(ProfilingOps.phaseOf("geluForward")).isEqualTo("forward");
        assertThat(ProfilingOps.phaseOf("classifierForwardBackward")).isEqualTo("backward");
        assertThat(ProfilingOps.phaseOf("adamwBf16")).isEqualTo("optimizer");
        assertThat(ProfilingOps.phaseOf("sgd")).isEqualTo("optimizer");
        assertThat(ProfilingOps.phaseOf("lion")).isEqualTo("optimizer");
        assertThat(ProfilingOps.phaseOf("sumOfSquares")).isEqualTo("other");
    }

    @Test
    void theReportListsOpsWithRatesAndTheRest() {
        List<Call> calls = new ArrayList<>();
        ProfilingOps prof = new ProfilingOps(fake(calls));
        for (int i = 0; i < 4; i++) {
            prof.matmulForward(null, null, null, null, 64, 256, 768);
            prof.geluForward(null, null, 1 << 20);
            prof.adamw(null, null, null, null, 0, 1000, new AdamWConfig(1e-4f, 0.9f, 0.999f, 1e-8f, 0), 1, 1f);
        }
        StringWriter sw = new StringWriter();
        ProfileReport.print(new PrintWriter(sw), prof.entries(), 1_000_000_000L, 4);
        String text = sw.toString();

        assertThat(text).contains("op", "calls", "total ms", "% step", "matmulForward", "geluForward", "adamw",
                "(outside the ops)", "per step: forward", "GFLOP/s", "GB/s");
        assertThat(text.lines().filter(l -> l.startsWith("matmulForward")).findFirst().orElseThrow())
                .matches("matmulForward\\s+4\\s+.*");
        assertThat(ProfileReport.rate(new ProfilingOps.Entry("x", 1, 1_000_000, 2e9, 0))).isEqualTo("2000.0 GFLOP/s");
        assertThat(ProfileReport.rate(new ProfilingOps.Entry("x", 1, 1_000_000, 0, 5e6))).isEqualTo("5.0 GB/s");
        assertThat(ProfileReport.rate(new ProfilingOps.Entry("x", 1, 1_000_000, 0, 0))).isEqualTo("-");
    }
}
