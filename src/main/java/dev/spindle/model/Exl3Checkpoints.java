package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Binds the linear layers of an EXL3 checkpoint (exllamav3's converter: config.json's {@code quantization_config}
 * {@code {quant_method: exl3, version, bits, head_bits, ...}}) as {@link Exl3Matrix}: each layer's {@code .trellis} (I16),
 * its sign vectors {@code .suh}/{@code .svh} (F16; older files' {@code .su}/{@code .sv} I16 bitfields are expanded here) and
 * its codebook, named by the presence of {@code .mcg} or {@code .mul1} (I32, the multiplier). The bit width is per layer (the
 * trellis' last dimension / 16: a rung mixes widths); a layer stored as a plain {@code .weight} (a 16-bit head, say) binds as
 * any float tensor. Biases and the retired {@code .scale} are refused by name.
 */
final class Exl3Checkpoints {
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** The tensors of one EXL3 layer, by suffix. */
    static final List<String> PARTS = List.of("trellis", "suh", "svh", "su", "sv", "mcg", "mul1");

    private Exl3Checkpoints() {
    }

    /** config.json's EXL3 settings: what the start log and /v1/models say (the layers' own tensors decide how they decode). */
    record Config(String version, double bits, int headBits, String codebook) {
        String describe() {
            return "exl3 checkpoint (trellis-coded weights, " + bits + " bits a weight" + (headBits > 0 ? ", head " + headBits : "")
                    + (codebook.isEmpty() ? "" : ", " + codebook + " codebook") + (version.isEmpty() ? "" : "; exllamav3 " + version) + ")";
        }
    }

    /** An exl3 quantization_config's fields, checked. */
    static Config parse(JsonNode q) {
        JsonNode bits = q.path("bits"), head = q.path("head_bits");
        if (!bits.isNumber() || bits.asDouble() <= 0 || bits.asDouble() > 16) {
            throw new ModelLoadException("config: field 'quantization_config.bits' = " + bits + " (an EXL3 checkpoint's bits a weight, 1 to 8)");
        }
        if (!head.isMissingNode() && (!head.canConvertToInt() || head.asInt() < 1 || head.asInt() > 16)) {
            throw new ModelLoadException("config: field 'quantization_config.head_bits' = " + head + " (1 to 8, or 16: the head unquantized)");
        }
        String codebook = q.path("codebook").asText("");
        if (!codebook.isEmpty() && Exl3Codebook.of(codebook) == null) {
            throw new ModelLoadException("config: field 'quantization_config.codebook' = '" + codebook + "' is not an EXL3 codebook Spindle"
                    + " decodes (mul1, mcg, 3inst)");
        }
        return new Config(q.path("version").asText(""), bits.asDouble(), head.asInt(0), codebook);
    }

    /** Every expected linear weight the checkpoint stores as an EXL3 trellis, by its {@code <layer>.weight} name. */
    static Map<String, Matrix> bind(Map<String, long[]> expected, Checkpoint ckpt, Arena arena, HostReads reads) {
        Map<String, Matrix> out = new LinkedHashMap<>();
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            String name = e.getKey();
            if (e.getValue().length != 2 || !name.endsWith(".weight")) {
                continue;
            }
            String base = name.substring(0, name.length() - "weight".length());
            TensorInfo trellis = ckpt.tensors().get(base + "trellis");
            if (trellis == null) {
                continue; // not stored as EXL3: the float binding reads its .weight or reports it missing
            }
            int rows = Math.toIntExact(e.getValue()[0]), cols = Math.toIntExact(e.getValue()[1]);
            long[] s = trellis.shape();
            int kp = Exl3Matrix.pad(cols), np = Exl3Matrix.pad(rows);
            if (trellis.dtype() != DType.I16 || s.length != 3 || s[0] != kp / 16 || s[1] != np / 16 || s[2] % 16 != 0 || s[2] < 16 || s[2] > 128) {
                throw new ModelLoadException(trellis.file() + ": tensor '" + trellis.name() + "' is " + trellis.dtype() + " " + trellis.shapeString()
                        + ", expected I16 [" + kp / 16 + ", " + np / 16 + ", 16 K] with K in 1..8 (" + rows + " x " + cols
                        + " weights padded to multiples of 128, one 16x16 tile of K bits a weight a row)");
            }
            for (String refused : new String[]{"bias", "scale"}) {
                if (ckpt.tensors().containsKey(base + refused)) {
                    throw new ModelLoadException(ckpt.tensors().get(base + refused).file() + ": tensor '" + base + refused + "': "
                            + (refused.equals("bias") ? "a linear layer's bias is not part of the llama architecture Spindle serves"
                            : "the per-tensor .scale of early EXL3 files is not read (exllamav3 1.x folds it into .suh)"));
                }
            }
            Tensor codes = new Tensor(name, DType.I16, s, ckpt.bytes(trellis));
            if (reads == HostReads.AT_LOAD && codes.data().isMapped()) {
                codes.data().load();
            }
            Tensor su = signs(ckpt, base, "suh", "su", kp, arena), sv = signs(ckpt, base, "svh", "sv", np, arena);
            out.put(name, new Exl3Matrix(codes, su, sv, codebook(ckpt, base), rows, cols, 0));
        }
        if (out.isEmpty()) {
            throw new ModelLoadException("config.json says the checkpoint is EXL3 (quant_method exl3), but none of its linear layers is stored"
                    + " as an EXL3 trellis ('.trellis' tensors)");
        }
        return out;
    }

    /** A layer's sign vector: {@code <base><half>} F16 as stored, or {@code <base><bits>} I16 bitfields expanded to ±1 in F16. */
    private static Tensor signs(Checkpoint ckpt, String base, String half, String bits, int n, Arena arena) {
        TensorInfo h = ckpt.tensors().get(base + half), b = ckpt.tensors().get(base + bits);
        if (h != null) {
            if (h.dtype() != DType.F16 || h.shape().length != 1 || h.shape()[0] != n) {
                throw new ModelLoadException(h.file() + ": tensor '" + h.name() + "' is " + h.dtype() + " " + h.shapeString() + ", expected F16 ["
                        + n + "]");
            }
            return new Tensor(h.name(), DType.F16, new long[]{n}, ckpt.bytes(h));
        }
        if (b == null) {
            throw new ModelLoadException("checkpoint: EXL3 layer '" + base + "trellis' has neither '" + base + half + "' nor '" + base + bits
                    + "' (its sign vector)");
        }
        if (b.dtype() != DType.I16 || b.shape().length != 1 || b.shape()[0] * 16 != n) {
            throw new ModelLoadException(b.file() + ": tensor '" + b.name() + "' is " + b.dtype() + " " + b.shapeString() + ", expected I16 ["
                    + n / 16 + "] (16 sign bits a word)");
        }
        MemorySegment raw = ckpt.bytes(b), out = arena.allocate(2L * n, 2);
        for (int i = 0; i < n; i++) {
            boolean negative = ((raw.getAtIndex(I16, i / 16) >>> (i % 16)) & 1) != 0;
            out.setAtIndex(I16, i, Float.floatToFloat16(negative ? -1f : 1f));
        }
        return new Tensor(b.name(), DType.F16, new long[]{n}, out);
    }

    private static Exl3Codebook codebook(Checkpoint ckpt, String base) {
        Exl3Codebook found = Exl3Codebook.THREE_INST;
        for (Exl3Codebook c : new Exl3Codebook[]{Exl3Codebook.MCG, Exl3Codebook.MUL1}) {
            TensorInfo m = ckpt.tensors().get(base + c.label);
            if (m == null) {
                continue;
            }
            if (found != Exl3Codebook.THREE_INST) {
                throw new ModelLoadException(m.file() + ": EXL3 layer '" + base + "trellis' names two codebooks (.mcg and .mul1)");
            }
            if (m.dtype() != DType.I32 || m.elements() != 1 || ckpt.bytes(m).get(I32, 0) != c.multiplier) {
                throw new ModelLoadException(m.file() + ": tensor '" + m.name() + "' should be one I32 holding 0x" + Integer.toHexString(c.multiplier)
                        + " (the " + c.label + " codebook's multiplier); another multiplier is another codebook, which Spindle does not decode");
            }
            found = c;
        }
        return found;
    }
}
