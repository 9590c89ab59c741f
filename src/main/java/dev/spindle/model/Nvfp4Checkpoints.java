package dev.spindle.model;

import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Binds the NVFP4 linear layers of a compressed-tensors or ModelOpt checkpoint ({@link CheckpointQuantization#nvfp4()}) in
 * place: each layer's packed codes (U8, two a byte), its E4M3 group scales and its F32 tensor scale.
 */
final class Nvfp4Checkpoints {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private Nvfp4Checkpoints() {
    }

    /** Every expected linear weight the checkpoint stores in NVFP4, by its {@code <layer>.weight} name. */
    static Map<String, Matrix> bind(CheckpointQuantization q, Map<String, long[]> expected, Checkpoint ckpt, HostReads reads) {
        CheckpointQuantization.Nvfp4 f = q.nvfp4();
        Map<String, Matrix> out = new LinkedHashMap<>();
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            String name = e.getKey();
            if (e.getValue().length != 2 || !name.endsWith(".weight") || !q.quantizes(name)) {
                continue;
            }
            String base = name.substring(0, name.length() - "weight".length());
            TensorInfo data = ckpt.tensors().get(base + f.dataSuffix());
            if (data == null || data.dtype() != DType.U8) {
                continue; // not stored quantized: the bf16 binding reports it as it reports any tensor
            }
            long rows = e.getValue()[0], cols = e.getValue()[1];
            if (cols % Nvfp4Matrix.GROUP != 0 || data.shape().length != 2 || data.shape()[0] != rows || data.shape()[1] != cols / 2) {
                throw new ModelLoadException(data.file() + ": tensor '" + data.name() + "' has shape " + data.shapeString() + ", expected ["
                        + rows + ", " + cols / 2 + "] U8 (" + cols + " columns of 4-bit codes, two a byte)");
            }
            TensorInfo scales = ckpt.tensors().get(base + q.scaleSuffix()), global = ckpt.tensors().get(base + f.globalSuffix());
            if (scales == null || global == null) {
                throw new ModelLoadException(data.file() + ": tensor '" + data.name() + "' is NVFP4 but '" + base + (scales == null ? q.scaleSuffix()
                        : f.globalSuffix()) + "' is missing (" + q.describe() + ")");
            }
            if (scales.shape().length != 2 || scales.shape()[0] != rows || scales.shape()[1] != cols / Nvfp4Matrix.GROUP
                    || (scales.dtype() != DType.F8_E4M3 && scales.dtype() != DType.U8)) {
                throw new ModelLoadException(scales.file() + ": tensor '" + scales.name() + "' is " + scales.dtype() + " " + scales.shapeString()
                        + ", expected [" + rows + ", " + cols / Nvfp4Matrix.GROUP + "] F8_E4M3 (a scale a group of 16)");
            }
            if (global.elements() != 1 || global.dtype() != DType.F32) {
                throw new ModelLoadException(global.file() + ": tensor '" + global.name() + "' is " + global.dtype() + " " + global.shapeString()
                        + ", expected one F32 (the tensor's scale)");
            }
            float g = ckpt.bytes(global).get(F32, 0);
            if (!(g > 0) || Float.isInfinite(g)) {
                throw new ModelLoadException(global.file() + ": tensor '" + global.name() + "' = " + g + " (expected a positive finite scale)");
            }
            Tensor codes = new Tensor(name, DType.U8, new long[]{rows, cols / 2}, ckpt.bytes(data));
            if (reads == HostReads.AT_LOAD && codes.data().isMapped()) {
                codes.data().load();
            }
            Tensor s = new Tensor(scales.name(), DType.F8_E4M3, new long[]{rows, cols / Nvfp4Matrix.GROUP}, ckpt.bytes(scales));
            out.put(name, new Nvfp4Matrix(codes, s, g, f.divides(), (int) cols));
        }
        if (out.isEmpty()) {
            throw new ModelLoadException("config.json says the checkpoint is a " + q.describe() + ", but none of its linear layers is stored"
                    + " as NVFP4 (U8 '" + f.dataSuffix() + "' tensors)");
        }
        return out;
    }
}
