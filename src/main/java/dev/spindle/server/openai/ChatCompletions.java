package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.chat.ToolCall;
import dev.spindle.chat.ToolCallDelta;
import dev.spindle.engine.TokenEvent;
import dev.spindle.server.ModelService;
import dev.spindle.server.pipeline.ChatPipeline;
import dev.spindle.server.pipeline.ChatRequest;
import dev.spindle.server.pipeline.ReplyStep;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.util.ArrayList;
import java.util.List;

import static dev.spindle.server.pipeline.Json.JSON;
import static dev.spindle.server.pipeline.Json.sse;

/**
 * POST /v1/chat/completions' output: the {@link ChatPipeline}'s reply steps written as OpenAI's
 * chat.completion (reasoning as {@code reasoning_content}, tool calls as {@code tool_calls}) or
 * streamed as its SSE chunks.
 */
@ApplicationScoped
public class ChatCompletions {
    private final ModelService service;
    private final ChatPipeline pipeline;

    public ChatCompletions(ModelService service, ChatPipeline pipeline) {
        this.service = service;
        this.pipeline = pipeline;
    }

    /** The SSE stream: one chunk per step with text, a final chunk with finish_reason, usage if asked, then [DONE]. */
    public Multi<String> stream(ChatRequest p) {
        List<Multi<String>> choices = new ArrayList<>();
        int[] completion = new int[p.gen().n()];
        int[] cached = new int[1];
        boolean[] promptLogprobsSent = {false};
        for (Multi<ReplyStep> steps : pipeline.run(p)) {
            boolean[] first = {true};
            choices.add(steps.onItem().transformToMultiAndConcatenate(step -> {
                ParsedDelta d = step.delta();
                int index = step.choice();
                completion[index] = step.completionTokens();
                cached[0] = step.cachedTokens();
                List<String> out = new ArrayList<>();
                ObjectNode delta = JSON.createObjectNode();
                if (first[0]) {
                    delta.put("role", "assistant");
                    first[0] = false;
                }
                if (!d.reasoning().isEmpty()) {
                    delta.put("reasoning_content", d.reasoning());
                    delta.put("reasoning", d.reasoning());
                }
                if (!d.content().isEmpty()) {
                    delta.put("content", d.content());
                }
                if (!d.callDeltas().isEmpty()) {
                    ArrayNode calls = delta.putArray("tool_calls");
                    for (ToolCallDelta c : d.callDeltas()) {
                        calls.add(toolCallDeltaJson(c));
                    }
                }
                ObjectNode logprobs = p.gen().logprobs() ? logprobsJson(List.of(step.event()), p.gen().topLogprobs(), p.gen().tokenIdsAsKeys()) : null;
                if (!delta.isEmpty() || step.last() || logprobs != null) {
                    ObjectNode chunk = chunk(p, index, delta, step.finishReason(), logprobs);
                    if (step.last()) {
                        putStopReason((ObjectNode) chunk.get("choices").get(0), step.stopReason());
                    }
                    if (p.gen().promptLogprobs() >= 0 && !promptLogprobsSent[0] && step.event().promptLogprobs() != null) {
                        promptLogprobsSent[0] = true;
                        chunk.set("prompt_logprobs", promptLogprobsJson(p.prompt(), step.event().promptLogprobs(), p.gen().promptLogprobs()));
                    }
                    if (p.gen().continuousUsage()) {
                        chunk.set("usage", usage(p.prompt().length, step.completionTokens(), step.cachedTokens()));
                    }
                    out.add(sse(chunk));
                }
                return Multi.createFrom().iterable(out);
            }));
        }
        Multi<String> merged = Multi.createBy().merging().streams(choices);
        return merged.onCompletion().switchTo(() -> {
            List<String> tail = new ArrayList<>();
            if (p.gen().includeUsage()) {
                ObjectNode u = chunkBase(p);
                u.putArray("choices");
                u.set("usage", usage(p.prompt().length, sum(completion), cached[0]));
                tail.add(sse(u));
            }
            tail.add("data: [DONE]\n\n");
            return Multi.createFrom().iterable(tail);
        });
    }

    /** The whole reply as one chat.completion object. */
    public Uni<ObjectNode> complete(ChatRequest p) {
        return pipeline.collect(p).map(list -> {
            ObjectNode r = header(p.id(), "chat.completion", p.created(), service.servedName());
            ArrayNode arr = r.putArray("choices");
            int completion = 0;
            int cached = 0;
            for (ChatPipeline.Collected c : list) {
                ParsedDelta all = c.all();
                ReplyStep last = c.last();
                completion += last.completionTokens();
                cached = last.cachedTokens();
                ObjectNode message = JSON.createObjectNode().put("role", "assistant");
                message.put("content", all.content().isEmpty() && !all.toolCalls().isEmpty() ? null : all.content());
                if (!all.reasoning().isEmpty()) {
                    message.put("reasoning_content", all.reasoning());
                    message.put("reasoning", all.reasoning());
                }
                if (!all.toolCalls().isEmpty()) {
                    ArrayNode calls = message.putArray("tool_calls");
                    all.toolCalls().forEach(t -> calls.add(toolCallJson(t)));
                }
                ObjectNode choice = arr.addObject().put("index", last.choice());
                choice.set("message", message);
                choice.set("logprobs", p.gen().logprobs() ? logprobsJson(c.events(), p.gen().topLogprobs(), p.gen().tokenIdsAsKeys()) : null);
                choice.put("finish_reason", last.finishReason() == null ? "stop" : last.finishReason());
                putStopReason(choice, last.stopReason());
                if (p.gen().promptLogprobs() >= 0 && !r.has("prompt_logprobs")) {
                    TokenEvent.PromptLogprobs pl = c.events().isEmpty() ? null : c.events().getFirst().promptLogprobs();
                    if (pl != null) {
                        r.set("prompt_logprobs", promptLogprobsJson(p.prompt(), pl, p.gen().promptLogprobs()));
                    }
                }
            }
            r.set("usage", usage(p.prompt().length, completion, cached));
            return r;
        });
    }

    static void putStopReason(ObjectNode choice, Object stopReason) {
        if (stopReason instanceof Integer id) {
            choice.put("stop_reason", id);
        } else if (stopReason instanceof String str) {
            choice.put("stop_reason", str);
        } else {
            choice.putNull("stop_reason");
        }
    }

    /**
     * vLLM's prompt_logprobs: one entry per prompt token, null for the first; otherwise the token's own
     * logprob and the top alternatives, keyed by token id, each with its rank (1 = most likely; the
     * prompt token's rank is given when it is among the alternatives, else null) and decoded text.
     */
    ArrayNode promptLogprobsJson(int[] prompt, TokenEvent.PromptLogprobs pl, int top) {
        ArrayNode out = JSON.createArrayNode();
        for (int i = 0; i < prompt.length && i < pl.logprobs().length; i++) {
            if (i == 0 || Double.isNaN(pl.logprobs()[i])) {
                out.addNull();
                continue;
            }
            ObjectNode pos = out.addObject();
            int[] ids = pl.topIds()[i];
            double[] lps = pl.topLogprobs()[i];
            int rank = -1;
            for (int k = 0; k < ids.length; k++) {
                if (ids[k] == prompt[i]) {
                    rank = k + 1;
                }
            }
            ObjectNode own = pos.putObject(String.valueOf(prompt[i])).put("logprob", pl.logprobs()[i]);
            if (rank > 0) {
                own.put("rank", rank);
            } else {
                own.putNull("rank");
            }
            own.put("decoded_token", service.tokenizer().decode(new int[]{prompt[i]}, false));
            for (int k = 0; k < Math.min(top, ids.length); k++) {
                if (ids[k] == prompt[i]) {
                    continue;
                }
                pos.putObject(String.valueOf(ids[k])).put("logprob", lps[k]).put("rank", k + 1)
                        .put("decoded_token", service.tokenizer().decode(new int[]{ids[k]}, false));
            }
        }
        return out;
    }

    private static int sum(int[] a) {
        int s = 0;
        for (int x : a) {
            s += x;
        }
        return s;
    }

    private ObjectNode chunkBase(ChatRequest p) {
        return header(p.id(), "chat.completion.chunk", p.created(), service.servedName());
    }

    private ObjectNode chunk(ChatRequest p, int index, ObjectNode delta, String finish, ObjectNode logprobs) {
        ObjectNode c = chunkBase(p);
        choice(c, index, "delta", delta, finish, logprobs);
        return c;
    }

    /** An OpenAI object's first fields: id, object (its type), created (seconds), model. */
    static ObjectNode header(String id, String object, long created, String model) {
        return JSON.createObjectNode().put("id", id).put("object", object).put("created", created).put("model", model);
    }

    /** A choice added to {@code reply}'s choices: index, its content under {@code key}, logprobs, finish_reason. */
    static void choice(ObjectNode reply, int index, String key, JsonNode content, String finish, ObjectNode logprobs) {
        ObjectNode c = reply.withArray("choices").addObject();
        c.put("index", index);
        c.set(key, content);
        c.set("logprobs", logprobs);
        c.put("finish_reason", finish);
    }

    /** A piece of a streamed call: the first carries id, type and name; later ones argument fragments. */
    static ObjectNode toolCallDeltaJson(ToolCallDelta c) {
        ObjectNode o = JSON.createObjectNode().put("index", c.index());
        if (c.opens()) {
            o.put("id", c.id()).put("type", "function");
            o.putObject("function").put("name", c.name()).put("arguments", c.arguments());
        } else {
            o.putObject("function").put("arguments", c.arguments());
        }
        return o;
    }

    static ObjectNode toolCallJson(ToolCall c) {
        ObjectNode o = JSON.createObjectNode();
        o.put("id", c.id()).put("type", "function");
        o.putObject("function").put("name", c.name()).put("arguments", c.arguments());
        return o;
    }

    ObjectNode logprobsJson(List<TokenEvent> events, int top, boolean asIds) {
        ObjectNode lp = JSON.createObjectNode();
        ArrayNode content = lp.putArray("content");
        for (TokenEvent e : events) {
            if (e.token() < 0) {
                continue;
            }
            ObjectNode t = content.addObject();
            String text = service.tokenizer().decode(new int[]{e.token()}, false);
            t.put("token", asIds ? "token_id:" + e.token() : text).put("logprob", e.logprob());
            ArrayNode bytes = t.putArray("bytes");
            for (byte b : text.getBytes(java.nio.charset.StandardCharsets.UTF_8)) {
                bytes.add(b & 0xff);
            }
            ArrayNode alts = t.putArray("top_logprobs");
            for (int k = 0; k < Math.min(top, e.topIds().length); k++) {
                String alt = service.tokenizer().decode(new int[]{e.topIds()[k]}, false);
                ObjectNode a = alts.addObject().put("token", asIds ? "token_id:" + e.topIds()[k] : alt).put("logprob", e.topLogprobs()[k]);
                ArrayNode ab = a.putArray("bytes");
                for (byte b : alt.getBytes(java.nio.charset.StandardCharsets.UTF_8)) {
                    ab.add(b & 0xff);
                }
            }
        }
        return lp;
    }

    static ObjectNode usage(int prompt, int completion, int cached) {
        ObjectNode u = JSON.createObjectNode();
        u.put("prompt_tokens", prompt).put("completion_tokens", completion).put("total_tokens", prompt + completion);
        u.putObject("prompt_tokens_details").put("cached_tokens", cached);
        return u;
    }
}
