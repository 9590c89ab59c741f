package dev.spindle.model;

import dev.spindle.backend.TestSteps;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.eval.Divergence;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * MLX affine-quantized checkpoints of llama-gqa (scripts/make_mlx_fixture.py: mlx-lm's layout, groups of 32 at 8, 4 and
 * 3 bits, the 3-bit codes crossing word boundaries): every linear layer binds as MlxMatrix, the quantized embedding expands
 * to bf16, each element reads as bf16(scale * q + bias), the logits stay within a KL bound of the bf16 checkpoint that
 * tightens with the bits, and every window row equals the row decoded alone.
 */
class MlxCheckpointTest {
    static final Path BF16 = Path.of("src/test/resources/fixtures/llama-gqa");
    static final int[] PROMPT = new Random(31).ints(32, 3, 512).toArray();

    /** The mean over positions of KL(want ‖ got). */
    static double meanKl(float[][] want, float[][] got) {
        double kl = 0;
        for (int i = 0; i < got.length; i++) {
            kl += Divergence.kl(want[i], got[i]) / got.length;
        }
        return kl;
    }

    static float[][] logits(LoadedModel m, int[] prompt) {
        try (CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
            return TestSteps.windowLogits(cpu, prompt);
        }
    }

    @ParameterizedTest
    @CsvSource({"8, 5e-4", "4, 6e-2", "3, 3e-1"})
    void anMlxCheckpointServesCloseToItsRelease(int bits, double bound) {
        try (LoadedModel bf16 = ModelLoader.load(BF16, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel q = ModelLoader.load(Path.of("src/test/resources/fixtures/mlx/llama-gqa-" + bits + "bit"), LoadFormat.SAFETENSORS, LoadListener.NONE)) {
            Matrix m = q.weights().layers().getFirst().q();
            assertTrue(m instanceof MlxMatrix x && x.bits() == bits && x.groupSize() == 32, m.format());
            assertEquals("mlx affine " + bits + "-bit (groups of 32)", m.format());
            float[] row = new float[m.cols()];
            ((MlxMatrix) m).expand(5, 0, m.cols(), row);
            for (float v : row) {
                assertEquals(Bf16.round(v), v, "every value read is a bf16 value");
            }
            float[][] want = logits(bf16, PROMPT), got = logits(q, PROMPT);
            double kl = meanKl(want, got);
            System.out.printf("[mlx] llama-gqa affine %d-bit, groups of 32: KL(bf16 || mlx) %.3g%n", bits, kl);
            assertTrue(kl > 0 && kl < bound, bits + "-bit: KL " + kl);
            try (CpuForwardPass cpu = new CpuForwardPass(q.config(), q.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
                TestSteps.assertStepsEqualWindow(cpu, PROMPT, got, bits + "-bit");
            }
        }
    }

    /**
     * mlx-lm's mixed recipes (per-module entries in config.json's quantization): each module binds at its own width, a module
     * whose entry is false stays bf16, and the whole serves between the 4- and 8-bit checkpoints, decode steps equal to the window.
     */
    @org.junit.jupiter.api.Test
    void aMixedMlxCheckpointBindsEachModuleAtItsOwnWidth() {
        try (LoadedModel bf16 = ModelLoader.load(BF16, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel q = ModelLoader.load(Path.of("src/test/resources/fixtures/mlx/llama-gqa-mixed"), LoadFormat.SAFETENSORS, LoadListener.NONE)) {
            var layers = q.weights().layers();
            assertEquals("mlx affine 4-bit (groups of 32)", layers.get(0).q().format());
            assertTrue(layers.get(1).q() instanceof Bf16Matrix, "false: left unquantized, " + layers.get(1).q().format());
            for (var l : layers) {
                assertEquals("mlx affine 8-bit (groups of 32)", l.down().format());
            }
            assertEquals("mlx affine 6-bit (groups of 32)", q.weights().lmHead().format());
            float[][] want = logits(bf16, PROMPT), got = logits(q, PROMPT);
            double kl = meanKl(want, got);
            System.out.printf("[mlx] llama-gqa mixed (4-bit, down_proj 8, head 6, one q_proj bf16): KL(bf16 || mlx) %.3g%n", kl);
            assertTrue(kl > 5e-4 && kl < 6e-2, "mixed: KL " + kl);
            try (CpuForwardPass cpu = new CpuForwardPass(q.config(), q.weights(), 64, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
                TestSteps.assertStepsEqualWindow(cpu, PROMPT, got, "mixed");
            }
        }
    }

    /** What the MLX reader does not take is refused by field: another mode, a per-module entry it cannot read, an unknown width. */
    @org.junit.jupiter.api.Test
    void mlxQuantizationItDoesNotReadIsRefusedByField() {
        com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
        for (String[] c : new String[][]{{"{\"quantization\": {\"group_size\": 32, \"bits\": 4, \"mode\": \"mxfp4\"}}", "quantization.mode"},
                {"{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.0.mlp.down_proj\": {\"bits\": 7}}}",
                        "quantization.model.layers.0.mlp.down_proj' = {\"bits\":7}: MLX's affine scheme"},
                {"{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.0.mlp.down_proj\": true}}", "false or an object"},
                {"{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"lm_head\": {\"bits\": 8, \"scale\": 2}}}", "quantization.lm_head.scale"},
                {"{\"quantization\": {\"group_size\": 48, \"bits\": 4}}", "group sizes 32, 64, 128"}}) {
            ModelLoadException e = org.junit.jupiter.api.Assertions.assertThrows(ModelLoadException.class,
                    () -> MlxCheckpoints.parse(json.readTree(c[0])));
            assertTrue(e.getMessage().contains(c[1]), e.getMessage());
        }
        assertEquals(null, MlxCheckpoints.parse(json.createObjectNode()));
    }

    /** AffineQuantizer (packing at load) gives the codes, scales and biases the fixture script wrote, bit for bit. */
    @org.junit.jupiter.api.Test
    void packingAtLoadMatchesTheFixtureScriptBitForBit() {
        Path dir = Path.of("src/test/resources/fixtures/mlx/llama-gqa-4bit");
        try (LoadedModel bf16 = ModelLoader.load(BF16, LoadFormat.SAFETENSORS, LoadListener.NONE);
             java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            SafetensorsFile f = SafetensorsFile.open(dir.resolve("model.safetensors"), arena);
            for (LayerWeights l : bf16.weights().layers()) {
                for (Matrix m : new Matrix[]{l.q(), l.o(), l.up(), l.down()}) {
                    MlxMatrix packed = AffineQuantizer.quantize((Bf16Matrix) m, 4, 32, arena);
                    String base = m.name().substring(0, m.name().length() - ".weight".length());
                    String[][] parts = {{m.name(), "codes"}, {base + ".scales", "scales"}, {base + ".biases", "biases"}};
                    Tensor[] ours = {packed.data(), packed.scales(), packed.biases()};
                    for (int i = 0; i < 3; i++) {
                        var want = f.bytes(f.tensors().get(parts[i][0]));
                        org.junit.jupiter.api.Assertions.assertEquals(-1L, want.mismatch(ours[i].data()), m.name() + " " + parts[i][1]);
                    }
                }
            }
        }
    }
}
