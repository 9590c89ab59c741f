package dev.spindle.backend.cuda;

import dev.spindle.model.Bf16;
import dev.spindle.step.ModelStep.Draw;
import dev.spindle.step.ModelStep.Window;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;

/**
 * A step's logit rows after its layers: the head over them, chunk by chunk ({@code logitRowsMax} rows a pass), the rows
 * with a {@link Draw} drawn on the device into {@link DrawnIds}, the others read back to the host as fp32 rows. Shared by
 * a pass's {@code execute} (some rows may come back) and {@code start} (every row drawn, nothing read back).
 */
final class DeviceSampling implements AutoCloseable {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The head over logit rows [first, first + m) of a step into the logits buffer. */
    interface Head {
        void run(int first, int m);
    }

    private final CudaDriver cuda;
    private final int vocab;
    private final int logitRowsMax;
    /** (logitRowsMax, vocab) bf16: the device's logits buffer. */
    private final long logits;
    /** (logitRowsMax, vocab) bf16, pinned: where rows read back land. */
    private final MemorySegment logitsHost;
    final DeviceDraws drawer;
    /** The ids steps draw here: fed to the next step on the device, copied back through two host slots. */
    final DrawnIds drawn;

    DeviceSampling(CudaKernels k, int vocab, int maxStepRows, int logitRowsMax, long logits) {
        this.cuda = k.driver();
        this.vocab = vocab;
        this.logitRowsMax = logitRowsMax;
        this.logits = logits;
        this.logitsHost = cuda.allocHost((long) logitRowsMax * vocab * 2);
        this.drawer = new DeviceDraws(k, vocab, maxStepRows);
        this.drawn = new DrawnIds(cuda, maxStepRows);
    }

    /**
     * Per logit row (windows in order, each window's wanted rows in order, as the plan gathers them): its window's draw
     * and uniform, or null and 0 where the row's logits go to the host.
     */
    static void rowDraws(List<Window> windows, Draw[] draws, double[] us) {
        for (int wi = 0, j = 0; wi < windows.size(); wi++) {
            Draw d = windows.get(wi).draw();
            for (int r = 0; r < windows.get(wi).logitRows().length; r++, j++) {
                draws[j] = d;
                us[j] = d == null ? 0 : d.u()[r];
            }
        }
    }

    /**
     * The head and the draws of {@code rows} logit rows: the head runs unless {@code headDone} (a captured graph ran it);
     * rows with a draw are drawn with {@code draws[i]} and {@code us[i]} into {@link DrawnIds#device} (host slot
     * {@code slot} of the draw parameters); the others' logits come back.
     *
     * @return per row, its logits on the host, or null where it was drawn
     */
    float[][] headAndDraw(int rows, boolean headDone, Draw[] draws, double[] us, int slot, Head head) {
        boolean toHost = false, anyDraw = false;
        for (int i = 0; i < rows; i++) {
            toHost |= draws[i] == null;
            anyDraw |= draws[i] != null;
        }
        if (anyDraw) {
            drawer.upload(draws, us, rows, slot); // a row not drawn here is skipped by the kernel
        }
        float[][] all = new float[rows][];
        for (int done = 0; done < rows; done += logitRowsMax) {
            int m = Math.min(logitRowsMax, rows - done);
            if (!headDone) {
                head.run(done, m);
            }
            if (anyDraw) {
                drawer.sample(logits, m, done, slot, drawn.device);
            }
            if (toHost) {
                readRows(draws, done, m, all);
            }
        }
        return all;
    }

    /** Rows [done, done + m) without a draw, from the logits buffer into {@code all}. */
    private void readRows(Draw[] draws, int done, int m, float[][] all) {
        MemorySegment host = logitsHost.asSlice(0, (long) m * vocab * 2);
        cuda.copyToHost(host, logits);
        short[] bits = new short[vocab];
        for (int r = 0; r < m; r++) {
            if (draws[done + r] != null) {
                continue;
            }
            MemorySegment.copy(host, BF16, (long) r * vocab * 2, bits, 0, vocab);
            float[] row = new float[vocab];
            for (int i = 0; i < vocab; i++) {
                row[i] = Bf16.toFloat(bits[i]);
            }
            all[done + r] = row;
        }
    }

    @Override
    public void close() {
        drawer.close();
        drawn.close();
        cuda.freeHost(logitsHost);
    }
}
