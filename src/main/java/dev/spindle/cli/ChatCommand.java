package dev.spindle.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.JsonValues;
import dev.spindle.chat.ToolCall;
import dev.spindle.engine.ChatReply;
import dev.spindle.engine.ChatRunner;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.engine.speculative.SpeculativeConfig;
import dev.spindle.model.LoadListener;
import dev.spindle.tokenizer.Tokenizer;
import dev.spindle.wiring.Backends;
import dev.spindle.wiring.Proposers;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import dev.spindle.wiring.ModelFiles;

/** {@code spindle chat}: one chat turn with a model, streamed to the terminal (reasoning dimmed). */
@Command(name = "chat", mixinStandardHelpOptions = true,
        description = "Ask the model one question with its own chat template; greedy decoding on the engine the server runs.")
final class ChatCommand implements Callable<Integer> {
    @Mixin
    ModelOptions model;

    @Parameters(paramLabel = "MESSAGE", description = "The user message.")
    String message;

    @Option(names = "--system", paramLabel = "TEXT", description = "A system message.")
    String system;

    @Option(names = "--tools", paramLabel = "FILE", description = "JSON file: a list of OpenAI tool definitions the model may call.")
    Path tools;

    @Option(names = "--no-think", description = "Turn thinking off (enable_thinking=false).")
    boolean noThink;

    @Option(names = "--max-tokens", defaultValue = "256", paramLabel = "N", description = "Tokens to generate at most (default 256).")
    int maxTokens;

    @Mixin
    SpeculativeOptions speculative;

    @Option(names = "--backend", defaultValue = "cpu", paramLabel = "auto|cpu|cuda", description = "Backend (default cpu).")
    String backend;

    @Override
    public Integer call() throws IOException {
        List<Object> messages = new ArrayList<>();
        if (system != null) {
            messages.add(Map.of("role", "system", "content", system));
        }
        messages.add(Map.of("role", "user", "content", message));
        List<?> toolList = tools == null ? null : (List<?>) JsonValues.toValue(new ObjectMapper().readTree(tools.toFile()));
        Map<String, Object> kwargs = new LinkedHashMap<>();
        if (noThink) {
            kwargs.put("enable_thinking", false);
        }
        SpeculativeConfig spec = speculative.config();
        Backends.Settings settings = new Backends.Settings(model.threadCount(), model.blockSize, model.blocksFor(4096) * model.blockSize, 512, 0.9,
                true, model.gemmCacheDir()).withQuantization(model.quantization()).withKvDtype(model.kvDtype()).withCudaKernels(model.cudaKernels()).withGpuMemoryLimit(model.gpuMemoryLimit());
        ProgressBar bar = ProgressBar.forTerminal("loading " + model.dir().getFileName());
        try (Backends.Opened b = Backends.open(model.dir(), model.format(), Backends.Kind.parse(backend), Proposers.targetSettings(spec, settings), bar);
             Tokenizer tok = ModelFiles.tokenizer(model.dir())) {
            bar.done();
            Speculation speculation = Proposers.open(spec, model.dir(), b, model.format(), settings, LoadListener.NONE);
            ChatRunner runner = new ChatRunner(b.pass(), tok, ModelFiles.chatTemplate(model.dir())).withSpeculation(speculation);
            boolean[] inReasoning = {false};
            long t0 = System.nanoTime();
            ChatReply reply = runner.complete(messages, toolList, kwargs, maxTokens, d -> {
                if (!d.reasoning().isEmpty()) {
                    System.out.print((inReasoning[0] ? "" : "\u001b[2m[thinking] ") + d.reasoning());
                    inReasoning[0] = true;
                }
                if (!d.content().isEmpty()) {
                    System.out.print((inReasoning[0] ? "\u001b[0m\n" : "") + d.content());
                    inReasoning[0] = false;
                }
                System.out.flush();
            });
            if (inReasoning[0]) {
                System.out.print("\u001b[0m");
            }
            System.out.println();
            for (ToolCall c : reply.toolCalls()) {
                System.out.println("[tool call] " + c.name() + " " + c.arguments());
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            System.err.printf("[%d prompt tokens, %d generated in %.2f s; finish_reason=%s]%n", reply.promptTokens(),
                    reply.completionTokens(), secs, reply.finishReason());
            if (speculation.enabled()) {
                var st = runner.speculationStats();
                System.err.printf("[%s: %d drafted, %d accepted (%.2f), %.2f tokens a verified window]%n", speculation.proposer().describe(),
                        st.draftTokens(), st.acceptedTokens(), st.acceptanceRate(), st.meanAcceptedLength());
                speculation.proposer().close();
            }
            return 0;
        }
    }
}
