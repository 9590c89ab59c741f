package dev.spindle.model;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * NVFP4 checkpoints of llama-gqa in the three layouts their tools write (scripts/make_nvfp4_fixture.py: compressed-tensors'
 * nvfp4-pack-quantized, ModelOpt's export with hf_quant_config.json, mlx-lm's nvfp4 mode): each binds its linear layers as
 * {@link Nvfp4Matrix}, reads every element as the format's own dequantizer gives it (the fixture's reference values, bit for
 * bit), stays within a KL bound of the bf16 checkpoint, and decodes each row as the window gives it.
 */
class Nvfp4CheckpointTest {
    static final Path DIR = Path.of("src/test/resources/fixtures/nvfp4");

    @ParameterizedTest
    @CsvSource({"ct, true", "modelopt, true", "mlx, false"})
    void anNvfp4CheckpointReadsAsItsFormatDefinesAndServesCloseToItsRelease(String layout, boolean tensorScale) throws Exception {
        Path dir = DIR.resolve("llama-gqa-" + layout);
        try (LoadedModel bf16 = ModelLoader.load(MlxCheckpointTest.BF16, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel q = ModelLoader.load(dir, LoadFormat.SAFETENSORS, LoadListener.NONE);
             Arena arena = Arena.ofConfined()) {
            Matrix m = q.weights().layers().getFirst().q();
            assertTrue(m instanceof Nvfp4Matrix, layout + ": " + m.format());
            assertEquals("nvfp4 (e2m1, an e4m3 scale a group of 16" + (tensorScale ? ", a tensor scale" : "") + ")", m.format());
            // the values the format's own dequantizer gives, rounded to bf16, for two weights
            SafetensorsFile ref = SafetensorsFile.open(DIR.resolve("llama-gqa-" + layout + ".reference.safetensors"), arena);
            ValueLayout.OfFloat f32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
            Matrix[] weights = {m, q.weights().layers().get(2).down()};
            String[] names = {"model.layers.0.self_attn.q_proj.weight", "model.layers.2.mlp.down_proj.weight"};
            for (int w = 0; w < 2; w++) {
                Nvfp4Matrix x = (Nvfp4Matrix) weights[w];
                var want = ref.bytes(ref.tensors().get(names[w]));
                float[] row = new float[x.cols()];
                for (int i = 0; i < x.rows(); i++) {
                    x.expand(i, 0, x.cols(), row);
                    for (int j = 0; j < x.cols(); j++) {
                        float r = want.getAtIndex(f32, (long) i * x.cols() + j);
                        assertEquals(Float.floatToIntBits(r), Float.floatToIntBits(row[j]), names[w] + " (" + i + ", " + j + "): " + row[j] + " vs " + r);
                    }
                }
                // rows [4, 12) (a column-parallel rank's share) read as those rows of the whole
                Nvfp4Matrix share = x.rows(4, 8);
                float[] whole = new float[x.cols()], part8 = new float[x.cols()];
                for (int i = 0; i < 8; i++) {
                    x.expand(4 + i, 0, x.cols(), whole);
                    share.expand(i, 0, x.cols(), part8);
                    assertEquals(java.util.Arrays.toString(whole), java.util.Arrays.toString(part8), "row " + (4 + i) + " of a share");
                }
                // a slice of columns reads the same as the whole row
                float[] part = new float[20];
                x.expand(3, 21, 20, part);
                x.expand(3, 0, x.cols(), row);
                assertEquals(java.util.Arrays.toString(java.util.Arrays.copyOfRange(row, 21, 41)), java.util.Arrays.toString(part));
            }
            int[] prompt = MlxCheckpointTest.PROMPT;
            float[][] want = MlxCheckpointTest.logits(bf16, prompt), got = MlxCheckpointTest.logits(q, prompt);
            double kl = MlxCheckpointTest.meanKl(want, got);
            System.out.printf("[nvfp4] llama-gqa %s: KL(bf16 || nvfp4) %.3g%n", layout, kl);
            assertTrue(kl > 0 && kl < 0.1, layout + ": KL " + kl);
            try (CpuForwardPass cpu = new CpuForwardPass(q.config(), q.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
                TestSteps.assertStepsEqualWindow(cpu, prompt, got, "nvfp4 " + layout);
            }
        }
    }

    /** What the NVFP4 readers do not take is refused by field. */
    @Test
    void nvfp4ConfigsItDoesNotReadAreRefusedByField() throws Exception {
        ObjectMapper json = new ObjectMapper();
        String ct = Files.readString(DIR.resolve("llama-gqa-ct/config.json"));
        for (String[] c : new String[][]{
                {ct.replace("\"group_size\": 16", "\"group_size\": 32"), "tensor_group, group_size 16"},
                {ct.replace("\"strategy\": \"tensor_group\"", "\"strategy\": \"group\""), "tensor_group, group_size 16"},
                {ct.replace("nvfp4-pack-quantized", "float-quantized"), "nvfp4-pack-quantized"},
                {"{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"W4A8_AWQ\"}}", "quant_algo"},
                {"{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", \"group_size\": 32}}", "groups are 16"}}) {
            ModelLoadException e = assertThrows(ModelLoadException.class, () -> CheckpointQuantization.parse(json.readTree(c[0])));
            assertTrue(e.getMessage().contains(c[1]), e.getMessage());
        }
        ModelLoadException e = assertThrows(ModelLoadException.class,
                () -> MlxCheckpoints.parse(json.readTree("{\"quantization\": {\"group_size\": 32, \"bits\": 4, \"mode\": \"nvfp4\"}}")));
        assertTrue(e.getMessage().contains("groups of 16 and 4 bits"), e.getMessage());
        assertEquals(new MlxCheckpoints.Nvfp4(), MlxCheckpoints.parse(json.readTree(Files.readString(DIR.resolve("llama-gqa-mlx/config.json")))).base());
        CheckpointQuantization mo = CheckpointQuantization.read(DIR.resolve("llama-gqa-modelopt/config.json"));
        assertEquals("modelopt", mo.method());
        assertTrue(mo.describe().startsWith("modelopt nvfp4 checkpoint"), mo.describe());
    }

    /** A checkpoint missing a layer's tensor scale is refused naming the file and the tensor. */
    @Test
    void aMissingTensorScaleIsNamed(@org.junit.jupiter.api.io.TempDir Path tmp) throws Exception {
        Path src = DIR.resolve("llama-gqa-ct");
        for (String f : new String[]{"config.json", "generation_config.json"}) {
            Files.copy(src.resolve(f), tmp.resolve(f));
        }
        // the same file with one header entry renamed: the loader sees the layer's tensor scale missing
        byte[] raw = Files.readAllBytes(src.resolve("model.safetensors"));
        String s = new String(raw, java.nio.charset.StandardCharsets.ISO_8859_1)
                .replace("model.layers.1.mlp.up_proj.weight_global_scale", "model.layers.1.mlp.up_proj.weight_global_scalX");
        Files.write(tmp.resolve("model.safetensors"), s.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ModelLoader.load(tmp, LoadFormat.SAFETENSORS, LoadListener.NONE).close());
        assertTrue(e.getMessage().contains("model.layers.1.mlp.up_proj.weight_global_scale' is missing"), e.getMessage());
    }
}
