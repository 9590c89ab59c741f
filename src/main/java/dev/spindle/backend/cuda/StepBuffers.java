package dev.spindle.backend.cuda;

import dev.spindle.backend.RotaryTable;
import dev.spindle.model.ModelConfig;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;

/**
 * A pass's device buffers for its steps (n = max step rows, H hidden, I intermediate, all bf16 unless
 * said): the activations, sized once, and the buffers grown on demand (the step's integers, the
 * RoPE tables' filled rows, attention's split state, the taps). A buffer that moves invalidates
 * the captured graphs that hold its address: the {@code ensure} methods say when one did.
 */
final class StepBuffers implements AutoCloseable {
    private final CudaDriver cuda;
    private final ModelConfig c;
    private final RotaryTable rotary;
    private final List<Long> fixed = new ArrayList<>();

    final long x;      // (n, H) the residual stream
    final long xn;     // (n, H) a norm's output
    final long qkv;    // (n, qDim + 2 kvDim) q|k|v, rotated in place
    final long att;    // (n, qDim) attention's output
    final long proj;   // (n, H) o_proj's or down_proj's output (the all-reduce's, under tensor parallelism)
    final long gateUp; // (n, 2I) gate|up
    final long act;    // (n, I) SwiGLU's output
    /** Logit rows the head computes in one pass (its buffers' rows): up to 1 GiB of logits. */
    final int logitRowsMax;
    final long logits; // (logitRowsMax, vocab), 0 without the head
    final long picked; // (logitRowsMax, H) the final hidden rows whose logits are wanted, 0 without the head
    /** A tensor-parallel rank's fp32 partials of o_proj and down_proj, (n, H) fp32 each; null at one rank. */
    final long[] partial;
    /** RoPE tables (maxPositions, headDim / 2) fp32 each, HF's values; rows [0, ropeFilled) filled. Never move. */
    final long cos, sin;
    private int ropeFilled;

    /** The step's integers (StepPlan.data): device copy and pinned host staging, {@link #metaInts} ints each. */
    private long meta;
    private MemorySegment metaHost;
    private int metaInts;
    /** Attention's split state: per split slot (heads, headDim) fp32 partial outputs and (heads, 2) fp32 max|sum. */
    private long partO, partML;
    private int partialCapacity;
    /** The residual rows after each tap layer of the current step, (taps, rows, H). */
    private long taps, tapCapacity;

    StepBuffers(CudaDriver cuda, ModelConfig c, int maxStepRows, boolean head, boolean partials) {
        this.cuda = cuda;
        this.c = c;
        this.rotary = new RotaryTable(c.headDim(), c.ropeTheta());
        int n = maxStepRows, h = c.hiddenSize(), in = c.intermediateSize();
        x = fixed((long) n * h * 2);
        xn = fixed((long) n * h * 2);
        qkv = fixed((long) n * (c.qDim() + 2 * c.kvDim()) * 2);
        att = fixed((long) n * c.qDim() * 2);
        proj = fixed((long) n * h * 2);
        gateUp = fixed((long) n * 2 * in * 2);
        act = fixed((long) n * in * 2);
        logitRowsMax = Math.min(n, Math.max(1, (int) ((1L << 30) / ((long) c.vocabSize() * 2))));
        logits = head ? fixed((long) logitRowsMax * c.vocabSize() * 2) : 0;
        picked = head ? fixed((long) logitRowsMax * h * 2) : 0;
        ensureMeta(16 * n + 4096);
        partial = partials ? new long[]{fixed((long) n * h * 4), fixed((long) n * h * 4)} : null;
        cos = fixed((long) c.maxPositions() * c.headDim() / 2 * 4);
        sin = fixed((long) c.maxPositions() * c.headDim() / 2 * 4);
        ensureRope(Math.min(c.maxPositions(), 4096));
        ensurePartials(4096);
    }

    private long fixed(long bytes) {
        long p = cuda.alloc(bytes);
        fixed.add(p);
        return p;
    }

    long meta() {
        return meta;
    }

    MemorySegment metaHost() {
        return metaHost;
    }

    long partO() {
        return partO;
    }

    long partML() {
        return partML;
    }

    long taps() {
        return taps;
    }

    /**
     * Fills the RoPE tables for positions [0, positions): rows are computed on demand, doubling, in parallel chunks, and
     * only new ones. The tables have room for every position the model allows, so their addresses never change.
     */
    void ensureRope(int positions) {
        if (positions <= ropeFilled) {
            return;
        }
        int from = ropeFilled, upTo = Math.min(c.maxPositions(), Math.max(positions, 2 * ropeFilled)), half = c.headDim() / 2;
        int n = upTo - from, chunk = 4096;
        float[] cs = new float[n * half], sn = new float[n * half];
        IntStream.range(0, (n + chunk - 1) / chunk).parallel().forEach(ch -> {
            int s = ch * chunk, len = Math.min(chunk, n - s);
            float[] c1 = new float[len * half], s1 = new float[len * half];
            rotary.fill(from + s, len, c1, s1);
            System.arraycopy(c1, 0, cs, s * half, c1.length);
            System.arraycopy(s1, 0, sn, s * half, s1.length);
        });
        try (Arena a = Arena.ofConfined()) {
            cuda.copyToDevice(cos + (long) from * half * 4, a.allocateFrom(ValueLayout.JAVA_FLOAT, cs));
            cuda.copyToDevice(sin + (long) from * half * 4, a.allocateFrom(ValueLayout.JAVA_FLOAT, sn));
        }
        ropeFilled = upTo;
    }

    /** The step-integer buffers (device and pinned host) hold at least {@code ints}; true when they moved. */
    boolean ensureMeta(int ints) {
        if (ints <= metaInts) {
            return false;
        }
        int cap = Math.max(ints, 2 * metaInts);
        if (metaInts > 0) {
            cuda.sync();
            cuda.free(meta);
            cuda.freeHost(metaHost);
        }
        meta = cuda.alloc(cap * 4L);
        metaHost = cuda.allocHost(cap * 4L);
        metaInts = cap;
        return true;
    }

    /** The tap buffer holds at least {@code bytes}; true when it moved. */
    boolean ensureTaps(long bytes) {
        if (bytes <= tapCapacity) {
            return false;
        }
        if (tapCapacity > 0) {
            cuda.sync();
            cuda.free(taps);
        }
        taps = cuda.alloc(bytes);
        tapCapacity = bytes;
        return true;
    }

    /** Attention's split state holds at least {@code slotsNeeded} split slots; true when it moved. */
    boolean ensurePartials(int slotsNeeded) {
        if (slotsNeeded <= partialCapacity) {
            return false;
        }
        int cap = Math.max(slotsNeeded, 2 * partialCapacity);
        if (partialCapacity > 0) {
            cuda.sync();
            cuda.free(partO);
            cuda.free(partML);
            partialCapacity = 0; // nothing held if an allocation below fails
        }
        partO = cuda.alloc((long) cap * c.numHeads() * c.headDim() * 4);
        partML = cuda.alloc((long) cap * c.numHeads() * 2 * 4);
        partialCapacity = cap;
        return true;
    }

    @Override
    public void close() {
        for (long b : fixed) {
            cuda.free(b);
        }
        fixed.clear();
        if (partialCapacity > 0) {
            cuda.free(partO);
            cuda.free(partML);
            partialCapacity = 0;
        }
        if (tapCapacity > 0) {
            cuda.free(taps);
            tapCapacity = 0;
        }
        if (metaInts > 0) {
            cuda.free(meta);
            cuda.freeHost(metaHost);
            metaInts = 0;
        }
    }
}
