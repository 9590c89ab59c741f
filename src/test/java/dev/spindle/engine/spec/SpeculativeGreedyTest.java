package dev.spindle.engine.spec;

import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.engine.GreedyGenerator;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.ModelLoader;
import dev.spindle.tokenizer.Tokenizer;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Drafted greedy equals plain greedy, token for token, with the bundled target and drafter. */
class SpeculativeGreedyTest {
    @Test
    void draftedGreedyEqualsPlainGreedy() {
        Path tdir = Path.of("models/spindle-chat-target"), ddir = Path.of("models/spindle-chat-drafter");
        try (LoadedModel tm = ModelLoader.load(tdir, LoadFormat.SAFETENSORS, LoadListener.NONE);
             LoadedModel dm = ModelLoader.load(ddir, LoadFormat.SAFETENSORS, LoadListener.NONE);
             Tokenizer tok = Tokenizer.load(tdir);
             CpuForwardPass target = new CpuForwardPass(tm.config(), tm.weights(), 64, 16);
             CpuForwardPass drafter = new CpuForwardPass(dm.config(), dm.weights(), 64, 16)) {
            ChatTemplate template = ChatTemplate.fromModelDir(tdir);
            Set<Integer> stop = Set.of(tok.addedTokenId("<|im_end|>"));
            long plainNanos = 0, specNanos = 0;
            int drafted = 0, accepted = 0, tokens = 0;
            for (String q : List.of("What is 58 + 27?", "How many r's are in strawberry?", "Is 1900 a leap year?", "Which is bigger, 9.11 or 9.8?")) {
                int[] prompt = tok.encode(template.render(List.of(Map.of("role", "user", "content", q)), null, Map.of("add_generation_prompt", true)));
                for (int k : new int[]{1, 4}) {
                    long p0 = System.nanoTime();
                    int[] plain = new GreedyGenerator(target, 512).generate(prompt, 80, stop, t -> { }).tokens();
                    long p1 = System.nanoTime();
                    SpeculativeGreedy.Result spec = new SpeculativeGreedy(target, drafter, k).generate(prompt, 80, stop, t -> { });
                    assertArrayEquals(plain, spec.tokens(), q + " with k = " + k);
                    if (k == 4) {
                        plainNanos += p1 - p0;
                        specNanos += spec.nanos();
                        drafted += spec.drafted();
                        accepted += spec.accepted();
                        tokens += plain.length;
                    }
                }
                assertTrue(target.blockPool().freeBlocks() == 64 && drafter.blockPool().freeBlocks() == 64, "every block back");
            }
            System.out.printf("[speculative] k=4 on the CPU: %d tokens, acceptance %.3f, plain %.0f ms, drafted %.0f ms (%.2fx)%n", tokens,
                    (double) accepted / drafted, plainNanos / 1e6, specNanos / 1e6, (double) plainNanos / specNanos);
        }
    }
}
