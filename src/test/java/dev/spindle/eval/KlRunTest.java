package dev.spindle.eval;

import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.model.HostReads;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Quantization;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class KlRunTest {
    static final Path CHAT = Path.of("models/spindle-chat-target");

    private static CpuForwardPass cpu(LoadedModel m) {
        return new CpuForwardPass(m.config(), m.weights(), 128, 16, 2, KvSlots.PER_EXECUTED_LAYER);
    }

    private static final int[] TRAINING_LIKE = {4000, 331, 558, 260, 568, 898, 1023, 1088, 1108, 1110, 1063, 1093, 974, 709, 1030, 786, 975, 988,
            807, 962, 551, 531, 740, 1095, 712, 1035, 551, 623, 1071, 751, 1038, 742, 1106, 691, 690, 703, 1090, 634};

    /** A pass against itself is at distance 0 with full agreement; its NLL of a sequence shaped like its training data is low. */
    @Test
    void aPassAgainstItselfIsAtZero() {
        try (LoadedModel m = ModelLoader.load(CHAT, LoadFormat.SAFETENSORS, LoadListener.NONE); CpuForwardPass a = cpu(m); CpuForwardPass b = cpu(m)) {
            Map<String, KlRun.Summary> s = new KlRun(a, b, 16).run(List.of(new KlCorpus.Entry("chat", "x", TRAINING_LIKE)), 2048, l -> { });
            KlRun.Summary all = s.get("all");
            assertEquals(TRAINING_LIKE.length, all.positions());
            assertEquals(0.0, all.maxKl());
            assertEquals(1.0, all.top1Agreement());
            assertEquals(all.baselineNll(), all.candidateNll());
        }
    }

    /**
     * Row p of a window predicts token p + 1 (how KlRun reads NLL): on the reference chat's assistant turn (the part the
     * model was trained on; its prompt was not in the loss, so its NLL there is high) the next tokens are mostly top-1.
     */
    @Test
    void rowsPredictTheNextToken() {
        int[] ids = java.util.Arrays.stream(REFERENCE.split(",")).mapToInt(Integer::parseInt).toArray();
        try (LoadedModel m = ModelLoader.load(CHAT, LoadFormat.SAFETENSORS, LoadListener.NONE); CpuForwardPass a = cpu(m)) {
            float[][] rows = dev.spindle.kv.SoloWindow.run(a, ids, new dev.spindle.kv.BlockTable(new dev.spindle.kv.BlockPool(a.kvCapacity())), true);
            int from = ids.length - 30, hits = 0;
            double nll = 0;
            for (int p = from; p < ids.length - 1; p++) {
                hits += Divergence.argmax(rows[p]) == ids[p + 1] ? 1 : 0;
                nll -= Divergence.logSoftmax(rows[p])[ids[p + 1]];
            }
            int n = ids.length - 1 - from;
            assertTrue(hits >= n * 0.8, hits + " of " + n + " next tokens top-1");
            assertTrue(nll / n < 1, "assistant turn NLL " + nll / n);
        }
    }

    /** HF's teacher-forced chat of the chat-target fixture (reference.json). */
    private static final String REFERENCE = "4000,331,558,260,568,898,1023,1088,1108,1110,1063,1093,974,709,1030,786,975,988,807,962,551,531,740,1095,712,"
            + "1035,551,623,1071,751,1038,742,1106,691,690,703,1090,634,759,789,636,519,762,701,540,702,705,748,540,755,634,997,1087,820,540,755,1037,"
            + "1079,1066,700,765,691,690,703,1022,634,759,815,728,555,519,762,701,540,702,705,748,540,766,700,765,691,690,703,1065,634,1067,577,1016,"
            + "1047,701,540,702,705,1068,540,766,700,1105,1045,623,1010,1048,531,623,741,646,1086,751,531,1075,742,777,570,282,260,4005,506,501,1009,"
            + "1027,1085,520,531,894,636,531,973,1044,1028,1094,995,757,501,567,4006,4001,260,4000,525,260,772,520,531,789,555,1621,1579,287,4001,260,"
            + "4000,541,534,260,4003,260,707,740,1304,1303,531,789,555,2364,889,1314,709,1299,551,716,2364,260,4004,480,4005,506,501,285,1211,1198,"
            + "1826,1383,849,757,501,567,4006,4001";

    /** fp8 weights move the distributions a little: KL above zero, small, most top-1 tokens agreeing. */
    @Test
    void fp8WeightsAreCloseButNotEqual() {
        try (LoadedModel m = ModelLoader.load(CHAT, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel q = ModelLoader.load(CHAT, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, Quantization.FP8_ROW);
             CpuForwardPass a = cpu(m); CpuForwardPass b = cpu(q)) {
            KlRun.Summary all = new KlRun(a, b, 512).run(List.of(new KlCorpus.Entry("chat", "x", TRAINING_LIKE)), 2048, l -> { }).get("all");
            assertTrue(all.meanKl() > 0 && all.meanKl() < 0.05, "mean KL " + all.meanKl());
            assertTrue(all.top1Agreement() > 0.8, "top-1 " + all.top1Agreement());
        }
    }

    /** Think blocks: from each <think> to the next </think>; before any, after a close, and with no tokens: none. */
    @Test
    void thinkingPositionsLieBetweenTheTags() {
        KlRun.ThinkTokens t = new KlRun.ThinkTokens(7, 8);
        assertEquals("[false, true, true, false, false, true, true]",
                java.util.Arrays.toString(KlRun.thinking(new int[]{1, 7, 3, 8, 4, 7, 5}, t)));
        assertEquals("[false, false, false]", java.util.Arrays.toString(KlRun.thinking(new int[]{7, 3, 4}, KlRun.ThinkTokens.NONE)));
    }

    /**
     * The thinking-stop mass: a pass against itself has ratio 1 over the think block of a rendered chat; fp8 weights move it
     * a little (the ratio is of sums over the same positions, so it is finite and positive).
     */
    @Test
    void theThinkingStopMassIsAtOneAgainstItself() throws Exception {
        try (LoadedModel m = ModelLoader.load(CHAT, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel q = ModelLoader.load(CHAT, LoadFormat.SAFETENSORS, LoadListener.NONE, HostReads.AT_LOAD, Quantization.FP8_ROW);
             dev.spindle.tokenizer.Tokenizer tok = dev.spindle.wiring.ModelFiles.tokenizer(CHAT);
             CpuForwardPass a = cpu(m); CpuForwardPass b = cpu(m); CpuForwardPass c = cpu(q)) {
            KlRun.ThinkTokens think = new KlRun.ThinkTokens(tok.addedTokenId("<think>"), tok.addedTokenId("</think>"));
            int[] ids = tok.encode("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n<think>\nAdd them: 2 + 3 = 5.\n</think>\n\n5<|im_end|>");
            List<KlCorpus.Entry> corpus = List.of(new KlCorpus.Entry("chat", "x", ids));
            KlRun.Summary self = new KlRun(a, b, 512).run(corpus, 2048, think, l -> { }).get("all");
            assertTrue(self.thinkingPositions() > 5, "thinking positions " + self.thinkingPositions());
            assertEquals(1.0, self.thinkingStopRatio());
            KlRun.Summary fp8 = new KlRun(a, c, 512).run(corpus, 2048, think, l -> { }).get("all");
            assertEquals(self.thinkingPositions(), fp8.thinkingPositions());
            assertTrue(fp8.thinkingStopRatio() > 0.5 && fp8.thinkingStopRatio() < 2 && fp8.thinkingStopRatio() != 1.0, "ratio " + fp8.thinkingStopRatio());
        }
    }
}
