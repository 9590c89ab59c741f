package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The safetensors of a model directory: {@code model.safetensors}, or the shards that
 * {@code model.safetensors.index.json} names. Every file is mapped and validated; a
 * tensor the index assigns to a shard must be in that shard.
 */
public final class Checkpoint {
    public static final String SINGLE = "model.safetensors";
    public static final String INDEX = "model.safetensors.index.json";

    private final Map<String, TensorInfo> tensors;
    private final Map<Path, SafetensorsFile> files;

    private Checkpoint(Map<String, TensorInfo> tensors, Map<Path, SafetensorsFile> files) {
        this.tensors = tensors;
        this.files = files;
    }

    public static Checkpoint open(Path dir, Arena arena) {
        Path index = dir.resolve(INDEX);
        Path single = dir.resolve(SINGLE);
        Map<String, TensorInfo> tensors = new TreeMap<>();
        Map<Path, SafetensorsFile> files = new LinkedHashMap<>();
        if (Files.isRegularFile(index)) {
            Map<String, String> weightMap = readIndex(index);
            for (String file : new java.util.LinkedHashSet<>(weightMap.values())) {
                Path p = dir.resolve(file);
                if (!Files.isRegularFile(p)) {
                    throw new ModelLoadException(index + ": names shard '" + file + "', which is not in " + dir);
                }
                files.put(p, SafetensorsFile.open(p, arena));
            }
            for (Map.Entry<String, String> e : weightMap.entrySet()) {
                Path p = dir.resolve(e.getValue());
                TensorInfo info = files.get(p).tensors().get(e.getKey());
                if (info == null) {
                    throw new ModelLoadException(p + ": tensor '" + e.getKey() + "' is assigned to this shard by " + INDEX + " but is not in it");
                }
                tensors.put(e.getKey(), info);
            }
            for (SafetensorsFile f : files.values()) {
                for (String name : f.tensors().keySet()) {
                    if (!weightMap.containsKey(name)) {
                        throw new ModelLoadException(f.path() + ": tensor '" + name + "' is not listed in " + INDEX);
                    }
                }
            }
        } else if (Files.isRegularFile(single)) {
            SafetensorsFile f = SafetensorsFile.open(single, arena);
            files.put(single, f);
            tensors.putAll(f.tensors());
        } else {
            throw new ModelLoadException(dir + ": no " + SINGLE + " or " + INDEX + " (is this a Hugging Face model directory?)");
        }
        return new Checkpoint(tensors, files);
    }

    /**
     * The safetensors files of a model directory, in the order {@link #open} maps them (the shards its index names,
     * or the single file), without mapping or reading them.
     */
    public static List<Path> files(Path dir) {
        Path index = dir.resolve(INDEX);
        Path single = dir.resolve(SINGLE);
        if (Files.isRegularFile(index)) {
            return new java.util.LinkedHashSet<>(readIndex(index).values()).stream().map(dir::resolve).toList();
        } else if (Files.isRegularFile(single)) {
            return List.of(single);
        }
        throw new ModelLoadException(dir + ": no " + SINGLE + " or " + INDEX + " (is this a Hugging Face model directory?)");
    }

    private static Map<String, String> readIndex(Path index) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(index.toFile());
        } catch (IOException e) {
            throw new ModelLoadException(index + ": not valid JSON: " + e.getMessage(), e);
        }
        JsonNode wm = root == null ? null : root.get("weight_map");
        if (wm == null || !wm.isObject()) {
            throw new ModelLoadException(index + ": missing object field 'weight_map'");
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = wm.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            String file = e.getValue().asText();
            if (!e.getValue().isTextual() || file.contains("/") || file.contains("\\") || file.startsWith(".")) {
                throw new ModelLoadException(index + ": weight_map['" + e.getKey() + "'] must be a file name in the same directory, found " + e.getValue());
            }
            out.put(e.getKey(), file);
        }
        return out;
    }

    /** Every tensor of the checkpoint by name. */
    public Map<String, TensorInfo> tensors() {
        return tensors;
    }

    /** The file bytes of {@code info} (no copy). */
    public MemorySegment bytes(TensorInfo info) {
        return files.get(info.file()).bytes(info);
    }
}
