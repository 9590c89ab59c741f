package dev.spindle.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.eval.KlRun;
import dev.spindle.model.SafetensorsFile;
import dev.spindle.model.TensorInfo;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;

/** The HF fp32 reference of a fixture folder: reference.json's first teacher-forced ids and reference.safetensors' logits_f32_0. */
final class HfReferences {
    private HfReferences() {
    }

    static KlRun.HfReference read(Path dir) {
        JsonNode ref;
        try {
            ref = new ObjectMapper().readTree(dir.resolve("reference.json").toFile());
        } catch (IOException e) {
            throw new UncheckedIOException(dir.resolve("reference.json") + ": " + e.getMessage(), e);
        }
        JsonNode tf = ref.path("teacher_forced").path(0).path("ids");
        if (!tf.isArray() || tf.isEmpty()) {
            throw new IllegalArgumentException(dir.resolve("reference.json") + ": no teacher_forced[0].ids");
        }
        int[] ids = new int[tf.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = tf.get(i).asInt();
        }
        try (Arena arena = Arena.ofConfined()) {
            SafetensorsFile f = SafetensorsFile.open(dir.resolve("reference.safetensors"), arena);
            TensorInfo info = f.tensors().get("logits_f32_0");
            if (info == null || info.shape().length != 2) {
                throw new IllegalArgumentException(dir.resolve("reference.safetensors") + ": no two-dimensional tensor logits_f32_0");
            }
            MemorySegment m = f.bytes(info);
            int rows = (int) info.shape()[0], vocab = (int) info.shape()[1];
            float[][] logits = new float[Math.min(rows, ids.length)][vocab];
            for (int r = 0; r < logits.length; r++) {
                MemorySegment.copy(m, ValueLayout.JAVA_FLOAT_UNALIGNED, 4L * r * vocab, logits[r], 0, vocab);
            }
            return new KlRun.HfReference(ids, logits);
        }
    }
}
