package dev.spindle.server.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.engine.EngineBusyException;
import dev.spindle.server.ApiRoutes;
import dev.spindle.server.ModelService;
import dev.spindle.server.pipeline.ApiException;
import dev.spindle.server.pipeline.Fields;
import io.quarkus.logging.Log;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import io.smallrye.mutiny.subscription.Cancellable;
import io.vertx.core.http.ServerWebSocket;

import java.util.ArrayDeque;
import java.util.Queue;

import static dev.spindle.server.pipeline.Json.JSON;

/**
 * The Responses API's WebSocket transport ({@code GET /v1/responses} upgraded): each text frame the
 * client sends is a request, {@code {"type": "response.create", ...the body's fields...}}; the server
 * answers with the streamed events of {@code POST /v1/responses}, one JSON text frame each, ending with
 * {@code response.completed} (or {@code .incomplete}, {@code .failed}). Requests on one connection run
 * one after another, in order. The connection keeps its last response's conversation, so a follow-up
 * names it by {@code previous_response_id} and sends only the new items, stored or not.
 * {@code generate: false} checks the request and keeps its conversation without generating
 * ({@link Responses#warmUp}). A bad request answers an {@code error} event (with the HTTP status it
 * would have had) and the connection goes on; closing it cancels the request in flight.
 */
public final class ResponsesSocket {
    private final ServerWebSocket ws;
    private final Responses responses;
    private final ModelService service;
    private final Queue<String> pending = new ArrayDeque<>(); // guarded by this
    private boolean busy;
    private Cancellable inFlight;
    private volatile String lastId;
    private volatile ArrayNode lastConversation;

    private ResponsesSocket(ServerWebSocket ws, Responses responses, ModelService service) {
        this.ws = ws;
        this.responses = responses;
        this.service = service;
    }

    public static void serve(ServerWebSocket ws, Responses responses, ModelService service) {
        ResponsesSocket s = new ResponsesSocket(ws, responses, service);
        ws.textMessageHandler(s::received);
        ws.binaryMessageHandler(b -> s.error(400, "this transport takes text frames holding JSON", null));
        ws.closeHandler(v -> {
            if (s.inFlight != null) {
                s.inFlight.cancel(); // frees the request's KV blocks
            }
        });
    }

    private synchronized void received(String text) {
        pending.add(text);
        next();
    }

    /** Starts the next request once the one before it has ended (event loop). */
    private synchronized void next() {
        if (busy || pending.isEmpty() || ws.isClosed()) {
            return;
        }
        busy = true;
        String text = pending.poll();
        Uni.createFrom().item(() -> start(text)).runSubscriptionOn(Infrastructure.getDefaultWorkerPool()).subscribe().with(
                run -> run.run(), err -> {
                    failed(err);
                    ended();
                });
    }

    private synchronized void ended() {
        busy = false;
        inFlight = null;
        next();
    }

    /** Parses and prepares one request (on a worker); what it returns streams its events. */
    private Runnable start(String text) {
        JsonNode msg;
        try {
            msg = JSON.readTree(text);
        } catch (Exception e) {
            throw ApiException.badRequest("the frame is not valid JSON: " + e.getMessage(), null);
        }
        if (msg == null || !msg.isObject() || !"response.create".equals(msg.path("type").asText())) {
            throw ApiException.badRequest("a frame must be {\"type\": \"response.create\", ...the request's fields...}", "type");
        }
        ObjectNode body = ((ObjectNode) msg).deepCopy();
        body.remove("type");
        boolean generate = Fields.bool(body, "generate", true);
        body.remove("generate");
        JsonNode model = body.get("model");
        if (model != null && !model.isNull() && !model.asText().equals(service.servedName())) {
            throw ApiException.badRequest("the model '" + model.asText() + "' does not exist; this server serves '" + service.servedName() + "'", "model");
        }
        body.put("stream", true);
        Responses.Prepared p = responses.prepare(body, id -> id.equals(lastId) ? lastConversation : null);
        if (!generate) {
            return () -> {
                for (ObjectNode e : responses.warmUp(p)) {
                    ws.writeTextMessage(e.toString());
                }
                keep(p.id(), p.request().messages(), JSON.createArrayNode());
                ended();
            };
        }
        Multi<String> frames = responses.stream(p);
        return () -> inFlight = frames.subscribe().with(frame -> {
            String data = frame.substring(frame.indexOf("data: ") + 6).strip();
            if (data.equals("[DONE]") || ws.isClosed()) {
                return;
            }
            ws.writeTextMessage(data);
            if (data.contains("\"type\":\"response.completed\"") || data.contains("\"type\":\"response.incomplete\"")) {
                try {
                    keep(p.id(), p.request().messages(), JSON.readTree(data).path("response").path("output"));
                } catch (Exception e) {
                    Log.warn("responses socket: could not keep the conversation", e);
                }
            }
        }, err -> {
            failed(err);
            ended();
        }, this::ended);
    }

    /** Keeps a response's conversation (its input and its output as chat messages) for a follow-up on this connection. */
    private void keep(String id, ArrayNode messages, JsonNode output) {
        ArrayNode all = messages.deepCopy();
        all.addAll(Responses.messagesOf(output));
        lastConversation = all;
        lastId = id;
    }

    private void failed(Throwable err) {
        if (err instanceof EngineBusyException busy) {
            error(429, busy.getMessage(), null);
        } else if (err instanceof ApiException api) {
            error(api.status, api.getMessage(), api.param);
        } else {
            Log.error("responses socket: request failed", err);
            error(500, String.valueOf(err.getMessage()), null);
        }
    }

    /** An error event: the error as the HTTP API would give it, with its status. */
    private void error(int status, String message, String param) {
        if (ws.isClosed()) {
            return;
        }
        ObjectNode e = JSON.createObjectNode().put("type", "error").put("status", status);
        ObjectNode inner = ApiRoutes.Dialect.OPENAI.error(status, message, param).with("error");
        e.set("error", inner);
        e.put("code", inner.path("code").asText()).put("message", message);
        e.set("param", param == null ? JSON.nullNode() : JSON.getNodeFactory().textNode(param));
        e.put("sequence_number", 0);
        ws.writeTextMessage(e.toString());
    }
}
