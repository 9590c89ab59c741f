package dev.spindle.server;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.InputFormat;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaLocation;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import java.util.List;

/**
 * Validates the Responses API objects the server emits (response objects, output items
 * inside them, streamed SSE events) against this project's JSON Schema encoding of the
 * Open Responses specification, kept under {@code src/test/resources/open-responses/}.
 *
 * <p>The validator (networknt 3.x) works on Jackson 3 trees, so the Jackson 2 nodes the
 * tests hold are handed over as JSON text.
 */
public final class OpenResponsesSchema {

    private static final String BASE = "classpath:open-responses/";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final SchemaRegistry REGISTRY =
            SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);
    private static final Schema RESPONSE = load("response.schema.json");
    private static final Schema EVENT = load("events.schema.json");

    private OpenResponsesSchema() {}

    /** The validation messages for a response object; empty when it is valid. */
    public static List<String> responseErrors(JsonNode response) {
        return errors(RESPONSE, response);
    }

    /** The validation messages for one streamed event (the SSE {@code data} JSON); empty when valid. */
    public static List<String> eventErrors(JsonNode event) {
        return errors(EVENT, event);
    }

    /** Fails with the validation messages and the offending JSON unless the response object is valid. */
    public static void assertResponse(JsonNode response) {
        check("response object", responseErrors(response), response);
    }

    /** Fails with the validation messages and the offending JSON unless the streamed event is valid. */
    public static void assertEvent(JsonNode event) {
        check("streaming event", eventErrors(event), event);
    }

    private static Schema load(String file) {
        Schema schema = REGISTRY.getSchema(SchemaLocation.of(BASE + file));
        schema.initializeValidators(); // resolve every $ref now, so a broken schema fails fast
        return schema;
    }

    private static List<String> errors(Schema schema, JsonNode node) {
        if (node == null) {
            return List.of("no JSON (null node)");
        }
        return schema.validate(text(node), InputFormat.JSON).stream()
                .map(Object::toString)
                .toList();
    }

    private static void check(String what, List<String> errors, JsonNode node) {
        if (errors.isEmpty()) {
            return;
        }
        var message = new StringBuilder()
                .append("Open Responses ").append(what).append(" does not match the spec (")
                .append(errors.size()).append(errors.size() == 1 ? " problem" : " problems").append("):\n");
        errors.forEach(e -> message.append("  - ").append(e).append('\n'));
        message.append("JSON: ").append(pretty(node));
        throw new AssertionError(message.toString());
    }

    private static String text(JsonNode node) {
        try {
            return JSON.writeValueAsString(node);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot serialize " + node, e);
        }
    }

    private static String pretty(JsonNode node) {
        try {
            return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(node);
        } catch (JsonProcessingException e) {
            return String.valueOf(node);
        }
    }
}
