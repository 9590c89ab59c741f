package dev.spindle.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.engine.EngineBusyException;
import dev.spindle.server.anthropic.Messages;
import dev.spindle.server.openai.ChatCompletions;
import dev.spindle.server.openai.Compaction;
import dev.spindle.server.openai.Completions;
import dev.spindle.server.openai.Responses;
import dev.spindle.server.openai.ResponsesSocket;
import dev.spindle.server.pipeline.ApiException;
import dev.spindle.server.pipeline.ChatMessages;
import dev.spindle.server.pipeline.ChatPipeline;
import dev.spindle.server.pipeline.ChatRequest;
import dev.spindle.server.pipeline.Fields;
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

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * The OpenAI-compatible HTTP surface, on Vert.x routes so that streaming answers with
 * SSE whatever the client's Accept header says (the npm client sends application/json
 * even when streaming). Request parsing, template rendering and tokenization run on a
 * worker, never on the event loop; tokens arrive as a Mutiny stream from the engine.
 */
@ApplicationScoped
public class ApiRoutes {
    /** The error shape of each API: OpenAI's {@code {"error": {...}}} or Anthropic's {@code {"type": "error", "error": {...}}}. */
    public enum Dialect {
        OPENAI, ANTHROPIC;

        public ObjectNode error(int status, String message, String param) {
            return error(status, message, param, null);
        }

        /** @param errorCode a reason clients act on: Anthropic's {@code error.details.error_code} (null: none) */
        public ObjectNode error(int status, String message, String param, String errorCode) {
            ObjectNode r = JSON.createObjectNode();
            if (this == ANTHROPIC) {
                r.put("type", "error");
                ObjectNode e = r.putObject("error").put("type", anthropicType(status)).put("message", message);
                if (errorCode != null) {
                    e.putObject("details").put("error_code", errorCode);
                }
                return r;
            }
            ObjectNode e = r.putObject("error");
            e.put("message", message).put("type", status >= 500 ? "server_error" : status == 404 ? "not_found_error" : "invalid_request_error")
                    .put("param", param).put("code", openAiCode(status));
            return r;
        }

        /** OpenAI's error code: a string (the Open Responses specification types it so), named for the status. */
        static String openAiCode(int status) {
            return switch (status) {
                case 400 -> "invalid_request";
                case 401 -> "invalid_api_key";
                case 403 -> "forbidden";
                case 404 -> "not_found";
                case 405 -> "method_not_allowed";
                case 413 -> "request_too_large";
                case 415 -> "unsupported_media_type";
                case 429 -> "rate_limit_exceeded";
                case 503 -> "model_not_ready";
                default -> status >= 500 ? "server_error" : "http_" + status;
            };
        }

        private static String anthropicType(int status) {
            return switch (status) {
                case 400, 405, 415 -> "invalid_request_error";
                case 401 -> "authentication_error";
                case 403 -> "permission_error";
                case 404 -> "not_found_error";
                case 413 -> "request_too_large";
                case 429 -> "rate_limit_error";
                case 503, 529 -> "overloaded_error";
                default -> "api_error";
            };
        }

        /** The dialect of a request path: Anthropic's under /v1/messages, OpenAI's elsewhere. */
        static Dialect of(String path) {
            return path != null && (path.equals("/v1/messages") || path.startsWith("/v1/messages/")) ? ANTHROPIC : OPENAI;
        }
    }

    /** The largest request body accepted (a larger one is a 413 in the API's shape). */
    static final long BODY_LIMIT = 32L << 20;
    private final ModelService service;
    private final ChatPipeline pipeline;
    private final ChatCompletions chat;
    private final Completions completions;
    private final Responses responses;
    private final Compaction compaction;
    private final Messages messages;
    private final long startedAt = System.currentTimeMillis() / 1000;

    public ApiRoutes(ModelService service, ChatPipeline pipeline, ChatCompletions chat, Completions completions, Responses responses,
                     Compaction compaction, Messages messages) {
        this.service = service;
        this.pipeline = pipeline;
        this.chat = chat;
        this.completions = completions;
        this.responses = responses;
        this.compaction = compaction;
        this.messages = messages;
    }

    void routes(@Observes Router router) {
        BodyHandler body = BodyHandler.create().setBodyLimit(BODY_LIMIT);
        for (String path : List.of("/v1/*", "/tokenize", "/detokenize")) {
            router.route(path).order(-3).handler(ApiRoutes::limitBody);
            router.route(path).order(-2).handler(this::requireLoaded);
            router.route(path).order(-1).handler(this::authorize);
            // a body that grows past the limit while it is read (no Content-Length): BodyHandler fails the request with 413
            router.route(path).failureHandler(ctx -> {
                int status = ctx.statusCode() > 0 ? ctx.statusCode() : 500;
                if (status == 413) {
                    send(ctx.response(), 413, Dialect.of(ctx.request().path()).error(413, tooLarge(), null));
                } else {
                    ctx.next();
                }
            });
        }
        router.post("/v1/chat/completions").handler(body).handler(ctx -> json(ctx, Dialect.OPENAI, b -> {
            ChatRequest p = pipeline.prepare(b);
            return p.gen().stream() ? chat.stream(p) : chat.complete(p);
        }));
        router.post("/v1/completions").handler(body).handler(ctx -> json(ctx, Dialect.OPENAI, b -> {
            Completions.Prepared p = completions.prepare(b);
            return p.gen().stream() ? completions.stream(p) : completions.complete(p);
        }));
        router.post("/v1/responses").handler(body).handler(ctx -> json(ctx, Dialect.OPENAI, b -> {
            Responses.Prepared p = responses.prepare(b);
            return p.stream() ? responses.stream(p) : responses.complete(p);
        }));
        router.post("/v1/responses/compact").handler(body).handler(ctx -> json(ctx, Dialect.OPENAI, b -> compaction.complete(compaction.prepare(b))));
        router.get("/v1/responses").handler(ctx -> { // the WebSocket transport
            if (!"websocket".equalsIgnoreCase(ctx.request().getHeader("Upgrade"))) {
                ctx.next();
                return;
            }
            ctx.request().toWebSocket().onSuccess(ws -> ResponsesSocket.serve(ws, responses, service))
                    .onFailure(err -> send(ctx.response(), 400, Dialect.OPENAI.error(400, "the WebSocket upgrade failed: " + err.getMessage(), null)));
        });
        router.get("/v1/responses/:id").handler(ctx -> answer(ctx, Dialect.OPENAI, () -> responses.get(ctx.pathParam("id"))));
        router.delete("/v1/responses/:id").handler(ctx -> answer(ctx, Dialect.OPENAI, () -> responses.delete(ctx.pathParam("id"))));
        router.post("/v1/messages").handler(body).handler(ctx -> json(ctx, Dialect.ANTHROPIC, b -> {
            var p = messages.prepare(b);
            return p.stream() ? messages.stream(p) : messages.complete(p);
        }));
        router.post("/v1/messages/count_tokens").handler(body).handler(ctx -> json(ctx, Dialect.ANTHROPIC, messages::countTokens));
        router.get("/v1/models").handler(ctx -> {
            ObjectNode r = JSON.createObjectNode().put("object", "list");
            r.putArray("data").add(modelJson());
            send(ctx.response(), 200, r);
        });
        router.get("/v1/models/:id").handler(ctx -> answer(ctx, Dialect.OPENAI, () -> {
            if (!ctx.pathParam("id").equals(service.servedName())) {
                throw new ApiException(404, "the model '" + ctx.pathParam("id") + "' does not exist; this server serves '" + service.servedName() + "'", "model");
            }
            return modelJson();
        }));
        router.post("/tokenize").handler(body).handler(ctx -> json(ctx, Dialect.OPENAI, this::tokenize));
        router.post("/detokenize").handler(body).handler(ctx -> json(ctx, Dialect.OPENAI, this::detokenize));
        // a known path asked with another method: 405 with the methods it takes
        Map<String, String> allowed = new java.util.LinkedHashMap<>();
        allowed.put("/v1/chat/completions", "POST");
        allowed.put("/v1/completions", "POST");
        allowed.put("/v1/responses", "POST, GET"); // GET: the WebSocket transport
        allowed.put("/v1/responses/compact", "POST");
        allowed.put("/v1/responses/:id", "GET, DELETE");
        allowed.put("/v1/messages", "POST");
        allowed.put("/v1/messages/count_tokens", "POST");
        allowed.put("/v1/models", "GET");
        allowed.put("/v1/models/:id", "GET");
        allowed.put("/tokenize", "POST");
        allowed.put("/detokenize", "POST");
        allowed.forEach((path, methods) -> router.route(path).handler(ctx -> {
            if (ctx.request().method() == io.vertx.core.http.HttpMethod.OPTIONS) {
                ctx.next(); // a CORS preflight is Quarkus' filter's to answer
                return;
            }
            ctx.response().putHeader("Allow", methods);
            send(ctx.response(), 405, Dialect.of(ctx.request().path()).error(405, "the method " + ctx.request().method() + " is not allowed on "
                    + ctx.request().path() + "; it takes " + methods, null));
        }));
        // what no route answers, in the API's own shape (Vert.x would answer with an HTML page)
        for (int status : new int[]{404, 405, 413}) {
            router.errorHandler(status, ctx -> {
                String path = ctx.request().path();
                if (path.startsWith("/q/")) {
                    ctx.next(); // Quarkus's own endpoints keep their answers
                    return;
                }
                String message = switch (status) {
                    case 404 -> "no route " + ctx.request().method() + " " + path + " on this server";
                    case 405 -> "the method " + ctx.request().method() + " is not allowed on " + path;
                    default -> tooLarge();
                };
                send(ctx.response(), status, Dialect.of(path).error(status, message, null));
            });
        }
    }

    private static String tooLarge() {
        return "the request body is larger than " + (BODY_LIMIT >> 20) + " MiB";
    }

    /** A declared Content-Length over the limit is refused before the body is read (at once, with Expect: 100-continue). */
    private static void limitBody(RoutingContext ctx) {
        String length = ctx.request().getHeader("Content-Length");
        long declared;
        try {
            declared = length == null ? -1 : Long.parseLong(length.trim());
        } catch (NumberFormatException e) {
            declared = -1;
        }
        if (declared > BODY_LIMIT) {
            ctx.response().putHeader("Connection", "close");
            send(ctx.response(), 413, Dialect.of(ctx.request().path()).error(413, tooLarge(), null));
            return;
        }
        ctx.next();
    }

    private ObjectNode modelJson() {
        ObjectNode m = JSON.createObjectNode();
        m.put("id", service.servedName()).put("object", "model").put("created", startedAt).put("owned_by", "spindle")
                .put("max_model_len", service.modelConfig().maxPositions());
        // Anthropic's model object fields, for clients of /v1/models that speak Messages
        m.put("type", "model").put("display_name", service.servedName());
        // Spindle's own: the weights' format, the KV cache's dtype, and the KL measured for a lossy configuration
        m.set("spindle", JSON.valueToTree(service.disclosure()));
        return m;
    }

    /** Answers a GET/DELETE from a worker: the handler's JSON, or its error in the API's shape. */
    private void answer(RoutingContext ctx, Dialect dialect, java.util.function.Supplier<JsonNode> handler) {
        HttpServerResponse response = ctx.response();
        Uni.createFrom().item(handler::get).runSubscriptionOn(Infrastructure.getDefaultWorkerPool())
                .subscribe().with(r -> send(response, 200, r), err -> fail(response, err, dialect));
    }

    private Object tokenize(JsonNode b) {
        String text;
        boolean chat = Fields.get(b, "messages") != null;
        if (chat) {
            List<?> messages = ChatMessages.parse(b.get("messages"), "messages");
            List<?> tools = ChatMessages.tools(b.get("tools"), "tools");
            Map<String, Object> kwargs = ChatMessages.templateKwargs(b);
            kwargs.put("add_generation_prompt", Fields.bool(b, "add_generation_prompt", true));
            text = this.pipeline.render(messages, tools, kwargs);
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
        send(ctx.response(), 503, Dialect.of(ctx.request().path()).error(503, "the model " + service.servedName() + " is still loading; retry shortly", null));
    }

    /**
     * With spindle.api-key set: a bearer token, or an {@code x-api-key} header (Anthropic's clients),
     * that matches it (compared in constant time), else 401.
     */
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
        if (given.isEmpty() && ctx.request().getHeader("x-api-key") != null) {
            given = ctx.request().getHeader("x-api-key").trim();
        }
        if (java.security.MessageDigest.isEqual(given.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                key.get().strip().getBytes(java.nio.charset.StandardCharsets.UTF_8))) {
            ctx.next();
        } else {
            ctx.response().putHeader("WWW-Authenticate", "Bearer");
            send(ctx.response(), 401, Dialect.of(ctx.request().path()).error(401, "missing or wrong API key", null));
        }
    }

    /** Parses the body on a worker, then answers with JSON (Uni or plain object) or an SSE stream (Multi). */
    private void json(RoutingContext ctx, Dialect dialect, Function<JsonNode, Object> handler) {
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
                        stream(response, multi, dialect);
                    } else if (result instanceof Uni<?> uni) {
                        Cancellable c = uni.subscribe().with(r -> send(response, 200, (JsonNode) r), err -> fail(response, err, dialect));
                        response.closeHandler(v -> c.cancel());
                    } else {
                        send(response, 200, (JsonNode) result);
                    }
                }, err -> fail(response, err, dialect));
    }

    private static void stream(HttpServerResponse response, Multi<?> sse, Dialect dialect) {
        response.setStatusCode(200).setChunked(true).putHeader("Content-Type", "text/event-stream").putHeader("Cache-Control", "no-cache");
        Cancellable c = sse.subscribe().with(
                item -> {
                    if (!response.closed()) {
                        response.write((String) item);
                    }
                },
                err -> {
                    if (!response.closed()) {
                        ObjectNode e = dialect.error(500, String.valueOf(err.getMessage()), null);
                        response.write((dialect == Dialect.ANTHROPIC ? "event: error\n" : "") + "data: " + e + "\n\n");
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

    static void fail(HttpServerResponse response, Throwable err, Dialect dialect) {
        if (err instanceof EngineBusyException busy) { // the waiting bound, checked where requests enter the engine
            response.putHeader("Retry-After", "1");
            ObjectNode r;
            if (dialect == Dialect.OPENAI) {
                r = JSON.createObjectNode();
                r.putObject("error").put("message", busy.getMessage()).put("type", "requests").putNull("param").put("code", "rate_limit_exceeded");
            } else {
                r = dialect.error(429, busy.getMessage(), null);
            }
            send(response, 429, r);
        } else if (err instanceof ApiException api) {
            send(response, api.status, dialect.error(api.status, api.getMessage(), api.param, api.errorCode));
        } else if (err instanceof IllegalArgumentException bad) {
            send(response, 400, dialect.error(400, bad.getMessage(), null));
        } else {
            Log.error("request failed", err);
            send(response, 500, dialect.error(500, String.valueOf(err.getMessage()), null));
        }
    }
}
