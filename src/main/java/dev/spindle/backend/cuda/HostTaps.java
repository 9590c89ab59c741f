package dev.spindle.backend.cuda;

import dev.spindle.model.Bf16;
import dev.spindle.step.ModelStep;
import dev.spindle.step.ModelStep.Window;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/** A step's tapped residual rows brought to the host: the tap buffer is (taps, step rows n, hidden h) bf16. */
final class HostTaps {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private HostTaps() {
    }

    /** Per window, its rows' residual stream after each tap layer ([row][tap x hidden + i]) when it asked, else null. */
    static List<float[][]> read(CudaDriver cuda, ModelStep step, int n, int h, long buffer) {
        List<float[][]> out = new ArrayList<>();
        int[] taps = step.tapLayers();
        if (!step.tapsToHost()) { // the reader takes them from the device (CudaForwardPass.deviceTaps)
            for (int wi = 0; wi < step.windows().size(); wi++) {
                out.add(null);
            }
            return out;
        }
        short[] bits = null;
        if (taps.length > 0) {
            bits = new short[taps.length * n * h];
            try (Arena a = Arena.ofConfined()) {
                MemorySegment host = a.allocate((long) bits.length * 2);
                cuda.copyToHost(host, buffer);
                MemorySegment.copy(host, BF16, 0, bits, 0, bits.length);
            }
        }
        for (int wi = 0, row = 0; wi < step.windows().size(); wi++) {
            Window w = step.windows().get(wi);
            if (!w.tap() || taps.length == 0) {
                out.add(null);
            } else {
                float[][] rows = new float[w.tokens().length][taps.length * h];
                for (int r = 0; r < rows.length; r++) {
                    for (int t = 0; t < taps.length; t++) {
                        int base = (t * n + row + r) * h;
                        for (int i = 0; i < h; i++) {
                            rows[r][t * h + i] = Bf16.toFloat(bits[base + i]);
                        }
                    }
                }
                out.add(rows);
            }
            row += w.tokens().length;
        }
        return out;
    }
}
