package dev.spindle.model;

import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Binds a DFlash / DFlash2 head's checkpoint as published: every tensor its config implies, with its
 * shape, under its own name or with a {@code model.} prefix, and DFlash2's codebooks with or without
 * {@code .weight}; anything else is refused by name, as for a model.
 */
public final class DraftHeadLoader {
    private DraftHeadLoader() {
    }

    /** @return the head's tensors by their canonical names ({@link DraftHeadConfig#expectedTensors()}) */
    public static Map<String, Tensor> load(Path dir, DraftHeadConfig config, Arena arena, LoadListener listener) {
        Checkpoint ckpt = Checkpoint.open(dir, arena);
        Map<String, long[]> canonical = config.expectedTensors();
        Map<String, String> found = new LinkedHashMap<>(); // checkpoint name -> canonical name
        Map<String, long[]> expected = new LinkedHashMap<>();
        for (Map.Entry<String, long[]> e : canonical.entrySet()) {
            String name = e.getKey();
            String chosen = name;
            for (String candidate : new String[]{name, "model." + name, name + ".weight", "model." + name + ".weight"}) {
                if (ckpt.tensors().containsKey(candidate)) {
                    chosen = candidate;
                    break;
                }
            }
            found.put(chosen, name);
            expected.put(chosen, e.getValue());
        }
        Map<String, Tensor> bound = WeightBinder.bindAll(config.kind() == DraftHeadConfig.Kind.DFLASH2 ? "DFlash2DraftModel" : "DFlashDraftModel",
                expected, n -> n.endsWith("rotary_emb.inv_freq"), ckpt, arena, listener);
        Map<String, Tensor> out = new LinkedHashMap<>();
        bound.forEach((name, t) -> out.put(found.get(name), t));
        return out;
    }
}
