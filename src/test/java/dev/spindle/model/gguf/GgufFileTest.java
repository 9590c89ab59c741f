package dev.spindle.model.gguf;

import dev.spindle.model.ModelLoadException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The GGUF reader: a file written by llama.cpp's gguf-py reads back (version, metadata of each kind, tensor infos); a file
 * that is cut short, not GGUF, of another version, with a tensor of an unknown type, past the end, misaligned, overlapping,
 * or of a size not in whole blocks is refused, naming the file and what is wrong.
 */
class GgufFileTest {
    @TempDir
    Path tmp;

    @Test
    void aFileWrittenByGgufPyReadsBack() {
        try (GgufFile f = GgufFile.open(Path.of("src/test/resources/fixtures/gguf/llama-gqa-q8_0.gguf"))) {
            assertEquals(3, f.version());
            assertEquals("llama", f.string("general.architecture").orElseThrow());
            assertEquals(3L, f.requireInteger("llama.block_count"));
            assertEquals(1e-5, f.number("llama.attention.layer_norm_rms_epsilon").orElseThrow(), 1e-12);
            assertEquals(3 * 9 + 3, f.tensors().size());
            GgufFile.TensorInfo q = f.tensors().get("blk.0.attn_q.weight");
            assertEquals(GgmlType.Q8_0, q.type());
            assertEquals(128, q.rowElements());
            assertEquals(128, q.rows());
            assertEquals(128 * 4 * 34, q.bytes());
            assertEquals(GgmlType.F32, f.tensors().get("blk.0.attn_norm.weight").type());
        }
    }

    /** A small GGUF: one metadata string, then tensors given as (name, dims, type id, data offset). */
    static byte[] gguf(int version, List<Object[]> tensors, int dataBytes) {
        return gguf(version, java.util.Map.of("general.architecture", "llama"), tensors, dataBytes);
    }

    /** The same with metadata of strings, integers (u32) and floats (f32). */
    static byte[] gguf(int version, java.util.Map<String, Object> metadata, List<Object[]> tensors, int dataBytes) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteBuffer b = ByteBuffer.allocate(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(0x46554747).putInt(version).putLong(tensors.size()).putLong(metadata.size());
        for (var e : new java.util.TreeMap<>(metadata).entrySet()) {
            putString(b, e.getKey());
            switch (e.getValue()) {
                case String s -> {
                    b.putInt(8);
                    putString(b, s);
                }
                case Integer i -> b.putInt(4).putInt(i);
                case Float f -> b.putInt(6).putFloat(f);
                default -> throw new IllegalArgumentException(e.toString());
            }
        }
        for (Object[] t : tensors) {
            putString(b, (String) t[0]);
            long[] dims = (long[]) t[1];
            b.putInt(dims.length);
            for (long d : dims) {
                b.putLong(d);
            }
            b.putInt((Integer) t[2]).putLong((Long) t[3]);
        }
        while (b.position() % 32 != 0) {
            b.put((byte) 0);
        }
        out.write(b.array(), 0, b.position());
        out.writeBytes(new byte[dataBytes]);
        return out.toByteArray();
    }

    private static void putString(ByteBuffer b, String s) {
        byte[] u = s.getBytes(StandardCharsets.UTF_8);
        b.putLong(u.length).put(u);
    }

    private String refusal(byte[] file) throws IOException {
        Path p = tmp.resolve("m.gguf");
        Files.write(p, file);
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> GgufFile.open(p).close());
        assertTrue(e.getMessage().startsWith(p.toString()), e.getMessage());
        return e.getMessage();
    }

    @Test
    void brokenFilesAreRefusedWithWhatIsWrong() throws IOException {
        long[] q8 = {64, 2};
        byte[] good = gguf(3, List.<Object[]>of(new Object[]{"w", q8, 8, 0L}), 2 * 2 * 34);
        Path p = tmp.resolve("good.gguf");
        Files.write(p, good);
        try (GgufFile f = GgufFile.open(p)) {
            assertEquals(GgmlType.Q8_0, f.tensors().get("w").type());
        }
        assertTrue(refusal(Arrays.copyOf(good, 60)).contains("the file ends inside its header"));
        byte[] magic = good.clone();
        magic[0] = 'X';
        assertTrue(refusal(magic).contains("not a GGUF file"));
        assertTrue(refusal(gguf(4, List.<Object[]>of(new Object[]{"w", q8, 8, 0L}), 136)).contains("GGUF version 4"));
        assertTrue(refusal(gguf(3, List.<Object[]>of(new Object[]{"w", q8, 16, 0L}), 136)).contains("tensor w has ggml type 16"));
        assertTrue(refusal(gguf(3, List.<Object[]>of(new Object[]{"w", q8, 8, 0L}), 100)).contains("lies past the end of the file"));
        assertTrue(refusal(gguf(3, List.<Object[]>of(new Object[]{"w", q8, 8, 8L}), 200)).contains("not a multiple of the alignment"));
        assertTrue(refusal(gguf(3, List.<Object[]>of(new Object[]{"w", new long[]{60, 2}, 8, 0L}), 200)).contains("blocks of 32 elements"));
        assertTrue(refusal(gguf(3, List.<Object[]>of(new Object[]{"a", q8, 8, 0L}, new Object[]{"b", q8, 8, 64L}), 400)).contains("overlap"));
        assertTrue(refusal(gguf(3, List.<Object[]>of(new Object[]{"w", q8, 8, 0L}, new Object[]{"w", q8, 8, 160L}), 400)).contains("appears twice"));
    }

    private String configRefusal(java.util.Map<String, Object> metadata) throws IOException {
        Path p = tmp.resolve("c.gguf");
        Files.write(p, gguf(3, metadata, List.<Object[]>of(new Object[]{"token_embd.weight", new long[]{64, 16}, 0, 0L}), 64 * 16 * 4));
        try (GgufFile f = GgufFile.open(p)) {
            ModelLoadException e = assertThrows(ModelLoadException.class, () -> GgufModel.config(f));
            assertTrue(e.getMessage().startsWith(p.toString()), e.getMessage());
            return e.getMessage();
        }
    }

    /** What the config parser refuses in config.json, a GGUF's llama.* metadata is refused for, naming the key. */
    @Test
    void metadataSpindleDoesNotImplementIsRefusedByKey() throws IOException {
        java.util.Map<String, Object> llama = new java.util.HashMap<>(java.util.Map.of("general.architecture", "llama", "llama.embedding_length", 64,
                "llama.attention.head_count", 4, "llama.block_count", 1, "llama.feed_forward_length", 128));
        java.util.Map<String, Object> qwen = new java.util.HashMap<>(llama);
        qwen.put("general.architecture", "qwen2");
        assertTrue(configRefusal(qwen).contains("general.architecture is 'qwen2'"));
        java.util.Map<String, Object> yarn = new java.util.HashMap<>(llama);
        yarn.put("llama.rope.scaling.type", "yarn");
        assertTrue(configRefusal(yarn).contains("llama.rope.scaling.type = yarn turns on rope scaling"));
        java.util.Map<String, Object> partial = new java.util.HashMap<>(llama);
        partial.put("llama.rope.dimension_count", 8);
        assertTrue(configRefusal(partial).contains("partial rotary"));
        java.util.Map<String, Object> missing = new java.util.HashMap<>(llama);
        missing.remove("llama.block_count");
        assertTrue(configRefusal(missing).contains("metadata llama.block_count is missing"));
        java.util.Map<String, Object> looped = new java.util.HashMap<>(llama);
        looped.put("llama.num_loops", 2);
        assertTrue(configRefusal(looped).contains("metadata llama.num_loops = 2 is not a llama key Spindle reads (a looped model"));
        java.util.Map<String, Object> moe = new java.util.HashMap<>(llama);
        moe.put("llama.expert_count", 8);
        assertTrue(configRefusal(moe).contains("mixture of experts"));
        java.util.Map<String, Object> typed = new java.util.HashMap<>(llama);
        typed.put("llama.block_count", "three");
        assertTrue(configRefusal(typed).contains("llama.block_count is a string, an integer was expected"));
    }
}
