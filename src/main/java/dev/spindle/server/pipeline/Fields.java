package dev.spindle.server.pipeline;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Typed reads of request fields: a field of the wrong type or out of range is a 400 that
 * names it (with its path, e.g. {@code messages[2].content}); an absent or null field gives
 * the default.
 */
public final class Fields {
    private Fields() {
    }

    public static JsonNode get(JsonNode body, String field) {
        JsonNode v = body.get(field);
        return v == null || v.isNull() ? null : v;
    }

    public static double number(JsonNode body, String field, double dflt, double min, double max) {
        JsonNode v = get(body, field);
        if (v == null) {
            return dflt;
        }
        if (!v.isNumber()) {
            throw ApiException.badRequest(field + " must be a number, got " + v, field);
        }
        double d = v.asDouble();
        if (!(d >= min && d <= max)) {
            throw ApiException.badRequest(field + " must be between " + fmt(min) + " and " + fmt(max) + ", got " + v, field);
        }
        return d;
    }

    public static long integer(JsonNode body, String field, long dflt, long min, long max) {
        return integerValue(body.get(field), field, dflt, min, max);
    }

    /** A value that must be an integer in [min, max]; {@code path} names it in the error. */
    public static long integerValue(JsonNode v, String path, long dflt, long min, long max) {
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isNumber() || !(v.isIntegralNumber() ? v.canConvertToLong() : v.asDouble() == Math.rint(v.asDouble()) && Math.abs(v.asDouble()) < 9e15)) {
            throw ApiException.badRequest(path + " must be an integer, got " + v, path);
        }
        long x = v.asLong();
        if (x < min || x > max) {
            throw ApiException.badRequest(path + " must be between " + min + " and " + max + ", got " + v, path);
        }
        return x;
    }

    public static boolean bool(JsonNode body, String field, boolean dflt) {
        JsonNode v = get(body, field);
        if (v == null) {
            return dflt;
        }
        if (!v.isBoolean()) {
            throw ApiException.badRequest(field + " must be true or false, got " + v, field);
        }
        return v.asBoolean();
    }

    public static String string(JsonNode body, String field, String dflt) {
        JsonNode v = get(body, field);
        if (v == null) {
            return dflt;
        }
        if (!v.isTextual()) {
            throw ApiException.badRequest(field + " must be a string, got " + v, field);
        }
        return v.asText();
    }

    /** An object field, or null when absent. */
    public static JsonNode object(JsonNode body, String field) {
        JsonNode v = get(body, field);
        if (v != null && !v.isObject()) {
            throw ApiException.badRequest(field + " must be an object, got " + v, field);
        }
        return v;
    }

    /** A list field, or null when absent. */
    public static JsonNode array(JsonNode body, String field) {
        JsonNode v = get(body, field);
        if (v != null && !v.isArray()) {
            throw ApiException.badRequest(field + " must be a list, got " + v, field);
        }
        return v;
    }

    private static String fmt(double d) {
        return d == Math.rint(d) && Math.abs(d) < 1e15 ? String.valueOf((long) d) : String.valueOf(d);
    }
}
