package dev.spindle.model.gguf;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.model.Bf16;
import dev.spindle.model.Bf16Matrix;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.DType;
import dev.spindle.model.GgmlMatrix;
import dev.spindle.model.LayerWeights;
import dev.spindle.model.LoadListener;
import dev.spindle.model.Matrix;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.ModelLoadException;
import dev.spindle.model.ModelWeights;
import dev.spindle.model.Tensor;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * A llama GGUF file as a Spindle model: its {@code llama.*} metadata as the config Spindle would read from config.json
 * (validated by the same parser, so what it refuses there it refuses here, naming the GGUF key), and its tensors as the
 * weights. llama.cpp's converter stores q and k rows interleaved for its rope (each head's rotation pairs adjacent); they
 * are put back in the published (Hugging Face) order here. bf16 matrices are used in place; F16 and F32 ones converted to
 * bf16, as from safetensors; block-quantized ones kept as ggml blocks ({@link GgmlMatrix}); the embedding, read a row at
 * a time, is expanded to bf16; norms (F32 in GGUF files) are rounded to bf16, the dtype the model computes them in.
 */
public final class GgufModel {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private GgufModel() {
    }

    /** The model's config from the file's metadata. */
    public static ModelConfig config(GgufFile f) {
        String arch = f.string("general.architecture").orElseThrow(() -> new ModelLoadException(f.path() + ": metadata general.architecture is missing"));
        if (!arch.equals("llama")) {
            throw new ModelLoadException(f.path() + ": general.architecture is '" + arch + "'; Spindle serves the llama architecture from GGUF files");
        }
        for (String key : f.metadata().keySet()) {
            if (key.startsWith("llama.rope.scaling.") && !key.equals("llama.rope.scaling.type") || key.equals("llama.rope.scaling.type")
                    && !f.string(key).orElse("none").equals("none")) {
                throw new ModelLoadException(f.path() + ": metadata " + key + " = " + f.metadata().get(key) + " turns on rope scaling, which Spindle does not"
                        + " implement; refusing rather than serving wrong output");
            }
        }
        for (String key : f.metadata().keySet()) {
            if (key.startsWith("llama.") && !READ.contains(key) && !key.startsWith("llama.rope.scaling.")) {
                String what = key.contains("loop") ? " (a looped model: Spindle would need the loop count and which layers repeat, in keys it"
                        + " knows; none is defined for GGUF yet)" : key.contains("expert") ? " (a mixture of experts, which Spindle does not implement)" : "";
                throw new ModelLoadException(f.path() + ": metadata " + key + " = " + f.metadata().get(key) + " is not a llama key Spindle reads"
                        + what + "; refusing rather than serving wrong output");
            }
        }
        int hidden = (int) f.requireInteger("llama.embedding_length"), heads = (int) f.requireInteger("llama.attention.head_count");
        int headDim = (int) (long) f.integer("llama.attention.key_length").orElse((long) (heads > 0 ? hidden / heads : 0));
        long valueLength = f.integer("llama.attention.value_length").orElse((long) headDim);
        if (valueLength != headDim) {
            throw new ModelLoadException(f.path() + ": llama.attention.value_length " + valueLength + " differs from key_length " + headDim
                    + "; Spindle's attention takes one head dim");
        }
        long ropeDims = f.integer("llama.rope.dimension_count").orElse((long) headDim);
        if (ropeDims != headDim) {
            throw new ModelLoadException(f.path() + ": llama.rope.dimension_count " + ropeDims + " rotates part of a head of " + headDim
                    + " (partial rotary), which Spindle does not implement");
        }
        GgufFile.TensorInfo embd = tensor(f, "token_embd.weight");
        ObjectNode c = JsonNodeFactory.instance.objectNode();
        c.putArray("architectures").add("LlamaForCausalLM");
        c.put("model_type", "llama");
        c.put("hidden_size", hidden);
        c.put("intermediate_size", f.requireInteger("llama.feed_forward_length"));
        c.put("num_hidden_layers", f.requireInteger("llama.block_count"));
        c.put("num_attention_heads", heads);
        c.put("num_key_value_heads", f.integer("llama.attention.head_count_kv").orElse((long) heads));
        c.put("head_dim", headDim);
        c.put("vocab_size", f.integer("llama.vocab_size").orElse(embd.rows()));
        c.put("max_position_embeddings", f.integer("llama.context_length").orElse(4096L));
        c.put("rms_norm_eps", f.number("llama.attention.layer_norm_rms_epsilon").orElse(1e-5));
        c.put("rope_theta", f.number("llama.rope.freq_base").orElse(10000.0));
        c.put("tie_word_embeddings", !f.tensors().containsKey("output.weight"));
        c.put("hidden_act", "silu");
        f.integer("tokenizer.ggml.bos_token_id").ifPresent(v -> c.put("bos_token_id", v));
        f.integer("tokenizer.ggml.eos_token_id").ifPresent(v -> c.put("eos_token_id", v));
        try {
            return ConfigParser.parse(c);
        } catch (ModelLoadException e) {
            throw new ModelLoadException(f.path() + " (its llama.* metadata): " + e.getMessage(), e);
        }
    }

    /** The llama.* keys read above (anything else under llama. is refused: it would change the model). */
    private static final java.util.Set<String> READ = java.util.Set.of("llama.embedding_length", "llama.attention.head_count",
            "llama.attention.head_count_kv", "llama.attention.key_length", "llama.attention.value_length", "llama.rope.dimension_count",
            "llama.feed_forward_length", "llama.block_count", "llama.vocab_size", "llama.context_length", "llama.attention.layer_norm_rms_epsilon",
            "llama.rope.freq_base");

    private static GgufFile.TensorInfo tensor(GgufFile f, String name) {
        GgufFile.TensorInfo t = f.tensors().get(name);
        if (t == null) {
            throw new ModelLoadException(f.path() + ": tensor " + name + " is missing");
        }
        return t;
    }

    /** The file's weights for config c (written or converted parts in arena). */
    public static ModelWeights weights(GgufFile f, ModelConfig c, Arena arena, LoadListener listener) {
        Set<String> expected = new LinkedHashSet<>();
        Binder b = new Binder(f, c, arena, expected);
        Tensor embedding = b.rowsBf16("token_embd.weight", c.vocabSize(), c.hiddenSize());
        List<LayerWeights> layers = new ArrayList<>();
        int q = c.qDim(), kv = c.kvDim(), h = c.hiddenSize(), in = c.intermediateSize();
        for (int l = 0; l < c.numLayers(); l++) {
            String p = "blk." + l + ".";
            layers.add(new LayerWeights(b.norm(p + "attn_norm.weight", h), b.matrix(p + "attn_q.weight", q, h, c.numHeads()),
                    b.matrix(p + "attn_k.weight", kv, h, c.numKvHeads()), b.matrix(p + "attn_v.weight", kv, h, 0), b.matrix(p + "attn_output.weight", h, q, 0),
                    b.norm(p + "ffn_norm.weight", h), b.matrix(p + "ffn_gate.weight", in, h, 0), b.matrix(p + "ffn_up.weight", in, h, 0),
                    b.matrix(p + "ffn_down.weight", h, in, 0)));
            listener.loaded(p, l + 1, c.numLayers());
        }
        Tensor finalNorm = b.norm("output_norm.weight", h);
        Matrix head = c.tiedEmbeddings() ? new Bf16Matrix(embedding) : b.matrix("output.weight", c.vocabSize(), h, 0);
        for (String name : f.tensors().keySet()) {
            if (!expected.contains(name)) {
                throw new ModelLoadException(f.path() + ": unexpected tensor " + name + " (a llama model of this config has no such weight)");
            }
        }
        return new ModelWeights(embedding, layers, finalNorm, head);
    }

    /** Binds the file's tensors by name, checking each one's shape. */
    private record Binder(GgufFile f, ModelConfig c, Arena arena, Set<String> expected) {
        GgufFile.TensorInfo shaped(String name, long rows, long cols) {
            GgufFile.TensorInfo t = tensor(f, name);
            expected.add(name);
            boolean vector = rows == 1;
            if (vector ? t.dims().length != 1 || t.dims()[0] != cols : t.dims().length != 2 || t.dims()[0] != cols || t.dims()[1] != rows) {
                throw new ModelLoadException(f.path() + ": tensor " + name + " has dims " + java.util.Arrays.toString(t.dims()) + ", expected "
                        + (vector ? "[" + cols + "]" : "[" + cols + ", " + rows + "] (input features first, as GGUF stores them)"));
            }
            return t;
        }

        /** A norm's weight, in bf16. */
        Tensor norm(String name, int width) {
            return rowsBf16(name, 1, width);
        }

        /** A tensor expanded to bf16 (rows, cols), whatever its type (in place where it is bf16). */
        Tensor rowsBf16(String name, int rows, int cols) {
            GgufFile.TensorInfo t = shaped(name, rows, cols);
            long[] shape = rows == 1 ? new long[]{cols} : new long[]{rows, cols};
            if (t.type() == GgmlType.BF16) {
                return new Tensor(name, shape, f.bytes(t));
            }
            MemorySegment out = arena.allocate(2L * rows * cols, 64), src = f.bytes(t);
            float[] row = new float[cols];
            long rowBytes = t.type().rowBytes(cols);
            for (int r = 0; r < rows; r++) {
                GgmlBlocks.decode(t.type(), src, r * rowBytes, cols, row, 0);
                for (int j = 0; j < cols; j++) {
                    out.setAtIndex(BF16, (long) r * cols + j, Bf16.fromFloat(row[j]));
                }
            }
            return new Tensor(name, shape, out);
        }

        /**
         * A linear layer's (rows, cols) weight; with {@code ropeHeads} > 0 (q, k) its rows put back from llama.cpp's interleaved
         * order to the published one: in each head, published row j * half + i is stored row 2 i + j.
         */
        Matrix matrix(String name, int rows, int cols, int ropeHeads) {
            GgufFile.TensorInfo t = shaped(name, rows, cols);
            MemorySegment src = f.bytes(t);
            if (t.type().quantized()) {
                long rowBytes = t.type().rowBytes(cols);
                MemorySegment data = ropeHeads > 0 ? unpermute(src, rows, rowBytes, ropeHeads) : src;
                return new GgmlMatrix(new Tensor(name, DType.BLOCKS, new long[]{rows, rowBytes}, data), t.type(), cols);
            }
            Tensor bf16 = rowsBf16(name, rows, cols);
            return new Bf16Matrix(ropeHeads > 0 ? new Tensor(name, new long[]{rows, cols}, unpermute(bf16.data(), rows, 2L * cols, ropeHeads)) : bf16);
        }

        private MemorySegment unpermute(MemorySegment src, int rows, long rowBytes, int heads) {
            int headDim = rows / heads, half = headDim / 2;
            MemorySegment out = arena.allocate((long) rows * rowBytes, 64);
            for (int hd = 0; hd < heads; hd++) {
                for (int j = 0; j < 2; j++) {
                    for (int i = 0; i < half; i++) {
                        long to = (long) hd * headDim + (long) j * half + i, from = (long) hd * headDim + 2L * i + j;
                        MemorySegment.copy(src, from * rowBytes, out, to * rowBytes, rowBytes);
                    }
                }
            }
            return out;
        }
    }
}
