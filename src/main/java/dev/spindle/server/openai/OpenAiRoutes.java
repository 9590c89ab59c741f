package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ChatTemplateException;
import dev.spindle.engine.EngineBusyException;
import dev.spindle.server.ModelService;
import io.quarkus.logging.Log;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import io.smallrye.mutiny.subscription.Cancellable;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

import static dev.spindle.server.openai.ChatCompletions.JSON;

/**
 * The OpenAI-compatible HTTP surface, on Vert.x routes so that streaming answers with
 * SSE whatever the client's Accept header says (the npm client sends application/json
 * even when streaming). Request parsing, template rendering and tokenization run on a
 * worker, never on the event loop; tokens arrive as a Mutiny stream from the engine.
 */
@ApplicationScoped
public class OpenAiRoutes {
    private final ModelService service;
    private final ChatCompletions chat;
    private final Completions completions;

    public OpenAiRoutes(ModelService service, ChatCompletions chat, Completions completions) {
        this.service = service;
        this.chat = chat;
        this.completions = completions;
    }

    void routes(@Observes Router router) {
        BodyHandler body = BodyHandler.create().setBodyLimit(32L << 20);
        router.route("/v1/*").order(-2).handler(this::requireLoaded);
        router.route("/tokenize").order(-2).handler(this::requireLoaded);
        router.route("/detokenize").order(-2).handler(this::requireLoaded);
        router.route("/v1/*").order(-1).handler(this::authorize);
        router.route("/tokenize").order(-1).handler(this::authorize);
        router.route("/detokenize").order(-1).handler(this::authorize);
        router.post("/v1/chat/completions").handler(body).handler(ctx -> json(ctx, b -> {
            ChatCompletions.Prepared p = chat.prepare(b);
            return p.gen().stream() ? chat.stream(p) : chat.complete(p);
        }));
        router.post("/v1/completions").handler(body).handler(ctx -> json(ctx, b -> {
            Completions.Prepared p = completions.prepare(b);
            return p.gen().stream() ? completions.stream(p) : completions.complete(p);
        }));
        router.get("/v1/models").handler(ctx -> {
            ObjectNode r = JSON.createObjectNode().put("object", "list");
            ObjectNode m = r.putArray("data").addObject();
            m.put("id", service.servedName()).put("object", "model").put("created", 0).put("owned_by", "spindle")
                    .put("max_model_len", service.modelConfig().maxPositions());
            send(ctx.response(), 200, r);
        });
        router.post("/tokenize").handler(body).handler(ctx -> json(ctx, this::tokenize));
        router.post("/detokenize").handler(body).handler(ctx -> json(ctx, this::detokenize));
    }

    private Object tokenize(JsonNode b) {
        String text;
        boolean chat = Fields.get(b, "messages") != null;
        if (chat) {
            List<?> messages = ChatMessages.parse(b.get("messages"), "messages");
            List<?> tools = ChatMessages.tools(b.get("tools"), "tools");
            Map<String, Object> kwargs = ChatMessages.templateKwargs(b);
            kwargs.put("add_generation_prompt", Fields.bool(b, "add_generation_prompt", true));
            try {
                text = service.template().render(messages, tools, kwargs);
            } catch (ChatTemplateException e) {
                throw ApiException.badRequest(e.getMessage(), "messages");
            }
        } else if (Fields.get(b, "prompt") != null) {
            text = Fields.string(b, "prompt", "");
        } else {
            throw ApiException.badRequest("give a prompt (text) or messages", "prompt");
        }
        boolean special = Fields.bool(b, "add_special_tokens", !chat);
        int[] ids = special ? service.tokenizer().encodeWithSpecialTokens(text) : service.tokenizer().encode(text);
        ObjectNode r = JSON.createObjectNode();
        r.put("count", ids.length).put("max_model_len", service.modelConfig().maxPositions());
        ArrayNode t = r.putArray("tokens");
        Arrays.stream(ids).forEach(t::add);
        if (chat) {
            r.put("prompt", text);
        }
        return r;
    }

    private Object detokenize(JsonNode b) {
        JsonNode t = b.get("tokens");
        if (t == null || !t.isArray()) {
            throw ApiException.badRequest("tokens must be a list of token ids", "tokens");
        }
        int vocab = service.modelConfig().vocabSize();
        int[] ids = new int[t.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = (int) Fields.integerValue(t.get(i), "tokens[" + i + "]", 0, 0, vocab - 1);
        }
        return JSON.createObjectNode().put("prompt", service.tokenizer().decode(ids, false));
    }

    /** 503 with Retry-After while the model is still loading. */
    private void requireLoaded(RoutingContext ctx) {
        if (service.ready()) {
            ctx.next();
            return;
        }
        ctx.response().putHeader("Retry-After", "5");
        send(ctx.response(), 503, errorJson(503, "the model " + service.servedName() + " is still loading; retry shortly", null));
    }

    /** With spindle.api-key set: a bearer token that matches it (compared in constant time), else 401. */
    private void authorize(RoutingContext ctx) {
        var key = service.config().apiKey();
        if (key.isEmpty()) {
            ctx.next();
            return;
        }
        if (ctx.request().method() == io.vertx.core.http.HttpMethod.OPTIONS) {
            ctx.next(); // a CORS preflight carries no credentials (the CORS filter answers it)
            return;
        }
        String header = ctx.request().getHeader("Authorization");
        String given = header != null && header.regionMatches(true, 0, "Bearer ", 0, 7) ? header.substring(7).trim() : "";
        if (java.security.MessageDigest.isEqual(given.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                key.get().strip().getBytes(java.nio.charset.StandardCharsets.UTF_8))) {
            ctx.next();
        } else {
            ctx.response().putHeader("WWW-Authenticate", "Bearer");
            send(ctx.response(), 401, errorJson(401, "missing or wrong API key", null));
        }
    }

    /** Parses the body on a worker, then answers with JSON (Uni or plain object) or an SSE stream (Multi). */
    private void json(RoutingContext ctx, Function<JsonNode, Object> handler) {
        HttpServerResponse response = ctx.response();
        Uni.createFrom().item(() -> {
                    JsonNode b;
                    try {
                        b = JSON.readTree(ctx.body().asString());
                    } catch (Exception e) {
                        throw ApiException.badRequest("the body is not valid JSON: " + e.getMessage(), null);
                    }
                    if (b == null || !b.isObject()) {
                        throw ApiException.badRequest("the body must be a JSON object", null);
                    }
                    JsonNode model = b.get("model");
                    if (model != null && !model.isNull() && !model.asText().equals(service.servedName())) {
                        throw ApiException.badRequest("the model '" + model.asText() + "' does not exist; this server serves '" + service.servedName() + "'", "model");
                    }
                    return handler.apply(b);
                })
                .runSubscriptionOn(Infrastructure.getDefaultWorkerPool())
                .subscribe().with(result -> {
                    if (result instanceof Multi<?> multi) {
                        stream(response, multi);
                    } else if (result instanceof Uni<?> uni) {
                        Cancellable c = uni.subscribe().with(r -> send(response, 200, (JsonNode) r), err -> fail(response, err));
                        response.closeHandler(v -> c.cancel());
                    } else {
                        send(response, 200, (JsonNode) result);
                    }
                }, err -> fail(response, err));
    }

    private static void stream(HttpServerResponse response, Multi<?> sse) {
        response.setStatusCode(200).setChunked(true).putHeader("Content-Type", "text/event-stream").putHeader("Cache-Control", "no-cache");
        Cancellable c = sse.subscribe().with(
                item -> {
                    if (!response.closed()) {
                        response.write((String) item);
                    }
                },
                err -> {
                    if (!response.closed()) {
                        ObjectNode e = errorJson(500, err.getMessage(), null);
                        response.write("data: " + e + "\n\n");
                        response.end();
                    }
                },
                () -> {
                    if (!response.closed()) {
                        response.end();
                    }
                });
        response.closeHandler(v -> c.cancel()); // the client went away: cancel, which frees the request's KV blocks
    }

    static void send(HttpServerResponse response, int status, JsonNode body) {
        if (!response.closed() && !response.ended()) {
            response.setStatusCode(status).putHeader("Content-Type", "application/json").end(body.toString());
        }
    }

    static void fail(HttpServerResponse response, Throwable err) {
        if (err instanceof EngineBusyException busy) { // the waiting bound, checked where requests enter the engine
            response.putHeader("Retry-After", "1");
            ObjectNode r = JSON.createObjectNode();
            r.putObject("error").put("message", busy.getMessage()).put("type", "requests").putNull("param").put("code", "rate_limit_exceeded");
            send(response, 429, r);
        } else if (err instanceof ApiException api) {
            send(response, api.status, errorJson(api.status, api.getMessage(), api.param));
        } else if (err instanceof IllegalArgumentException bad) {
            send(response, 400, errorJson(400, bad.getMessage(), null));
        } else {
            Log.error("request failed", err);
            send(response, 500, errorJson(500, String.valueOf(err.getMessage()), null));
        }
    }

    static ObjectNode errorJson(int status, String message, String param) {
        ObjectNode r = JSON.createObjectNode();
        ObjectNode e = r.putObject("error");
        e.put("message", message).put("type", status >= 500 ? "server_error" : "invalid_request_error").put("param", param).put("code", status);
        return r;
    }
}
