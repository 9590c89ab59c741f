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
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteBuffer b = ByteBuffer.allocate(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(0x46554747).putInt(version).putLong(tensors.size()).putLong(1);
        putString(b, "general.architecture");
        b.putInt(8);
        putString(b, "llama");
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
}
