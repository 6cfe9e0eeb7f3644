package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cuda.bindings.nccl_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@link NcclConfig#write} is NCCL_CONFIG_INITIALIZER for the bound 2.28 layout; no library needed. */
class NcclConfigTest {

    private static final List<String> INT_MEMBERS = List.of("blocking", "cgaClusterSize", "minCTAs", "maxCTAs",
            "splitShare", "trafficClass", "collnetEnable", "CTAPolicy", "shrinkShare", "nvlsCTAs",
            "nChannelsPerNetPeer", "nvlinkCentricSched");

    @Test
    void defaultsAreTheInitializer() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment c = arena.allocate(nccl_h.ncclConfig_t);
            c.fill((byte) 0x5a); // poison: write must set every byte that matters
            MemorySegment w = NcclConfig.defaults().write(arena);
            assertThat(w.byteSize()).isEqualTo(80);
            assertThat(w.get(ValueLayout.JAVA_LONG, NcclConfig.offset("size"))).isEqualTo(80L);
            assertThat(w.get(ValueLayout.JAVA_INT, NcclConfig.offset("magic"))).isEqualTo(0xcafebeef);
            assertThat(w.get(ValueLayout.JAVA_INT, NcclConfig.offset("version"))).isEqualTo(22800);
            for (String m : INT_MEMBERS) {
                assertThat(w.get(ValueLayout.JAVA_INT, NcclConfig.offset(m))).as(m).isEqualTo(Integer.MIN_VALUE);
            }
            assertThat(w.get(ValueLayout.ADDRESS, NcclConfig.offset("netName"))).isEqualTo(MemorySegment.NULL);
            assertThat(w.get(ValueLayout.ADDRESS, NcclConfig.offset("commName"))).isEqualTo(MemorySegment.NULL);
            assertThat(INT_MEMBERS.size() + 5).isEqualTo(nccl_h.ncclConfig_t.memberLayouts().size());
        }
    }

    @Test
    @SuppressWarnings("restricted")
    void settingsLand() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment w = new NcclConfig(1, 2, 8, null).withCommName("accel4j-dp").write(arena);
            assertThat(w.get(ValueLayout.JAVA_INT, NcclConfig.offset("blocking"))).isEqualTo(1);
            assertThat(w.get(ValueLayout.JAVA_INT, NcclConfig.offset("minCTAs"))).isEqualTo(2);
            assertThat(w.get(ValueLayout.JAVA_INT, NcclConfig.offset("maxCTAs"))).isEqualTo(8);
            assertThat(w.get(ValueLayout.ADDRESS, NcclConfig.offset("commName")).reinterpret(64).getString(0))
                    .isEqualTo("accel4j-dp");
        }
    }

    @Test
    void badSettingsAreRefused() {
        assertThatThrownBy(() -> new NcclConfig(2, nccl_h.NCCL_CONFIG_UNDEF_INT, nccl_h.NCCL_CONFIG_UNDEF_INT, null))
                .hasMessage("blocking must be 0, 1 or undefined, got 2");
        assertThatThrownBy(() -> new NcclConfig(1, 9, 8, null)).hasMessage("minCTAs 9 > maxCTAs 8");
        // refused before any library call, so this holds without libnccl
        assertThatThrownBy(() -> NcclComm.initRank(null, 1, new byte[128], 0,
                NcclConfig.defaults().withBlocking(false)))
                .hasMessage("a non-blocking NCCL config is not supported (blocking = 0)");
    }

    @Test
    void versionStrings() {
        assertThat(NcclComm.versionString(22803)).isEqualTo("2.28.3");
        assertThat(NcclComm.versionString(21903)).isEqualTo("2.19.3");
        assertThat(NcclComm.versionString(2708)).isEqualTo("2.7.8");
        assertThat(NcclComm.resultName(6)).isEqualTo("ncclRemoteError");
        assertThat(NcclComm.resultName(42)).isEqualTo("ncclResult 42");
    }
}
