package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ParsedDelta;
import dev.spindle.server.pipeline.ApiException;
import dev.spindle.server.pipeline.ChatPipeline;
import dev.spindle.server.pipeline.ChatRequest;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.UUID;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * {@code POST /v1/responses/compact}: the model summarises the conversation (the request's
 * {@code input}, after a stored response's when {@code previous_response_id} is given) and the
 * reply is a {@code response.compaction} object whose {@code output} is the conversation's user
 * messages and one {@code compaction} item. The client sends that output back as the start of
 * its next input; a {@code compaction} item then reaches the model as a user turn holding the
 * summary ({@link #render}). Its {@code encrypted_content} is Spindle's own: the summary, base64,
 * behind a prefix (this server keeps no secrets); another server's is refused by name.
 */
@ApplicationScoped
public class Compaction {
    static final String BLOB = "spindle-compaction:";
    /** The instruction the model summarises under, after the conversation. */
    static final String INSTRUCTION = "Summarise the conversation so far so that it can be continued from the summary alone: "
            + "what the user asked for, what has been done (files read or changed, commands run and their results), the decisions "
            + "made and why, and what remains to do. Be specific and brief. Reply with the summary only.";
    /** What the model reads in place of the conversation a compaction item stands for. */
    static final String LEAD = "A summary of the earlier part of this conversation:\n\n";
    /** The most tokens a summary may take (less where the context leaves less). */
    static final int SUMMARY_TOKENS = 4096;

    private final ChatPipeline pipeline;
    private final Responses responses;

    public Compaction(ChatPipeline pipeline, Responses responses) {
        this.pipeline = pipeline;
        this.responses = responses;
    }

    /** A compaction item of this server's, as the user turn the model reads. */
    static String render(JsonNode item, String path) {
        String blob = item.path("encrypted_content").asText("");
        if (!blob.startsWith(BLOB)) {
            throw ApiException.badRequest(path + ".encrypted_content was not written by this server (only compaction items from its own "
                    + "/v1/responses/compact can be read back)", path + ".encrypted_content");
        }
        try {
            return LEAD + new String(Base64.getDecoder().decode(blob.substring(BLOB.length())), StandardCharsets.UTF_8);
        } catch (IllegalArgumentException e) {
            throw ApiException.badRequest(path + ".encrypted_content is damaged (not base64 after its prefix)", path + ".encrypted_content");
        }
    }

    /** The request made ready: the conversation to summarise, as the chat pipeline's request. */
    record Prepared(String id, long created, ResponsesRequest request, ChatRequest chat) {
    }

    public Prepared prepare(JsonNode body) {
        if (body.hasNonNull("stream") && body.get("stream").asBoolean()) {
            throw ApiException.badRequest("/v1/responses/compact answers at once; stream is not supported there", "stream");
        }
        ResponsesRequest request = responses.translate(body);
        ObjectNode chatBody = request.chatBody();
        chatBody.remove("tools");
        chatBody.remove("tool_choice");
        chatBody.remove("response_format");
        chatBody.remove("max_tokens");
        ((ArrayNode) chatBody.get("messages")).addObject().put("role", "user").put("content", INSTRUCTION);
        chatBody.put("max_tokens", SUMMARY_TOKENS);
        ChatRequest p = pipeline.prepare(chatBody);
        return new Prepared("resp_" + UUID.randomUUID().toString().replace("-", ""), System.currentTimeMillis() / 1000, request, p);
    }

    public Uni<ObjectNode> complete(Prepared p) {
        return pipeline.collect(p.chat()).map(list -> {
            ChatPipeline.Collected c = list.getFirst();
            StringBuilder content = new StringBuilder();
            StringBuilder reasoning = new StringBuilder();
            c.steps().forEach(step -> {
                ParsedDelta d = step.delta();
                content.append(d.content());
                reasoning.append(d.reasoning());
            });
            String summary = (content.toString().isBlank() ? reasoning : content).toString().strip();
            ObjectNode r = JSON.createObjectNode().put("id", p.id()).put("object", "response.compaction").put("created_at", p.created());
            ArrayNode output = r.putArray("output");
            for (JsonNode m : p.request().messages()) {
                if ("user".equals(m.path("role").asText()) && !m.path("content").asText("").startsWith(LEAD)) { // an earlier summary is replaced
                    ObjectNode item = output.addObject().put("type", "message").put("id", "msg_" + uid()).put("status", "completed").put("role", "user");
                    item.putArray("content").addObject().put("type", "input_text").put("text", m.path("content").asText(""));
                }
            }
            output.addObject().put("type", "compaction").put("id", "cmp_" + uid())
                    .put("encrypted_content", BLOB + Base64.getEncoder().encodeToString(summary.getBytes(StandardCharsets.UTF_8)));
            int in = p.chat().prompt().length;
            int out = c.last().completionTokens();
            ObjectNode u = r.putObject("usage");
            u.put("input_tokens", in);
            u.putObject("input_tokens_details").put("cached_tokens", c.last().cachedTokens());
            u.put("output_tokens", out);
            u.putObject("output_tokens_details").put("reasoning_tokens", c.last().reasoningTokens());
            u.put("total_tokens", in + out);
            return r;
        });
    }

    private static String uid() {
        return UUID.randomUUID().toString().replace("-", "");
    }
}
