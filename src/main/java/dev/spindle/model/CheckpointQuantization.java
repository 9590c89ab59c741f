package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * How a quantized checkpoint stores its linear layers, from config.json's {@code quantization_config} (or ModelOpt's
 * {@code hf_quant_config.json} beside it). fp8 E4M3 weights with fp32 (or bf16) scales that multiply them load as they are
 * in two layouts, NVFP4 weights ({@link Nvfp4Matrix}) in two more, and EXL3 ({@link Exl3Checkpoints}):
 * <ul>
 *   <li>{@code quant_method: "fp8"} (HF transformers' FP8 and AutoFP8): with {@code weight_block_size: [r, c]} one scale a block,
 *       named {@code <layer>.weight_scale_inv}; without it one scale a tensor, {@code <layer>.weight_scale}. {@code fmt} must be
 *       e4m3 where given.</li>
 *   <li>{@code quant_method: "compressed-tensors"} (llm-compressor's FP8 and FP8-Dynamic): one config group of 8-bit float
 *       weights, strategy {@code tensor}, {@code channel} or {@code block}, scales named {@code <layer>.weight_scale}.</li>
 *   <li>compressed-tensors {@code nvfp4-pack-quantized} (llm-compressor's NVFP4 and NVFP4A16): 4-bit float weights, strategy
 *       {@code tensor_group}, group size 16: {@code weight_packed} U8, {@code weight_scale} E4M3, {@code weight_global_scale} F32
 *       (which the group scales are divided by).</li>
 *   <li>{@code quant_method: "modelopt"}, {@code quant_algo} {@code NVFP4} or {@code W4A16_NVFP4} (NVIDIA ModelOpt's export):
 *       {@code weight} U8, {@code weight_scale} E4M3, {@code weight_scale_2} F32 (which multiplies them); {@code quant_algo}
 *       {@code FP8} ({@code weight} F8_E4M3, one F32 {@code weight_scale} a tensor) or {@code FP8_PER_CHANNEL_PER_TOKEN} (one an
 *       output row), the activation scales ({@code input_scale}) unused.</li>
 *   <li>{@code quant_method: "exl3"} (exllamav3's converter): trellis-coded layers, {@link Exl3Checkpoints}.</li>
 * </ul>
 * Activation settings ({@code activation_scheme}, {@code input_activations}) are read but not applied: Spindle multiplies bf16
 * activations by the fp8 weights (weight-only), so a static {@code input_scale} is left unused and the start log says so.
 * Layers named in {@code modules_to_not_convert}, {@code ignored_layers} or {@code ignore} stay as stored. Anything else is refused
 * by field.
 */
public record CheckpointQuantization(String method, int blockRows, int blockCols, String scaleSuffix, boolean staticActivations,
                                     List<String> notConverted, Nvfp4 nvfp4, Exl3Checkpoints.Config exl3) {
    /** blockRows / blockCols of one scale for the whole tensor. */
    public static final int WHOLE = Integer.MAX_VALUE;

    /**
     * An NVFP4 layout: the suffix of a layer's packed codes (for its weight named {@code <layer>.weight}), of its tensor scale,
     * and whether the group scales are divided by that (compressed-tensors) or multiplied (ModelOpt).
     */
    public record Nvfp4(String dataSuffix, String globalSuffix, boolean divides) {
    }

    CheckpointQuantization(String method, int blockRows, int blockCols, String scaleSuffix, boolean staticActivations, List<String> notConverted) {
        this(method, blockRows, blockCols, scaleSuffix, staticActivations, notConverted, null, null);
    }

    CheckpointQuantization(String method, int blockRows, int blockCols, String scaleSuffix, boolean staticActivations, List<String> notConverted,
                           Nvfp4 nvfp4) {
        this(method, blockRows, blockCols, scaleSuffix, staticActivations, notConverted, nvfp4, null);
    }

    /** An EXL3 checkpoint ({@link Exl3Checkpoints}). */
    static CheckpointQuantization exl3(Exl3Checkpoints.Config config) {
        return new CheckpointQuantization("exl3", 16, 16, "trellis", false, List.of(), null, config);
    }

    /**
     * The quantization of the checkpoint whose config.json this is, or null where it has none: its quantization_config, else
     * ModelOpt's hf_quant_config.json in the same folder.
     */
    public static CheckpointQuantization read(java.nio.file.Path configJson) {
        java.nio.file.Path file = configJson;
        try {
            com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
            CheckpointQuantization q = parse(json.readTree(configJson.toFile()));
            java.nio.file.Path hf = configJson.resolveSibling("hf_quant_config.json");
            if (q == null && java.nio.file.Files.isRegularFile(hf)) {
                file = hf;
                return modelOptExport(json.readTree(hf.toFile()));
            }
            return q;
        } catch (java.io.IOException e) {
            throw new ModelLoadException(file + ": not valid JSON: " + e.getMessage(), e);
        } catch (ModelLoadException e) {
            throw new ModelLoadException(file + ": " + e.getMessage().replaceFirst("^config: ", ""), e);
        }
    }

    /** ModelOpt's hf_quant_config.json: {@code quantization} {@code {quant_algo, group_size, exclude_modules}}. */
    static CheckpointQuantization modelOptExport(JsonNode root) {
        JsonNode q = root.path("quantization");
        if (!q.isObject()) {
            throw new ModelLoadException("config: field 'quantization' must be an object (ModelOpt's hf_quant_config.json), got " + q);
        }
        return modelOpt(q.path("quant_algo").asText(""), q.path("group_size"), names(q, "exclude_modules"), "quantization");
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
            case "exl3" -> exl3(Exl3Checkpoints.parse(q)); // exllamav3: trellis-coded layers (Exl3Matrix)
            case "modelopt" -> modelOpt(q.path("quant_algo").asText(""), q.path("group_size"), names(q, "ignore", "exclude_modules"), "quantization_config");
            default -> throw new ModelLoadException("config: field 'quantization_config.quant_method' = '" + method + "' is not a format Spindle"
                    + " reads (it reads fp8, compressed-tensors fp8 and nvfp4, ModelOpt nvfp4 and exllamav3's exl3 checkpoints; a bf16 release can be quantized"
                    + " at load with --quantization fp8)");
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
        if (w.path("num_bits").asInt() == 4 && w.path("type").asText().equals("float")) {
            return compressedTensorsNvfp4(q, g, w, where);
        }
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

    private static CheckpointQuantization compressedTensorsNvfp4(JsonNode q, JsonNode g, JsonNode w, String where) {
        String format = q.path("format").asText(g.path("format").asText(""));
        if (!format.equals("nvfp4-pack-quantized")) {
            throw new ModelLoadException("config: field 'quantization_config.format' = '" + format + "': 4-bit float weights are read in the"
                    + " nvfp4-pack-quantized format");
        }
        String strategy = w.path("strategy").asText("");
        if (!strategy.equals("tensor_group") || w.path("group_size").asInt() != Nvfp4Matrix.GROUP) {
            throw new ModelLoadException("config: field '" + where + "' = " + w + " (NVFP4: strategy tensor_group, group_size 16)");
        }
        if (w.has("symmetric") && !w.path("symmetric").asBoolean(true)) {
            throw new ModelLoadException("config: field '" + where + ".symmetric' = false: NVFP4 has no zero points");
        }
        JsonNode in = g.path("input_activations");
        return new CheckpointQuantization("compressed-tensors", 1, Nvfp4Matrix.GROUP, "weight_scale", in.isObject(), names(q, "ignore"),
                new Nvfp4("weight_packed", "weight_global_scale", true));
    }

    private static CheckpointQuantization modelOpt(String algo, JsonNode groupSize, List<String> exclude, String where) {
        if (algo.equals("FP8") || algo.equals("FP8_PER_CHANNEL_PER_TOKEN")) {
            // E4M3 weights times weight_scale: one a tensor (FP8), or one an output row (per channel); input_scale unused
            boolean perChannel = algo.equals("FP8_PER_CHANNEL_PER_TOKEN");
            return new CheckpointQuantization("modelopt", perChannel ? 1 : WHOLE, WHOLE, "weight_scale", !perChannel, exclude);
        }
        if (!algo.equals("NVFP4") && !algo.equals("W4A16_NVFP4")) {
            throw new ModelLoadException("config: field '" + where + ".quant_algo' = '" + algo + "' is not a ModelOpt format Spindle reads"
                    + " (FP8, FP8_PER_CHANNEL_PER_TOKEN, NVFP4, W4A16_NVFP4)");
        }
        if (!groupSize.isMissingNode() && groupSize.asInt() != Nvfp4Matrix.GROUP) {
            throw new ModelLoadException("config: field '" + where + ".group_size' = " + groupSize + " (NVFP4's groups are 16)");
        }
        return new CheckpointQuantization("modelopt", 1, Nvfp4Matrix.GROUP, "weight_scale", algo.equals("NVFP4"), exclude,
                new Nvfp4("weight", "weight_scale_2", false));
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
        return name.endsWith(".input_scale") || name.endsWith(".input_global_scale");
    }

    /** The weight ({@code <layer>.weight}) whose stored part tensor {@code name} is (codes, scales, tensor scale), or null. */
    public String partOf(String name) {
        List<String> suffixes = exl3 != null ? Exl3Checkpoints.PARTS
                : nvfp4 == null ? List.of(scaleSuffix) : List.of(scaleSuffix, nvfp4.dataSuffix(), nvfp4.globalSuffix());
        for (String suffix : suffixes) {
            if (name.endsWith("." + suffix)) {
                return name.substring(0, name.length() - suffix.length()) + "weight";
            }
        }
        return null;
    }

    /** How the start log names it. */
    public String describe() {
        if (exl3 != null) {
            return exl3.describe();
        }
        if (nvfp4 != null) {
            return method + " nvfp4 checkpoint (e2m1 values, an e4m3 scale a group of 16 and a tensor scale" + (staticActivations
                    ? "; its activation quantization unused: activations stay bf16" : "") + ")";
        }
        String scales = blockRows == WHOLE && blockCols == WHOLE ? "one scale a tensor" : blockRows == 1 && blockCols == WHOLE ? "one scale an output row"
                : "one scale a " + blockRows + "x" + blockCols + " block";
        return method + " fp8-e4m3 checkpoint (" + scales + (staticActivations ? "; its static activation scales unused: activations stay bf16" : "") + ")";
    }
}
