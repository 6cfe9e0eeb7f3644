package io.accel4j.cli.doctor;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CpuInfoTest {

    private static final List<String> X86 = List.of(
            "processor\t: 0",
            "vendor_id\t: GenuineIntel",
            "model name\t: Intel(R) Xeon(R) Platinum 8480+",
            "flags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512bw avx512_bf16 avx512_fp16 amx_tile amx_bf16",
            "",
            "processor\t: 1",
            "model name\t: something else",
            "flags\t\t: fpu");

    private static final List<String> ARM = List.of(
            "processor\t: 0",
            "BogoMIPS\t: 243.75",
            "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp bf16 i8mm sve sve2",
            "CPU implementer\t: 0x41",
            "CPU part\t: 0xd4f",
            "");

    @Test
    void readsTheFirstX86ProcessorsModelAndFeatures() {
        CpuInfo info = CpuInfo.parse(X86, "test");

        assertThat(info.model()).isEqualTo("Intel(R) Xeon(R) Platinum 8480+");
        assertThat(info.present()).containsExactly("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
                "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16");
        assertThat(info.absent()).contains("avx512vl", "amx_int8").doesNotContain("sve", "asimd");
    }

    @Test
    void readsArmFeaturesAndNamesTheCpuByPart() {
        CpuInfo info = CpuInfo.parse(ARM, "test");

        assertThat(info.model()).isEqualTo("Arm CPU (implementer 0x41, part 0xd4f)");
        assertThat(info.present()).containsExactly("asimd", "asimdhp", "fphp", "bf16", "i8mm", "sve", "sve2");
        assertThat(info.absent()).containsExactly("sme");
    }

    @Test
    void aMissingFileIsUnknownNotAnError(@TempDir Path dir) {
        CpuInfo info = CpuInfo.read(dir.resolve("cpuinfo"));

        assertThat(info.model()).isEqualTo("unknown");
        assertThat(info.flags()).isEmpty();
        assertThat(info.source()).endsWith("not found");
        assertThat(new CpuSection(info).lines()).contains(
                new DoctorSection.Line("model", "unknown"),
                new DoctorSection.Line("features", "unknown (" + dir.resolve("cpuinfo") + " not found)"));
    }

    @Test
    void readsAFile(@TempDir Path dir) throws IOException {
        Path f = Files.write(dir.resolve("cpuinfo"), X86);

        assertThat(CpuInfo.read(f).model()).startsWith("Intel");
    }
}
