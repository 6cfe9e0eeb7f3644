package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.memory.HostMemory;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A tree that does not fit together is refused while it is built, with a message naming the module or parameter and
 * both shapes, before anything is allocated (a backend whose memory counts arenas sees none).
 */
class NetworkBadInputTest {

    private static Parallel pool;
    private static Ops counting;
    private static final AtomicInteger ARENAS = new AtomicInteger();

    @BeforeAll
    static void setUp() {
        pool = new Parallel(1);
        CpuOps cpu = new CpuOps(pool);
        DeviceMemory memory = (DeviceMemory) Proxy.newProxyInstance(DeviceMemory.class.getClassLoader(),
                new Class<?>[] {DeviceMemory.class}, forward(HostMemory.INSTANCE, "arena"));
        counting = (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, m, args) -> m.getName().equals("memory") ? memory : invoke(cpu, m, args));
    }

    private static InvocationHandler forward(Object target, String counted) {
        return (proxy, m, args) -> {
            if (m.getName().equals(counted)) {
                ARENAS.incrementAndGet();
            }
            return invoke(target, m, args);
        };
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

    private static void refused(Supplier<NetworkSpec> spec, String... words) {
        int before = ARENAS.get();
        assertThatThrownBy(() -> spec.get().build(counting)).isInstanceOf(ShapeException.class)
                .message().contains(words);
        assertThat(ARENAS.get()).as("arenas opened").isEqualTo(before);
    }

    @Test
    void mismatchedWidthsNameTheModuleAndBothShapes() {
        refused(() -> Network.of(new Sequential("net", Linear.of("a", 4, 5), Linear.of("b", 6, 2))).features(4)
                .classes(2), "net.b", "takes 6", "has 5");
        refused(() -> Network.of(Linear.of("a", 4, 5)).features(3).classes(2), "'a'", "takes 4", "has 3");
        refused(() -> Network.of(new Residual("res", Linear.of("f", 4, 3))).features(4).classes(2), "res", "4", "3");
        refused(() -> Network.of(Linear.of("a", 4, 2)).features(4).classes(3), "outputs 2", "3 classes");
        refused(() -> Network.of(new CausalSelfAttention("attn", 6, 4)).features(6).classes(2), "divisible",
                "C=6", "NH=4");
    }

    @Test
    void aParameterTwiceOrAModuleTwiceIsRefused() {
        Module twice = new Module() {
            @Override
            public String name() {
                return "dup";
            }

            @Override
            public int build(Builder b, int inWidth) {
                b.parameter("w", true, Init.zeros(), 3);
                b.parameter("w", true, Init.zeros(), 3);
                return inWidth;
            }

            @Override
            public void forward(Pass p, MemorySegment in, MemorySegment out) {
            }

            @Override
            public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout,
                                 MemorySegment din) {
            }
        };
        refused(() -> Network.of(twice).features(2).classes(2), "'dup.w'", "registered twice");
        Linear shared = Linear.of("fc", 3, 3);
        refused(() -> Network.of(new Sequential("net", shared, shared)).features(3).classes(3), "net.fc",
                "used twice");
    }

    @Test
    void aTiedHeadNeedsItsEmbeddingFirstAndInItsOwnNetwork() {
        Embedding e = Embedding.tokens("embed", 5, 4);
        refused(() -> Network.of(new Sequential("lm", LmHead.tied("head", e), e)).tokens(5).classes(5),
                "head", "embed", "not built yet");
        Embedding other = Embedding.tokens("embed", 5, 4);
        try (Network n = Network.of(other).tokens(5).classes(4).build(counting)) {
            refused(() -> Network.of(new Sequential("lm", Embedding.tokens("e2", 5, 4), LmHead.tied("head", other)))
                    .tokens(5).classes(5), "head", "another network");
        }
    }

    @Test
    void resumingIntoAnotherTreeIsRefusedNamingTheTensor() {
        try (Network a = Network.of(Linear.of("fc", 3, 4)).features(3).classes(4).build(counting);
             Network b = Network.of(Linear.of("fc", 3, 5)).features(3).classes(4).build(counting)) {
            assertThatThrownBy(() -> a.table().checkSameAs(b.table(), "checkpoint x"))
                    .isInstanceOf(ShapeException.class).hasMessageContaining("fc.weight[5, 3]")
                    .hasMessageContaining("fc.weight[4, 3]");
            a.table().checkSameAs(a.table(), "itself");
        }
    }

    @Test
    void batchesAndTokensOutsideTheAllocationAreClearErrors() {
        try (Network n = Network.of(Embedding.tokens("embed", 5, 4)).tokens(5).classes(4).batch(2, 3)
                .build(counting)) {
            MemorySegment in = MemorySegment.ofArray(new int[] {0, 1, 2, 3, 4, 5}), tg = MemorySegment.ofArray(
                    new int[6]);
            assertThatThrownBy(() -> n.forward(in, tg, 2, 3))
                    .hasMessageContaining("inputs[b=1, t=2] is token 5, outside the model's vocabulary [0, 5)");
            assertThatThrownBy(() -> n.forward(in, tg, 3, 3)).hasMessageContaining("B must be in [1, 2]");
            assertThatThrownBy(() -> n.backward(1f)).hasMessageContaining("forward with targets first");
        }
    }
}
