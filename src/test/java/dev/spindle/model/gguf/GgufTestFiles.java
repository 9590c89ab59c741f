package dev.spindle.model.gguf;

import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.LayerWeights;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.LoadedModel;
import dev.spindle.model.Matrix;
import dev.spindle.model.ModelLoader;
import dev.spindle.model.Tensor;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes GGUF files for tests: a model directory's bf16 weights laid out as llama.cpp's converter lays them out (its names,
 * q and k rows interleaved, norms F32) with the metadata of another GGUF file (a vocabulary: its tokenizer and chat
 * template). The bundled chat model as one is 27 MB: made when a test needs it, not committed.
 */
public final class GgufTestFiles {
    private GgufTestFiles() {
    }

    private record Entry(String name, long[] dims, int type, MemorySegment data) {
    }

    /** {@code out}: the weights of {@code modelDir} with every metadata key of {@code metadataFrom} (written once). */
    public static synchronized Path bf16WithMetadata(Path modelDir, Path metadataFrom, Path out) {
        if (Files.isRegularFile(out)) {
            return out;
        }
        try (LoadedModel m = ModelLoader.load(modelDir, LoadFormat.SAFETENSORS, LoadListener.NONE); GgufFile meta = GgufFile.open(metadataFrom)) {
            var c = m.config();
            List<Entry> tensors = new ArrayList<>();
            tensors.add(matrix("token_embd.weight", m.weights().embedding(), 0));
            for (int l = 0; l < c.numLayers(); l++) {
                LayerWeights w = m.weights().layers().get(l);
                String p = "blk." + l + ".";
                tensors.add(norm(p + "attn_norm.weight", w.inputNorm()));
                tensors.add(matrix(p + "attn_q.weight", bf16(w.q()), c.numHeads()));
                tensors.add(matrix(p + "attn_k.weight", bf16(w.k()), c.numKvHeads()));
                tensors.add(matrix(p + "attn_v.weight", bf16(w.v()), 0));
                tensors.add(matrix(p + "attn_output.weight", bf16(w.o()), 0));
                tensors.add(norm(p + "ffn_norm.weight", w.postAttnNorm()));
                tensors.add(matrix(p + "ffn_gate.weight", bf16(w.gate()), 0));
                tensors.add(matrix(p + "ffn_up.weight", bf16(w.up()), 0));
                tensors.add(matrix(p + "ffn_down.weight", bf16(w.down()), 0));
            }
            tensors.add(norm("output_norm.weight", m.weights().finalNorm()));
            if (!m.weights().headIsEmbedding()) {
                tensors.add(matrix("output.weight", bf16(m.weights().lmHead()), 0));
            }
            Files.createDirectories(out.getParent());
            Path tmp = out.resolveSibling(out.getFileName() + ".tmp");
            write(tmp, meta.metadata(), tensors);
            Files.move(tmp, out);
            return out;
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static Tensor bf16(Matrix m) {
        return ((Bf16Matrix) m).data();
    }

    private static Entry norm(String name, Tensor t) {
        long n = t.shape()[0];
        MemorySegment f = MemorySegment.ofArray(new float[(int) n]);
        for (long i = 0; i < n; i++) {
            f.setAtIndex(ValueLayout.JAVA_FLOAT, i, dev.spindle.model.Bf16.toFloat(t.data().getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, i)));
        }
        return new Entry(name, new long[]{n}, 0, f);
    }

    /** A bf16 (rows, cols) matrix; with heads > 0 its rows interleaved as llama.cpp stores q and k (row 2 i + j of a head holds j half + i). */
    private static Entry matrix(String name, Tensor t, int heads) {
        long rows = t.shape()[0], cols = t.shape()[1], rowBytes = 2 * cols;
        MemorySegment data = t.data();
        if (heads > 0) {
            MemorySegment out = MemorySegment.ofArray(new byte[(int) (rows * rowBytes)]);
            long hd = rows / heads, half = hd / 2;
            for (long h = 0; h < heads; h++) {
                for (long i = 0; i < half; i++) {
                    for (long j = 0; j < 2; j++) {
                        MemorySegment.copy(data, (h * hd + j * half + i) * rowBytes, out, (h * hd + 2 * i + j) * rowBytes, rowBytes);
                    }
                }
            }
            data = out;
        }
        return new Entry(name, new long[]{cols, rows}, 30, data);
    }

    private static void write(Path file, Map<String, Object> metadata, List<Entry> tensors) throws IOException {
        ByteBuffer h = ByteBuffer.allocate(1 << 24).order(ByteOrder.LITTLE_ENDIAN);
        h.putInt(0x46554747).putInt(3).putLong(tensors.size()).putLong(metadata.size());
        for (Map.Entry<String, Object> e : new LinkedHashMap<>(metadata).entrySet()) {
            string(h, e.getKey());
            value(h, e.getValue(), true);
        }
        long offset = 0;
        for (Entry t : tensors) {
            string(h, t.name());
            h.putInt(t.dims().length);
            for (long d : t.dims()) {
                h.putLong(d);
            }
            h.putInt(t.type()).putLong(offset);
            offset += (t.data().byteSize() + 31) / 32 * 32;
        }
        while (h.position() % 32 != 0) {
            h.put((byte) 0);
        }
        try (OutputStream o = Files.newOutputStream(file)) {
            o.write(h.array(), 0, h.position());
            for (Entry t : tensors) {
                byte[] b = t.data().toArray(ValueLayout.JAVA_BYTE);
                o.write(b);
                o.write(new byte[(int) ((b.length + 31) / 32 * 32 - b.length)]);
            }
        }
    }

    private static void string(ByteBuffer h, String s) {
        byte[] u = s.getBytes(StandardCharsets.UTF_8);
        h.putLong(u.length).put(u);
    }

    /** A value with its type (tagged) or, inside an array, without. */
    private static void value(ByteBuffer h, Object v, boolean tagged) {
        switch (v) {
            case String s -> {
                if (tagged) h.putInt(8);
                string(h, s);
            }
            case Long l -> {
                // scalars as u32 (llama.cpp reads its counts and ids as such), array elements as i32 (token types)
                if (tagged) h.putInt(l >= 0 ? 4 : 5);
                h.putInt(Math.toIntExact(l));
            }
            case Double d -> {
                if (tagged) h.putInt(6);
                h.putFloat(d.floatValue());
            }
            case Boolean b -> {
                if (tagged) h.putInt(7);
                h.put((byte) (b ? 1 : 0));
            }
            case List<?> list -> {
                h.putInt(9);
                Object first = list.isEmpty() ? "" : list.getFirst();
                h.putInt(first instanceof String ? 8 : first instanceof Long ? 5 : first instanceof Double ? 6 : 7).putLong(list.size());
                for (Object x : list) {
                    value(h, x, false);
                }
            }
            default -> throw new IllegalArgumentException("metadata value " + v);
        }
    }
}
