package dev.spindle.cli;

import dev.spindle.engine.TokenEvent;
import dev.spindle.engine.TokenSink;
import dev.spindle.engine.sched.EngineCore;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.sample.SamplingParams;
import dev.spindle.step.ForwardPass;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import java.util.Set;

/**
 * Decoding through the engine the server runs (scheduling, windows, device draws, emitting), not the pass alone: {@code
 * streams} greedy requests of random {@code promptTokens}-token prompts, {@code maxTokens} each (end-of-sequence ignored),
 * timed from when every request has its first token to the last. With and without asynchronous scheduling, so the bench
 * shows what running ahead gives a server (the pass-level figures' {@code ahead_*} fields leave the engine out).
 */
final class EngineDecodeFigure {
    private EngineDecodeFigure() {
    }

    static Map<String, Object> measure(ForwardPass pass, int budget, int streams, int promptTokens, int maxTokens, boolean async, long seed) {
        Random rnd = new Random(seed);
        EngineCore core = new EngineCore(pass, budget, streams, Set.of(), Speculation.NONE, async);
        int[] got = new int[streams];
        Throwable[] failure = {null};
        for (int i = 0; i < streams; i++) {
            int at = i;
            int[] prompt = rnd.ints(promptTokens, 3, pass.config().vocabSize()).toArray();
            core.add(i, prompt, SamplingParams.greedy(maxTokens).withIgnoreEos(true), new TokenSink() {
                @Override
                public void onToken(TokenEvent e) {
                    got[at]++;
                }

                @Override
                public void onError(Throwable error) {
                    failure[0] = error;
                }
            });
        }
        long started = 0, before = 0;
        while (!core.idle() && failure[0] == null) {
            core.step();
            if (started == 0 && java.util.Arrays.stream(got).allMatch(n -> n > 0)) {
                started = System.nanoTime(); // every prompt is in and has its first token: decoding from here
                before = java.util.Arrays.stream(got).sum();
            }
        }
        if (failure[0] != null) {
            throw new IllegalStateException("engine decode figure: a request failed: " + failure[0].getMessage(), failure[0]);
        }
        double s = (System.nanoTime() - started) / 1e9;
        long tokens = java.util.Arrays.stream(got).sum() - before;
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("streams", streams);
        m.put("prompt_tokens", promptTokens);
        m.put("max_tokens", maxTokens);
        m.put("async_scheduling", async);
        m.put("decode_tokens", tokens);
        m.put("seconds", Math.round(s * 1e4) / 1e4);
        m.put("tokens_per_second", Math.round(tokens / s * 10) / 10.0);
        return m;
    }
}
