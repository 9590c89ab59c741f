package dev.spindle.model;

import dev.spindle.Fixture;
import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.SoloWindow;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

/** An f32 checkpoint of bf16 values serves exactly as the bf16 one (the conversion is exact). */
class DtypeConversionTest {
    @Test
    void f32CheckpointGivesIdenticalLogits(@TempDir Path dir) throws IOException {
        Path src = Fixture.ROOT.resolve("llama-gqa");
        Files.copy(src.resolve("config.json"), dir.resolve("config.json"));
        SafetensorsWriter bf16 = SafetensorsWriter.copyOf(src.resolve("model.safetensors"));
        SafetensorsWriter f32 = new SafetensorsWriter();
        bf16.entries().forEach((name, e) -> {
            ByteBuffer in = ByteBuffer.wrap(e.data()).order(ByteOrder.LITTLE_ENDIAN);
            ByteBuffer out = ByteBuffer.allocate(e.data().length * 2).order(ByteOrder.LITTLE_ENDIAN);
            while (in.hasRemaining()) {
                out.putFloat(Bf16.toFloat(in.getShort()));
            }
            f32.put(name, "F32", e.shape(), out.array());
        });
        f32.write(dir.resolve("model.safetensors"));
        int[] prompt = {5, 17, 300, 42, 9, 511, 3};
        try (LoadedModel a = ModelLoader.load(src, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel b = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE);
             CpuForwardPass ca = new CpuForwardPass(a.config(), a.weights(), 8, 16);
             CpuForwardPass cb = new CpuForwardPass(b.config(), b.weights(), 8, 16)) {
            float[][] la = SoloWindow.run(ca, prompt, new BlockTable(TestSteps.pool(ca)), true);
            float[][] lb = SoloWindow.run(cb, prompt, new BlockTable(TestSteps.pool(cb)), true);
            for (int i = 0; i < prompt.length; i++) {
                assertArrayEquals(la[i], lb[i]);
            }
        }
    }

    /** f16 tensors are converted to the bf16 nearest to each f16 value. */
    @Test
    void f16CheckpointIsConvertedValueByValue(@TempDir Path dir) throws IOException {
        Path src = Fixture.ROOT.resolve("llama-gqa");
        Files.copy(src.resolve("config.json"), dir.resolve("config.json"));
        SafetensorsWriter f16 = new SafetensorsWriter();
        java.util.Map<String, short[]> halves = new java.util.HashMap<>();
        SafetensorsWriter.copyOf(src.resolve("model.safetensors")).entries().forEach((name, e) -> {
            ByteBuffer in = ByteBuffer.wrap(e.data()).order(ByteOrder.LITTLE_ENDIAN);
            ByteBuffer out = ByteBuffer.allocate(e.data().length).order(ByteOrder.LITTLE_ENDIAN);
            short[] h = new short[e.data().length / 2];
            for (int i = 0; in.hasRemaining(); i++) {
                h[i] = Float.floatToFloat16(Bf16.toFloat(in.getShort()));
                out.putShort(h[i]);
            }
            halves.put(name, h);
            f16.put(name, "F16", e.shape(), out.array());
        });
        f16.write(dir.resolve("model.safetensors"));
        try (LoadedModel m = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE)) {
            short[] expected = halves.get("model.layers.1.mlp.down_proj.weight");
            var data = ((Bf16Matrix) m.weights().layers().get(1).down()).data().data();
            for (int i = 0; i < expected.length; i++) {
                short got = data.getAtIndex(java.lang.foreign.ValueLayout.JAVA_SHORT_UNALIGNED, i);
                org.junit.jupiter.api.Assertions.assertEquals(Bf16.fromFloat(Float.float16ToFloat(expected[i])), got, "element " + i);
            }
        }
    }
}
