package dev.spindle.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cpu.KvSlots;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.JsonValues;
import dev.spindle.chat.ToolCall;
import dev.spindle.engine.ChatReply;
import dev.spindle.engine.ChatRunner;
import dev.spindle.model.LoadedModel;
import dev.spindle.tokenizer.Tokenizer;
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

/** {@code spindle chat}: one chat turn with a model, streamed to the terminal (reasoning dimmed). */
@Command(name = "chat", mixinStandardHelpOptions = true,
        description = "Ask the model one question with its own chat template; greedy decoding on the CPU backend.")
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

    @Option(names = "--draft-model", paramLabel = "DIR", description = "A draft model on the same tokenizer: speculative decoding, same reply.")
    Path draftModel;

    @Option(names = "--draft-tokens", defaultValue = "4", paramLabel = "K", description = "Tokens drafted per step (default 4).")
    int draftTokens;

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
        try (LoadedModel m = model.load();
             Tokenizer tok = Tokenizer.load(m.dir());
             CpuForwardPass cpu = new CpuForwardPass(m.config(), m.weights(), model.blocksFor(4096), model.blockSize,
                     model.threadCount(), KvSlots.PER_EXECUTED_LAYER)) {
            ChatRunner runner = new ChatRunner(cpu, tok, ChatTemplate.fromModelDir(m.dir()));
            LoadedModel draft = draftModel == null ? null : dev.spindle.model.ModelLoader.load(draftModel, dev.spindle.model.LoadFormat.SAFETENSORS,
                    dev.spindle.model.LoadListener.NONE);
            CpuForwardPass draftCpu = draft == null ? null : new CpuForwardPass(draft.config(), draft.weights(), model.blocksFor(4096),
                    model.blockSize, model.threadCount(), KvSlots.PER_EXECUTED_LAYER);
            if (draftCpu != null) {
                runner.withDrafter(draftCpu, draftTokens);
            }
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
            if (draftCpu != null) {
                draftCpu.close();
                draft.close();
            }
            return 0;
        }
    }
}
