package dev.spindle.backend.cpu;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.CandidateSelector;
import dev.spindle.backend.TestSteps;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.DraftHeadLoader;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.SafetensorsFile;
import dev.spindle.model.Tensor;
import dev.spindle.model.TensorInfo;
import dev.spindle.step.DraftHead;
import dev.spindle.step.ForwardPass;
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
 * Spindle's own CPU pass; context is injected in two pieces, as after successive steps. The gate is the
 * target's: no further from the truth than the bf16 reference itself. The truth is the same head and
 * target in fp32; Spindle passes when its mean KL(fp32 ‖ Spindle) ≤ 1.1 × KL(fp32 ‖ bf16 reference) + 1e-6
 * and its top-1 agreement with fp32 is at most 0.5 points below the reference's. Draft tokens (DFlash's
 * argmax, DFlash2's selector walk) equal the reference's wherever its margin is decisive (for the walk: the
 * chosen candidate's score margin, on rows where both have the same top-K candidates).
 */
public class DFlashHeadParityTest {
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
        try (CpuForwardPass pass = new CpuForwardPass(target.config(), target.weights(), 256, 16, 2, KvSlots.PER_EXECUTED_LAYER)) {
            verify(name, "CPU", pass, (hc, weights) -> new CpuDraftHead(hc, weights, target.weights().embedding().data(),
                    target.weights().lmHead(), target.config().vocabSize(), hc.tapLayers(1), 2, null));
        }
    }

    /**
     * The gate, for any backend's head: the target's taps from {@code pass}, each case's context injected in two
     * pieces, one greedy draft, its logits against the fp32 truth and the bf16 reference.
     */
    public static void verify(String name, String backend, ForwardPass pass,
                              java.util.function.BiFunction<DraftHeadConfig, java.util.Map<String, Tensor>, DraftHead> make)
            throws Exception {
        JsonNode ref = new ObjectMapper().readTree(DIR.resolve(name + "-reference.json").toFile());
        DraftHeadConfig hc = DraftHeadConfig.read(DIR.resolve(name));
        hc.checkTarget(pass.config(), 1);
        int vocab = pass.config().vocabSize();
        try (Arena arena = Arena.ofShared()) {
            SafetensorsFile logitsFile = SafetensorsFile.open(DIR.resolve(name + "-reference.safetensors"), arena);
            var weights = DraftHeadLoader.load(DIR.resolve(name), hc, arena, LoadListener.NONE);
            double klSum = 0, klOurs = 0, klRef = 0;
            int rows = 0, top1 = 0, decisive = 0, tokensEqual = 0, oursTop = 0, refTop = 0;
            for (int c = 0; c < ref.get("cases").size(); c++) {
                JsonNode k = ref.get("cases").get(c);
                int[] tokens = new ObjectMapper().convertValue(k.get("tokens"), int[].class);
                int p = k.get("anchor_position").asInt(), drafts = k.get("drafts").asInt();
                float[][] taps = TestSteps.taps(pass, Arrays.copyOf(tokens, p), hc.tapLayers(1), false);
                try (DraftHead head = make.apply(hc, weights)) {
                    int half = p / 2;
                    head.inject(7, 0, Arrays.copyOfRange(taps, 0, half), half);
                    head.inject(7, half, Arrays.copyOfRange(taps, half, p), p - half);
                    assertEquals(p, head.contextEnd(7));
                    int[] drafted = head.draft(7, tokens[p], drafts, null).tokens();
                    float[][] ours = head.lastLogits();
                    float[][] theirs = rowsOf(logitsFile, "logits_" + c, drafts, vocab);
                    float[][] truth = rowsOf(logitsFile, "logits_f32_" + c, drafts, vocab);
                    for (int r = 0; r < drafts; r++) {
                        klSum += Stats.kl(theirs[r], ours[r]);
                        klOurs += Stats.kl(truth[r], ours[r]);
                        klRef += Stats.kl(truth[r], theirs[r]);
                        rows++;
                        top1 += Stats.argmax(theirs[r]) == Stats.argmax(ours[r]) ? 1 : 0;
                        oursTop += Stats.argmax(truth[r]) == Stats.argmax(ours[r]) ? 1 : 0;
                        refTop += Stats.argmax(truth[r]) == Stats.argmax(theirs[r]) ? 1 : 0;
                    }
                    // tokens: DFlash's argmax per row; DFlash2's walk, up to its first indecisive step (each step depends on the last)
                    boolean walk = hc.kind() == DraftHeadConfig.Kind.DFLASH2;
                    JsonNode want = walk ? k.get("walk") : k.get("argmax");
                    JsonNode margins = walk ? k.get("walk_margins") : k.get("margins");
                    for (int r = 0; r < drafts; r++) {
                        // the walk chooses among each row's top-K: comparable where both rows have the same candidates
                        boolean setDecided = !walk || sameCandidates(theirs[r], ours[r], hc.selectorTopK());
                        if (margins.get(r).asDouble() < 0.05 || !setDecided) {
                            if (walk) {
                                break;
                            }
                            continue;
                        }
                        decisive++;
                        if (drafted[r] == want.get(r).asInt()) {
                            tokensEqual++;
                        } else {
                            System.out.println("[dflash parity] " + name + " case " + c + " row " + r + ": drafted " + drafted[r] + ", the reference "
                                    + want.get(r).asInt() + " (margin " + margins.get(r).asDouble() + ")");
                            if (walk) {
                                break;
                            }
                        }
                    }
                }
            }
            double meanKl = klSum / rows, ours = klOurs / rows, theirsKl = klRef / rows;
            System.out.printf("[dflash parity] " + backend + " %s: %d rows; vs the bf16 reference: mean KL %.3g, top-1 %.4f; vs fp32: Spindle KL %.3g top-1 %.4f,"
                            + " the bf16 reference KL %.3g top-1 %.4f; %d/%d decisive draft tokens equal%n", name, rows, meanKl, (double) top1 / rows,
                    ours, (double) oursTop / rows, theirsKl, (double) refTop / rows, tokensEqual, decisive);
            assertTrue(ours <= 1.1 * theirsKl + 1e-6, name + ": KL(fp32 || Spindle) " + ours + " > 1.1 x KL(fp32 || bf16 reference) " + theirsKl);
            assertTrue(oursTop >= refTop - 0.005 * rows, name + ": top-1 against fp32 " + oursTop + ", the reference's " + refTop + " of " + rows);
            assertEquals(decisive, tokensEqual, name + ": decisive draft tokens that differ");
            // a walk stops being comparable at its first indecisive step: fewer of its rows are checked
            assertTrue(decisive >= (hc.kind() == DraftHeadConfig.Kind.DFLASH2 ? rows / 4 : rows / 2), name + ": too few decisive rows to check the tokens: " + decisive + " of " + rows);
        }
    }

    /** Whether two rows have the same k best tokens (best first, ties to the lower id: the selector's candidates). */
    static boolean sameCandidates(float[] a, float[] b, int k) {
        int[] x = CandidateSelector.topK(a, k), y = CandidateSelector.topK(b, k);
        Arrays.sort(x);
        Arrays.sort(y);
        return Arrays.equals(x, y);
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
}
