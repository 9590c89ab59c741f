package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Reads a Hugging Face config.json into a {@link ModelConfig}, refusing (by field
 * name) anything that would change the math in a way Spindle does not implement.
 */
public final class ConfigParser {
    /**
     * Switches in Nanbeige's research code that change the forward pass. Any of them
     * turned on is refused; fragments also catch spelling variants (e.g. "mhc").
     */
    private static final List<String> REFUSED_FEATURE_FRAGMENTS = List.of(
            "loop_split", "loop_middle_layers", "loop_share_kv", "share_kv", "hyper_connection", "mhc",
            "depth_attention", "ngram", "n_gram", "qk_layernorm", "qk_norm", "attention_bias", "mlp_bias");

    private ConfigParser() {
    }

    public static ModelConfig read(Path configJson) {
        if (!Files.isRegularFile(configJson)) {
            throw new ModelLoadException(configJson + ": not found (a model directory needs config.json)");
        }
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(configJson.toFile());
        } catch (IOException e) {
            throw new ModelLoadException(configJson + ": not valid JSON: " + e.getMessage(), e);
        }
        if (root == null || !root.isObject()) {
            throw new ModelLoadException(configJson + ": must hold a JSON object");
        }
        try {
            return parse(root);
        } catch (ModelLoadException e) {
            throw new ModelLoadException(configJson + ": " + e.getMessage().replaceFirst("^config: ", ""), e);
        }
    }

    public static ModelConfig parse(JsonNode c) {
        Family family = family(c);
        for (Iterator<Map.Entry<String, JsonNode>> it = c.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            String key = e.getKey().toLowerCase(Locale.ROOT);
            if (REFUSED_FEATURE_FRAGMENTS.stream().anyMatch(key::contains) && isOn(e.getValue())) {
                throw new ModelLoadException("config: field '" + e.getKey() + "' = " + e.getValue()
                        + " turns on a feature Spindle does not implement; refusing rather than serving wrong output");
            }
        }
        String act = text(c, "hidden_act", "silu");
        if (!act.equals("silu")) {
            throw new ModelLoadException("config: field 'hidden_act' = '" + act + "' is not supported (expected 'silu')");
        }
        int hidden = requiredInt(c, "hidden_size");
        int heads = requiredInt(c, "num_attention_heads");
        // without head_dim, hidden / heads (a count of heads that is not positive is refused by ModelConfig, by name)
        int headDim = c.hasNonNull("head_dim") ? requiredInt(c, "head_dim") : heads > 0 ? hidden / heads : 0;
        int numLoops = 1;
        boolean skipFinal = false;
        if (family == Family.NANBEIGE_LOOPED) {
            JsonNode weights = c.get("loop_loss_weights");
            int fromWeights = weights != null && weights.isArray() && !weights.isEmpty() ? weights.size() + 1 : -1;
            numLoops = c.hasNonNull("num_loops") ? requiredInt(c, "num_loops") : Math.max(fromWeights, 1);
            if (fromWeights > 0 && c.hasNonNull("num_loops") && fromWeights != numLoops) {
                throw new ModelLoadException("config: field 'num_loops' = " + numLoops + " disagrees with loop_loss_weights, which implies "
                        + fromWeights + " loops");
            }
            skipFinal = bool(c, "skip_loop_final_norm", false);
        }
        return new ModelConfig(family, architecture(c), requiredInt(c, "vocab_size"), hidden, requiredInt(c, "intermediate_size"),
                requiredInt(c, "num_hidden_layers"), heads, c.hasNonNull("num_key_value_heads") ? requiredInt(c, "num_key_value_heads") : heads,
                headDim, c.hasNonNull("max_position_embeddings") ? requiredInt(c, "max_position_embeddings") : 4096,
                (float) number(c, "rms_norm_eps", 1e-6), ropeTheta(c), bool(c, "tie_word_embeddings", false), numLoops, skipFinal,
                c.hasNonNull("bos_token_id") ? requiredInt(c, "bos_token_id") : -1, eos(c));
    }

    private static Family family(JsonNode c) {
        String arch = architecture(c);
        String type = text(c, "model_type", null);
        Family byArch = arch == null ? null : Family.byArchitecture(arch).orElseThrow(() -> new ModelLoadException(
                "config: field 'architectures' = ['" + arch + "'] is not supported (expected " + Family.supportedNames() + ")"));
        Family byType = type == null ? null : Family.byModelType(type).orElseThrow(() -> new ModelLoadException(
                "config: field 'model_type' = '" + type + "' is not supported (expected " + Family.supportedNames() + ")"));
        if (byArch == null && byType == null) {
            throw new ModelLoadException("config: needs 'architectures' or 'model_type' (expected " + Family.supportedNames() + ")");
        }
        if (byArch != null && byType != null && byArch != byType) {
            throw new ModelLoadException("config: 'architectures' = ['" + arch + "'] and 'model_type' = '" + type + "' name different families");
        }
        return byArch != null ? byArch : byType;
    }

    private static String architecture(JsonNode c) {
        JsonNode a = c.get("architectures");
        if (a == null || a.isNull()) {
            return null;
        }
        if (!a.isArray() || a.size() != 1 || !a.get(0).isTextual()) {
            throw new ModelLoadException("config: field 'architectures' must be a list of one class name, found " + a);
        }
        return a.get(0).asText();
    }

    static double ropeTheta(JsonNode c) {
        JsonNode scaling = c.get("rope_scaling");
        JsonNode params = c.get("rope_parameters");
        for (String field : new String[]{"rope_scaling", "rope_parameters"}) {
            JsonNode s = field.equals("rope_scaling") ? scaling : params;
            if (s == null || s.isNull()) {
                continue;
            }
            String type = s.hasNonNull("rope_type") ? s.get("rope_type").asText() : s.hasNonNull("type") ? s.get("type").asText() : "?";
            if (!type.equals("default")) {
                throw new ModelLoadException("config: field '" + field + "' asks for rope type '" + type
                        + "', which is not supported yet (only unscaled rotary embeddings: null or {\"rope_type\": \"default\"})");
            }
        }
        if (c.hasNonNull("rope_theta")) {
            return number(c, "rope_theta", 0);
        }
        if (params != null && params.hasNonNull("rope_theta")) {
            return number(params, "rope_theta", 0);
        }
        return 10000.0;
    }

    private static List<Integer> eos(JsonNode c) {
        JsonNode e = c.get("eos_token_id");
        List<Integer> out = new ArrayList<>();
        if (e == null || e.isNull()) {
            return out;
        }
        // each id as written: 2.7, "7" or 2^33 are refused (asInt would read them as 2, 0 and 0)
        for (JsonNode id : e.isArray() ? e : List.of(e)) {
            if (!id.isIntegralNumber() || !id.canConvertToInt()) {
                throw new ModelLoadException("config: field 'eos_token_id' must be an integer or a list of integers, found " + e);
            }
            out.add(id.intValue());
        }
        return out;
    }

    private static boolean isOn(JsonNode v) {
        if (v == null || v.isNull()) {
            return false;
        }
        if (v.isBoolean()) {
            return v.asBoolean();
        }
        if (v.isNumber()) {
            return v.asDouble() != 0;
        }
        if (v.isArray() || v.isObject()) {
            return !v.isEmpty();
        }
        return v.isTextual() && !v.asText().isEmpty() && !v.asText().equalsIgnoreCase("false") && !v.asText().equalsIgnoreCase("none");
    }

    private static int requiredInt(JsonNode c, String field) {
        JsonNode v = c.get(field);
        if (v == null || v.isNull()) {
            throw new ModelLoadException("config: missing required field '" + field + "'");
        }
        if (!v.isIntegralNumber() || !v.canConvertToInt()) {
            throw new ModelLoadException("config: field '" + field + "' must be an integer, found " + v);
        }
        return v.asInt();
    }

    private static double number(JsonNode c, String field, double dflt) {
        JsonNode v = c.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isNumber()) {
            throw new ModelLoadException("config: field '" + field + "' must be a number, found " + v);
        }
        return v.asDouble();
    }

    private static boolean bool(JsonNode c, String field, boolean dflt) {
        JsonNode v = c.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isBoolean()) {
            throw new ModelLoadException("config: field '" + field + "' must be true or false, found " + v);
        }
        return v.asBoolean();
    }

    private static String text(JsonNode c, String field, String dflt) {
        JsonNode v = c.get(field);
        return v == null || v.isNull() ? dflt : v.asText();
    }
}
