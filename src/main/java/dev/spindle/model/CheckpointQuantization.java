package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * How a quantized checkpoint stores its linear layers, from config.json's {@code quantization_config}. Two layouts load
 * as they are, both fp8 E4M3 weights with fp32 (or bf16) scales that multiply them:
 * <ul>
 *   <li>{@code quant_method: "fp8"} (HF transformers' FP8 and AutoFP8): with {@code weight_block_size: [r, c]} one scale a block,
 *       named {@code <layer>.weight_scale_inv}; without it one scale a tensor, {@code <layer>.weight_scale}. {@code fmt} must be
 *       e4m3 where given.</li>
 *   <li>{@code quant_method: "compressed-tensors"} (llm-compressor's FP8 and FP8-Dynamic): one config group of 8-bit float
 *       weights, strategy {@code tensor}, {@code channel} or {@code block}, scales named {@code <layer>.weight_scale}.</li>
 * </ul>
 * Activation settings ({@code activation_scheme}, {@code input_activations}) are read but not applied: Spindle multiplies bf16
 * activations by the fp8 weights (weight-only), so a static {@code input_scale} is left unused and the start log says so.
 * Layers named in {@code modules_to_not_convert}, {@code ignored_layers} or {@code ignore} stay as stored. Anything else is refused
 * by field.
 */
public record CheckpointQuantization(String method, int blockRows, int blockCols, String scaleSuffix, boolean staticActivations,
                                     List<String> notConverted) {
    /** blockRows / blockCols of one scale for the whole tensor. */
    public static final int WHOLE = Integer.MAX_VALUE;

    /** The quantization of the checkpoint whose config.json this is, or null where it has none. */
    public static CheckpointQuantization read(java.nio.file.Path configJson) {
        try {
            return parse(new com.fasterxml.jackson.databind.ObjectMapper().readTree(configJson.toFile()));
        } catch (java.io.IOException e) {
            throw new ModelLoadException(configJson + ": not valid JSON: " + e.getMessage(), e);
        } catch (ModelLoadException e) {
            throw new ModelLoadException(configJson + ": " + e.getMessage().replaceFirst("^config: ", ""), e);
        }
    }

    /** The checkpoint's quantization from config.json's root, or null where it has none. */
    public static CheckpointQuantization parse(JsonNode config) {
        JsonNode q = config.get("quantization_config");
        if (q == null || q.isNull()) {
            return null;
        }
        if (!q.isObject()) {
            throw new ModelLoadException("config: field 'quantization_config' must be an object, got " + q);
        }
        if (MlxCheckpoints.isMlxConfig(q)) {
            return null; // mlx-lm's copy of its 'quantization' (MlxCheckpoints)
        }
        String method = q.path("quant_method").asText("");
        return switch (method) {
            case "fp8" -> fp8(q);
            case "compressed-tensors" -> compressedTensors(q);
            default -> throw new ModelLoadException("config: field 'quantization_config.quant_method' = '" + method + "' is not a format Spindle"
                    + " reads (it reads fp8 and compressed-tensors fp8 checkpoints; a bf16 release can be quantized at load with --quantization fp8)");
        };
    }

    private static CheckpointQuantization fp8(JsonNode q) {
        String fmt = q.path("fmt").asText("e4m3");
        if (!fmt.equals("e4m3")) {
            throw new ModelLoadException("config: field 'quantization_config.fmt' = '" + fmt + "' is not supported (expected e4m3)");
        }
        String act = q.path("activation_scheme").asText("dynamic");
        if (!act.equals("dynamic") && !act.equals("static")) {
            throw new ModelLoadException("config: field 'quantization_config.activation_scheme' = '" + act + "' (expected dynamic or static)");
        }
        List<String> skip = names(q, "modules_to_not_convert", "ignored_layers");
        JsonNode block = q.get("weight_block_size");
        if (block == null || block.isNull()) {
            return new CheckpointQuantization("fp8", WHOLE, WHOLE, "weight_scale", act.equals("static"), skip);
        }
        int[] b = pair(block, "quantization_config.weight_block_size");
        return new CheckpointQuantization("fp8", b[0], b[1], "weight_scale_inv", act.equals("static"), skip);
    }

    private static CheckpointQuantization compressedTensors(JsonNode q) {
        JsonNode groups = q.path("config_groups");
        if (!groups.isObject() || groups.size() != 1) {
            throw new ModelLoadException("config: field 'quantization_config.config_groups' must hold one group (got " + groups.size()
                    + "); Spindle reads one fp8 scheme for every linear layer");
        }
        String groupName = groups.fieldNames().next();
        JsonNode g = groups.get(groupName), w = g.path("weights");
        String where = "quantization_config.config_groups." + groupName + ".weights";
        if (w.path("num_bits").asInt() != 8 || !w.path("type").asText().equals("float")) {
            throw new ModelLoadException("config: field '" + where + "' = " + w + " is not 8-bit float weights (Spindle reads compressed-tensors fp8)");
        }
        if (w.has("symmetric") && !w.path("symmetric").asBoolean(true)) {
            throw new ModelLoadException("config: field '" + where + ".symmetric' = false: fp8 weights with zero points are not supported");
        }
        if (w.path("dynamic").asBoolean(false)) {
            throw new ModelLoadException("config: field '" + where + ".dynamic' = true: weights quantized at run time are not a stored format");
        }
        String strategy = w.path("strategy").asText("tensor").toLowerCase(Locale.ROOT);
        int[] b = switch (strategy) {
            case "tensor" -> new int[]{WHOLE, WHOLE};
            case "channel" -> new int[]{1, WHOLE};
            case "block" -> pair(w.get("block_structure"), where + ".block_structure");
            default -> throw new ModelLoadException("config: field '" + where + ".strategy' = '" + strategy
                    + "' is not supported (expected tensor, channel or block)");
        };
        JsonNode in = g.path("input_activations");
        boolean staticAct = in.isObject() && !in.path("dynamic").asBoolean(true);
        return new CheckpointQuantization("compressed-tensors", b[0], b[1], "weight_scale", staticAct, names(q, "ignore"));
    }

    private static int[] pair(JsonNode a, String field) {
        if (a == null || !a.isArray() || a.size() != 2 || !a.get(0).canConvertToInt() || !a.get(1).canConvertToInt()
                || a.get(0).asInt() < 1 || a.get(1).asInt() < 1) {
            throw new ModelLoadException("config: field '" + field + "' = " + a + " (expected two positive integers)");
        }
        return new int[]{a.get(0).asInt(), a.get(1).asInt()};
    }

    private static List<String> names(JsonNode q, String... fields) {
        List<String> out = new ArrayList<>();
        for (String f : fields) {
            for (JsonNode n : q.path(f)) {
                out.add(n.asText());
            }
        }
        return out;
    }

    /** Whether the layer whose weight is {@code weightName} (e.g. model.layers.0.mlp.down_proj.weight) is stored quantized. */
    public boolean quantizes(String weightName) {
        String module = weightName.endsWith(".weight") ? weightName.substring(0, weightName.length() - ".weight".length()) : weightName;
        for (String n : notConverted) {
            if (n.startsWith("re:")) {
                if (module.matches(n.substring(3))) {
                    return false;
                }
            } else if (module.equals(n) || module.endsWith("." + n) || module.contains("." + n + ".")) {
                return false;
            }
        }
        return true;
    }

    /** The scale tensor of a quantized weight. */
    public String scaleOf(String weightName) {
        return weightName.substring(0, weightName.length() - "weight".length()) + scaleSuffix;
    }

    /** Tensors the checkpoint may carry that weight-only serving leaves unused (static activation scales). */
    public boolean unused(String name) {
        return name.endsWith(".input_scale");
    }

    /** How the start log names it. */
    public String describe() {
        String scales = blockRows == WHOLE && blockCols == WHOLE ? "one scale a tensor" : blockRows == 1 && blockCols == WHOLE ? "one scale an output row"
                : "one scale a " + blockRows + "x" + blockCols + " block";
        return method + " fp8-e4m3 checkpoint (" + scales + (staticActivations ? "; its static activation scales unused: activations stay bf16" : "") + ")";
    }
}
