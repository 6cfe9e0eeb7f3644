package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The plan is exact: what a spec says it will allocate for activations ({@link NetworkSpec#activationBytes}, computed
 * from a fresh tree without allocating) is what the network allocates, and every byte the network's arena hands out
 * is parameters, gradients or that plan — for own models and GPT-2, in every recompute mode and precision.
 */
class NetworkPlanTest {

    private static Parallel pool;
    private static Ops counting;
    private static final AtomicLong ALLOCATED = new AtomicLong();

    @BeforeAll
    static void setUp() {
        pool = new Parallel(1);
        CpuOps cpu = new CpuOps(pool);
        DeviceMemory memory = (DeviceMemory) Proxy.newProxyInstance(DeviceMemory.class.getClassLoader(),
                new Class<?>[] {DeviceMemory.class}, (proxy, m, args) -> {
                    Object r = invoke(HostMemory.INSTANCE, m, args);
                    if (m.getName().equals("arena")) {
                        DeviceArena inner = (DeviceArena) r;
                        return (DeviceArena) Proxy.newProxyInstance(DeviceArena.class.getClassLoader(),
                                new Class<?>[] {DeviceArena.class}, (p2, m2, a2) -> {
                                    if (m2.getName().equals("allocate")) {
                                        ALLOCATED.addAndGet((Long) a2[0]);
                                    }
                                    return invoke(inner, m2, a2);
                                });
                    }
                    return r;
                });
        counting = (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, m, args) -> m.getName().equals("memory") ? memory : invoke(cpu, m, args));
    }

    private static Object invoke(Object target, java.lang.reflect.Method m, Object[] args) throws Throwable {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    private static void exact(Supplier<NetworkSpec> spec) {
        long planned = spec.get().activationBytes();
        long before = ALLOCATED.get();
        try (Network net = spec.get().build(counting)) {
            long allocated = ALLOCATED.get() - before;
            assertThat(net.activationBytes()).isEqualTo(planned);
            assertThat(allocated).isEqualTo(net.totalBytes()).isEqualTo(2 * net.parameterBytes() + planned);
        }
    }

    @Test
    void ownModelsAllocateExactlyThePlan() {
        exact(() -> Network.of(new Sequential("mlp", Linear.gelu("fc1", 3, 17), new Gelu("act"),
                Linear.of("fc2", 17, 5))).features(3).classes(5).batch(7, 1));
        for (Recompute r : Recompute.values()) {
            exact(() -> Network.of(new Sequential("lm", Embedding.tokensAndPositions("e", 11, 8, 9),
                    new TransformerBlock("0", 8, 2), new Residual("res", Linear.of("f", 8, 8)),
                    new TransformerBlock("1", 8, 4), new LayerNorm("n", 8), LmHead.untied("head", 8, 11)))
                    .tokens(11).classes(11).batch(3, 9).recompute(r));
        }
    }

    @Test
    void gpt2AllocatesExactlyThePlanInEveryModeAndPrecision() {
        GptConfig c = new GptConfig(8, 11, 16, 3, 2, 8);
        for (Recompute r : Recompute.values()) {
            for (DType d : new DType[] {DType.FP32, DType.BF16}) {
                exact(() -> Gpt2Blocks.spec(c).batch(2, 5).recompute(r).matmulOperands(d));
            }
            exact(() -> Gpt2Blocks.spec(c).batch(2, 5).recompute(r).fp8(io.accel4j.core.fp8.DelayedScaling.defaults()));
        }
    }

    @Test
    void theLayerModeKeepsLessThanGeluWhichKeepsLessThanNone() {
        GptConfig c = new GptConfig(64, 11, 16, 4, 2, 8);
        long none = Gpt2Blocks.spec(c).batch(4, 64).activationBytes();
        long gelu = Gpt2Blocks.spec(c).batch(4, 64).recompute(Recompute.GELU).activationBytes();
        long layer = Gpt2Blocks.spec(c).batch(4, 64).recompute(Recompute.LAYER).activationBytes();
        assertThat(layer).isLessThan(gelu);
        assertThat(gelu).isLessThan(none);
    }
}
