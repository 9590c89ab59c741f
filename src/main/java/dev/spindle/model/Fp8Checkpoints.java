package dev.spindle.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/** Binds the fp8 linear layers of a quantized checkpoint ({@link CheckpointQuantization}) in place, their scales as fp32. */
final class Fp8Checkpoints {
    private static final ValueLayout.OfShort SHORT_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private Fp8Checkpoints() {
    }

    /** Every expected two-dimensional weight the checkpoint stores as F8_E4M3, by name. */
    static Map<String, Matrix> bind(CheckpointQuantization q, Map<String, long[]> expected, Checkpoint ckpt, Arena arena, HostReads reads) {
        Map<String, Matrix> out = new LinkedHashMap<>();
        if (q != null && q.exl3() != null) {
            return Exl3Checkpoints.bind(expected, ckpt, arena, reads);
        }
        if (q != null && q.nvfp4() != null) {
            return Nvfp4Checkpoints.bind(q, expected, ckpt, reads);
        }
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            TensorInfo info = ckpt.tensors().get(e.getKey());
            if (info == null || info.dtype() != DType.F8_E4M3 || e.getValue().length != 2) {
                continue; // missing or not fp8: the bf16 binding reports it as it reports any tensor
            }
            String name = e.getKey();
            if (q == null) {
                throw new ModelLoadException(info.file() + ": tensor '" + name + "' is F8_E4M3, but config.json has no quantization_config"
                        + " saying how it is scaled (an fp8 checkpoint carries one: quant_method fp8 or compressed-tensors)");
            }
            if (!q.quantizes(name)) {
                continue; // the bf16 binding refuses an F8 tensor config.json does not call quantized, by name
            }
            if (!Arrays.equals(info.shape(), e.getValue())) {
                throw new ModelLoadException(info.file() + ": tensor '" + name + "' has shape " + info.shapeString() + ", expected "
                        + Arrays.toString(e.getValue()) + " from config.json");
            }
            int rows = (int) e.getValue()[0], cols = (int) e.getValue()[1];
            int br = Math.min(q.blockRows(), rows), bc = Math.min(q.blockCols(), cols);
            String scaleName = q.scaleOf(name);
            TensorInfo s = ckpt.tensors().get(scaleName);
            if (s == null) {
                throw new ModelLoadException(info.file() + ": tensor '" + name + "' is F8_E4M3 but its scale '" + scaleName + "' is missing ("
                        + q.describe() + ")");
            }
            long want = (long) Math.ceilDiv(rows, br) * Math.ceilDiv(cols, bc);
            if (s.elements() != want) {
                throw new ModelLoadException(s.file() + ": tensor '" + scaleName + "' has shape " + s.shapeString() + ", expected " + want
                        + " scales (" + Math.ceilDiv(rows, br) + " x " + Math.ceilDiv(cols, bc) + ") for " + name + " " + rows + " x " + cols
                        + " in blocks of " + br + " x " + bc);
            }
            Tensor data = new Tensor(name, DType.F8_E4M3, new long[]{rows, cols}, ckpt.bytes(info));
            if (reads == HostReads.AT_LOAD && data.data().isMapped()) {
                data.data().load(); // read now, as the bf16 tensors are, so the first request does not fault the pages in
            }
            Tensor scales = new Tensor(scaleName, DType.F32, new long[]{Math.ceilDiv(rows, br), Math.ceilDiv(cols, bc)}, fp32(ckpt.bytes(s), s, arena));
            out.put(name, new Fp8Matrix(data, scales, br, bc));
        }
        if (q != null && out.isEmpty()) {
            throw new ModelLoadException("config.json says the checkpoint is a " + q.describe() + ", but none of its linear layers is stored"
                    + " as F8_E4M3");
        }
        return out;
    }

    private static MemorySegment fp32(MemorySegment raw, TensorInfo s, Arena arena) {
        return switch (s.dtype()) {
            case F32 -> raw;
            case BF16, F16 -> {
                MemorySegment out = arena.allocate(4 * s.elements(), 64);
                for (long i = 0; i < s.elements(); i++) {
                    short b = raw.getAtIndex(SHORT_LE, i);
                    out.setAtIndex(FLOAT_LE, i, s.dtype() == DType.BF16 ? Bf16.toFloat(b) : Bf16.halfToFloat(b));
                }
                yield out;
            }
            case F8_E4M3, BLOCKS, U32, U8, I16, I32 -> throw new ModelLoadException(s.file() + ": scale tensor '" + s.name() + "' is " + s.dtype() + " (expected F32, BF16 or F16)");
        };
    }
}
