package dev.spindle.backend.cpu;

import dev.spindle.Fixture;
import dev.spindle.backend.TestSteps;
import dev.spindle.kv.BlockTable;
import dev.spindle.kv.SoloWindow;
import dev.spindle.model.Quantization;
import dev.spindle.step.KvDtype;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Bit-exact invariants of the CPU backend: how a sequence is cut into windows, and
 * whether its prefix was computed earlier, must not change a single logit bit.
 */
class WindowInvarianceTest {
    /**
     * Every fixture as published, with fp8 weights of each granularity, and with each quantized KV cache: the invariants hold
     * in every format.
     */
    static List<Arguments> fixtures() {
        List<Arguments> out = new ArrayList<>();
        for (String name : Fixture.NAMES) {
            for (Quantization q : Quantization.values()) {
                out.add(Arguments.of(name, q, KvDtype.BF16));
            }
            for (KvDtype kv : KvDtype.values()) {
                if (kv != KvDtype.BF16) {
                    out.add(Arguments.of(name, Quantization.NONE, kv));
                }
            }
        }
        return out;
    }

    @ParameterizedTest
    @MethodSource("fixtures")
    void oneWindowSeveralWindowsAndSingleRowsGiveIdenticalLogits(String name, Quantization q, KvDtype kvDtype) {
        try (Fixture f = new Fixture(name, q); CpuForwardPass cpu = f.cpu(kvDtype)) {
            int[] prompt = f.prompts.get(2);
            float[][] whole = run(cpu, prompt, new int[]{prompt.length});
            float[][] rows = run(cpu, prompt, ones(prompt.length));
            float[][] uneven = run(cpu, prompt, cuts(prompt.length, 5, 17, 1, 3));
            float[][] blockAligned = run(cpu, prompt, cuts(prompt.length, 16, 16));
            for (int p = 0; p < prompt.length; p++) {
                assertBitEqual(whole[p], rows[p], name + " row-by-row, position " + p);
                assertBitEqual(whole[p], uneven[p], name + " uneven windows, position " + p);
                assertBitEqual(whole[p], blockAligned[p], name + " block-aligned windows, position " + p);
            }
        }
    }

    @ParameterizedTest
    @MethodSource("fixtures")
    void resumedPromptEqualsFreshPrompt(String name, Quantization q, KvDtype kvDtype) {
        try (Fixture f = new Fixture(name, q); CpuForwardPass cpu = f.cpu(kvDtype)) {
            int[] prompt = f.prompts.get(2);
            float[][] fresh = run(cpu, prompt, new int[]{prompt.length});
            // the first 32 positions (two full blocks of 16) computed by an earlier request
            BlockTable earlier = new BlockTable(TestSteps.pool(cpu));
            SoloWindow.run(cpu, Arrays.copyOf(prompt, 40), earlier, true);
            BlockTable resumed = new BlockTable(TestSteps.pool(cpu));
            resumed.shareFullBlocks(earlier, 2);
            earlier.release(); // the shared blocks stay alive through the resumed table's references
            int[] rest = Arrays.copyOfRange(prompt, 32, prompt.length);
            float[][] tail = SoloWindow.run(cpu, rest, resumed, true);
            assertEquals(rest.length, tail.length);
            for (int i = 0; i < rest.length; i++) {
                assertBitEqual(fresh[32 + i], tail[i], name + " resumed, position " + (32 + i));
            }
            // and continuing the same table after a pause equals it too
            BlockTable paused = new BlockTable(TestSteps.pool(cpu));
            SoloWindow.run(cpu, Arrays.copyOf(prompt, 21), paused, false);
            float[][] after = SoloWindow.run(cpu, Arrays.copyOfRange(prompt, 21, prompt.length), paused, true);
            for (int i = 0; i < after.length; i++) {
                assertBitEqual(fresh[21 + i], after[i], name + " continued, position " + (21 + i));
            }
            resumed.release();
            paused.release();
            assertEquals(TestSteps.pool(cpu).numBlocks(), TestSteps.pool(cpu).freeBlocks(), "every block returns to the pool");
        }
    }

    /** Hidden-state taps (a draft head's input) are a row's bits whether it runs in a window or alone, after any layer. */
    @ParameterizedTest
    @MethodSource("fixtures")
    void tapsAreTheSameInAWindowAndInOneRowSteps(String name, Quantization q, KvDtype kvDtype) {
        try (Fixture f = new Fixture(name, q); CpuForwardPass cpu = f.cpu(kvDtype)) {
            int[] prompt = f.prompts.get(1);
            int[] layers = {0, f.model.config().executedLayers() - 1};
            float[][] window = TestSteps.taps(cpu, prompt, layers, false), rows = TestSteps.taps(cpu, prompt, layers, true);
            for (int r = 0; r < prompt.length; r++) {
                assertBitEqual(window[r], rows[r], name + " taps, row " + r);
            }
        }
    }

    /** Several sequences in one batched step give each one's logits exactly as it gets alone. */
    @ParameterizedTest
    @MethodSource("fixtures")
    void batchedSequencesEqualSoloSequences(String name, Quantization q, KvDtype kvDtype) {
        try (Fixture f = new Fixture(name, q); CpuForwardPass cpu = f.cpu(kvDtype)) {
            int[] a = f.prompts.get(0), b = f.prompts.get(1), c = f.prompts.get(2);
            float[][] soloA = run(cpu, a, new int[]{a.length});
            float[][] soloB = run(cpu, b, new int[]{b.length});
            float[][] soloC = run(cpu, c, new int[]{c.length});
            BlockTable ta = new BlockTable(TestSteps.pool(cpu)), tb = new BlockTable(TestSteps.pool(cpu)), tc = new BlockTable(TestSteps.pool(cpu));
            // step 1: a whole, b's first 10 tokens, c's first token; step 2: b's rest, c's next 30; then c's rest
            var s1 = TestSteps.forward(cpu, java.util.List.of(
                    TestSteps.window(a, ta, true, true),
                    TestSteps.window(Arrays.copyOf(b, 10), tb, true, true),
                    TestSteps.window(Arrays.copyOf(c, 1), tc, true, true)));
            var s2 = TestSteps.forward(cpu, java.util.List.of(
                    TestSteps.window(Arrays.copyOfRange(b, 10, b.length), tb, true, true),
                    TestSteps.window(Arrays.copyOfRange(c, 1, 31), tc, true, true)));
            float[][] s3 = SoloWindow.run(cpu, Arrays.copyOfRange(c, 31, c.length), tc, true);
            for (int p = 0; p < a.length; p++) {
                assertBitEqual(soloA[p], s1.get(0)[p], name + " batched a, position " + p);
            }
            for (int p = 0; p < b.length; p++) {
                assertBitEqual(soloB[p], p < 10 ? s1.get(1)[p] : s2.get(0)[p - 10], name + " batched b, position " + p);
            }
            for (int p = 0; p < c.length; p++) {
                float[] got = p < 1 ? s1.get(2)[p] : p < 31 ? s2.get(1)[p - 1] : s3[p - 31];
                assertBitEqual(soloC[p], got, name + " batched c, position " + p);
            }
            ta.release();
            tb.release();
            tc.release();
        }
    }

    static float[][] run(CpuForwardPass cpu, int[] prompt, int[] windows) {
        BlockTable t = new BlockTable(TestSteps.pool(cpu));
        try {
            float[][] out = new float[prompt.length][];
            int pos = 0;
            for (int w : windows) {
                float[][] l = SoloWindow.run(cpu, Arrays.copyOfRange(prompt, pos, pos + w), t, true);
                System.arraycopy(l, 0, out, pos, w);
                pos += w;
            }
            assertEquals(prompt.length, pos);
            return out;
        } finally {
            t.release();
        }
    }

    static int[] ones(int n) {
        int[] a = new int[n];
        Arrays.fill(a, 1);
        return a;
    }

    /** Windows of the given sizes, cycled, until n tokens are covered. */
    static int[] cuts(int n, int... sizes) {
        int[] out = new int[n];
        int k = 0, pos = 0;
        while (pos < n) {
            int w = Math.min(sizes[k % sizes.length], n - pos);
            out[k++] = w;
            pos += w;
        }
        return Arrays.copyOf(out, k);
    }

    static void assertBitEqual(float[] a, float[] b, String what) {
        assertEquals(a.length, b.length, what);
        for (int i = 0; i < a.length; i++) {
            if (Float.floatToRawIntBits(a[i]) != Float.floatToRawIntBits(b[i])) {
                assertArrayEquals(a, b, what + ": first differing logit at vocab id " + i);
            }
        }
    }
}
