package dev.spindle.backend.cpu;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.TestSteps;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.DraftHeadLoader;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.SafetensorsFile;
import dev.spindle.model.TensorInfo;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Spindle's CPU DFlash and DFlash2 heads against the PyTorch reference (scripts/dflash_reference.py, run
 * on the GPU machine): two small random heads of the published layouts (DFlash's tensors under
 * {@code model.}, DFlash2's codebooks without {@code .weight}; DFlash2 with sliding windows, dynamic
 * convolutions, output multiplier and soft-capping) on the bundled target. The target's taps come from
 * Spindle's own CPU pass; context is injected in two pieces, as after successive steps. Gate, as the
 * target's parity gate: per row KL(reference ‖ Spindle) ≤ 1e-4 on average and top-1 ≥ 99%; draft tokens
 * (DFlash's argmax, DFlash2's selector walk) equal wherever the reference's margin is decisive.
 */
class DFlashHeadParityTest {
    static final Path TARGET = Path.of("models/spindle-chat-target");
    static final Path DIR = Path.of("src/test/resources/fixtures/dflash");
    static LoadedModel target;

    @BeforeAll
    static void load() {
        target = ModelLoader.load(TARGET, LoadFormat.SAFETENSORS, LoadListener.NONE);
    }

    @AfterAll
    static void close() {
        target.close();
    }

    @ParameterizedTest
    @ValueSource(strings = {"dflash-random", "dflash2-random"})
    void matchesThePyTorchReference(String name) throws Exception {
        JsonNode ref = new ObjectMapper().readTree(DIR.resolve(name + "-reference.json").toFile());
        DraftHeadConfig hc = DraftHeadConfig.read(DIR.resolve(name));
        hc.checkTarget(target.config(), 1);
        int vocab = target.config().vocabSize();
        try (Arena arena = Arena.ofShared();
             CpuForwardPass pass = new CpuForwardPass(target.config(), target.weights(), 256, 16, 2, dev.spindle.backend.cpu.KvSlots.PER_EXECUTED_LAYER)) {
            SafetensorsFile logitsFile = SafetensorsFile.open(DIR.resolve(name + "-reference.safetensors"), arena);
            var weights = DraftHeadLoader.load(DIR.resolve(name), hc, arena, LoadListener.NONE);
            double klSum = 0;
            int rows = 0, top1 = 0, decisive = 0, tokensEqual = 0;
            for (int c = 0; c < ref.get("cases").size(); c++) {
                JsonNode k = ref.get("cases").get(c);
                int[] tokens = new ObjectMapper().convertValue(k.get("tokens"), int[].class);
                int p = k.get("anchor_position").asInt(), drafts = k.get("drafts").asInt();
                float[][] taps = TestSteps.taps(pass, Arrays.copyOf(tokens, p), hc.tapLayers(1), false);
                try (CpuDraftHead head = new CpuDraftHead(hc, weights, target.weights().embedding().data(), target.weights().lmHead().data(), vocab,
                        hc.tapLayers(1), 2, null)) {
                    int half = p / 2;
                    head.inject(7, 0, Arrays.copyOfRange(taps, 0, half), half);
                    head.inject(7, half, Arrays.copyOfRange(taps, half, p), p - half);
                    assertEquals(p, head.contextEnd(7));
                    int[] drafted = head.draft(7, tokens[p], drafts);
                    float[][] ours = head.lastLogits();
                    float[][] theirs = rowsOf(logitsFile, "logits_" + c, drafts, vocab);
                    for (int r = 0; r < drafts; r++) {
                        klSum += kl(theirs[r], ours[r]);
                        rows++;
                        top1 += argmax(theirs[r]) == argmax(ours[r]) ? 1 : 0;
                    }
                    // tokens: DFlash's argmax per row; DFlash2's walk, up to its first indecisive step (each step depends on the last)
                    boolean walk = hc.kind() == DraftHeadConfig.Kind.DFLASH2;
                    JsonNode want = walk ? k.get("walk") : k.get("argmax");
                    JsonNode margins = walk ? k.get("walk_margins") : k.get("margins");
                    for (int r = 0; r < drafts; r++) {
                        if (margins.get(r).asDouble() < 0.05) {
                            if (walk) {
                                break;
                            }
                            continue;
                        }
                        decisive++;
                        if (drafted[r] == want.get(r).asInt()) {
                            tokensEqual++;
                        } else {
                            throw new AssertionError(name + " case " + c + " row " + r + ": drafted " + drafted[r] + ", the reference "
                                    + want.get(r).asInt() + " (margin " + margins.get(r).asDouble() + ")");
                        }
                    }
                }
            }
            double meanKl = klSum / rows;
            System.out.printf("[dflash parity] %s: %d rows, mean KL %.3g, top-1 %.4f, %d/%d decisive draft tokens equal%n", name, rows, meanKl,
                    (double) top1 / rows, tokensEqual, decisive);
            assertTrue(meanKl <= 1e-4, name + ": mean KL " + meanKl);
            assertTrue(top1 >= 0.99 * rows, name + ": top-1 " + top1 + " of " + rows);
            assertTrue(decisive >= rows / 2, name + ": too few decisive rows to check the tokens: " + decisive + " of " + rows);
        }
    }

    static float[][] rowsOf(SafetensorsFile f, String name, int rows, int vocab) {
        TensorInfo info = f.tensors().get(name);
        MemorySegment m = f.bytes(info);
        ValueLayout.OfFloat le = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        float[][] out = new float[rows][vocab];
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < vocab; i++) {
                out[r][i] = m.getAtIndex(le, (long) r * vocab + i);
            }
        }
        return out;
    }

    static double kl(float[] p, float[] q) {
        double[] lp = logSoftmax(p), lq = logSoftmax(q);
        double s = 0;
        for (int i = 0; i < p.length; i++) {
            s += Math.exp(lp[i]) * (lp[i] - lq[i]);
        }
        return s;
    }

    static double[] logSoftmax(float[] x) {
        double max = Double.NEGATIVE_INFINITY;
        for (float v : x) {
            max = Math.max(max, v);
        }
        double sum = 0;
        for (float v : x) {
            sum += Math.exp(v - max);
        }
        double lse = max + Math.log(sum);
        double[] out = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            out[i] = x[i] - lse;
        }
        return out;
    }

    static int argmax(float[] x) {
        int b = 0;
        for (int i = 1; i < x.length; i++) {
            if (x[i] > x[b]) {
                b = i;
            }
        }
        return b;
    }
}
