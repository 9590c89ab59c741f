package dev.spindle.backend.cuda;

import dev.spindle.backend.CandidateSelector;
import dev.spindle.backend.ContextHead;
import dev.spindle.backend.DraftContexts;
import dev.spindle.backend.RotaryTable;
import dev.spindle.model.Bf16;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.Tensor;
import dev.spindle.sample.Sampler;
import dev.spindle.step.Observation;
import dev.spindle.step.Proposal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A DFlash / DFlash2 draft head on the GPU, beside a CUDA target: its weights on the target's device,
 * its forward on the target's kernels (embedding, RMSNorm, RoPE, SwiGLU, residual adds, the linear layer
 * with its pinned GEMMs) and draft_head.cu's (the block's bidirectional attention over the head's
 * context, DFlash2's dynamic convolutions, the logits' multiplier and soft-cap), every drafting sequence's block in
 * one forward. Drafts are picked on the device, only ids (and a sampled walk's q) coming back: DFlash's greedy ones
 * by argmax, DFlash2's greedy and sampled ones by draft_head.cu's selector_walk (the bits of CandidateSelector's walk;
 * top-k up to 32, rank up to 1024, else the host walk). DFlash's sampled drafts read the rows' logits on the host
 * (the sampler's distribution). Per sequence its context K/V live in device arrays that grow by doubling; the
 * context rows come from the target's tap buffer on the device, or from the host. Same rounding points as the CPU head except the attention's
 * (an online softmax), so its parity is gated as the CPU head's: KL to the fp32 reference.
 */
public final class CudaDraftHead extends ContextHead<CudaDraftHead.Context> {
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private final CudaDriver cuda;
    private final CudaKernels k;
    private final CudaForwardPass target;
    private final DraftHeadWeights weights;
    private final DraftHeadForward fwd;
    private final int vocab;
    private final Map<String, Tensor> host; // the selector's codebooks, for the host walk
    private final RotaryTable rotary;
    /**
     * Captured block forwards, per (rows, drafted rows), and injections, per (-1, rows) with host taps or (-2, rows, tap buffer
     * rows, its address) with the target's; beyond MAX_GRAPHS they launch kernel by kernel.
     */
    private final GraphCache graphs;
    static final int MAX_GRAPHS = 256;
    private int lastFirst;
    private float[][] lastLogits;
    private int lastDrafts;

    final class Context extends DraftContexts.Span {
        int capacity;
        long[] k = new long[c.layers()], v = new long[c.layers()];

        void ensure(int more) {
            if (rows + more <= capacity) {
                return;
            }
            int cap = Math.max(rows + more, Math.max(64, capacity * 2));
            long bytes = (long) cap * kvWidth() * 2;
            for (int l = 0; l < c.layers(); l++) {
                long nk = cuda.alloc(bytes), nv = cuda.alloc(bytes);
                if (rows > 0) {
                    cuda.copyDeviceToDevice(nk, k[l], (long) rows * kvWidth() * 2);
                    cuda.copyDeviceToDevice(nv, v[l], (long) rows * kvWidth() * 2);
                }
                if (capacity > 0) {
                    cuda.free(k[l]);
                    cuda.free(v[l]);
                }
                k[l] = nk;
                v[l] = nv;
            }
            capacity = cap;
        }

        void free() {
            if (capacity > 0) {
                for (int l = 0; l < c.layers(); l++) {
                    cuda.free(k[l]);
                    cuda.free(v[l]);
                }
            }
            capacity = 0;
        }
    }

    public CudaDraftHead(DraftHeadConfig config, Map<String, Tensor> weights, CudaForwardPass target, int[] tapLayers) {
        this(config, weights, null, target, tapLayers, 0);
    }

    /**
     * A head of {@code config}'s shape with random weights made on the device (seeded; norms near 1, projections
     * scaled by 1 / sqrt(fan-in)) and zero codebooks on the host: what the cost benchmark drafts with.
     */
    public static CudaDraftHead dummy(DraftHeadConfig config, CudaForwardPass target, int[] tapLayers, long seed, Arena hostArena) {
        Map<String, Tensor> host = new LinkedHashMap<>();
        Map<String, long[]> device = new LinkedHashMap<>();
        for (Map.Entry<String, long[]> e : config.expectedTensors().entrySet()) {
            if (e.getKey().contains("codebook")) { // read on the host by the walk
                host.put(e.getKey(), new Tensor(e.getKey(), e.getValue(), hostArena.allocate(2 * e.getValue()[0] * e.getValue()[1], 64)));
            } else {
                device.put(e.getKey(), e.getValue());
            }
        }
        return new CudaDraftHead(config, host, device, target, tapLayers, seed == 0 ? 1 : seed);
    }

    private CudaDraftHead(DraftHeadConfig config, Map<String, Tensor> weights, Map<String, long[]> dummyShapes, CudaForwardPass target, int[] tapLayers,
                          long dummySeed) {
        super(config, tapLayers, Context::free);
        if (config.headDim() % 32 != 0 || config.headDim() > 256) {
            throw new IllegalArgumentException("the CUDA draft head needs head_dim a multiple of 32 up to 256, got " + config.headDim());
        }
        this.cuda = target.driver();
        this.graphs = new GraphCache(cuda, MAX_GRAPHS, target.kernels().dependentLaunches());
        cuda.makeCurrent();
        this.k = target.kernels();
        this.target = target;
        this.vocab = target.config().vocabSize();
        this.host = Map.copyOf(weights);
        this.rotary = new RotaryTable(config.headDim(), config.ropeTheta());
        this.weights = dummyShapes == null ? DraftHeadWeights.upload(cuda, config, weights)
                : DraftHeadWeights.dummy(cuda, k, config, dummyShapes, weights, dummySeed);
        this.fwd = new DraftHeadForward(target, config, this.weights, taps.length);
    }

    private int kvWidth() {
        return c.kvHeads() * c.headDim();
    }

    @Override
    protected void beforeRelease() {
        cuda.makeCurrent();
    }

    /** Its target's steps keep their taps on the device, where injectAll reads them (a gather kernel, no host copy). */
    @Override
    public boolean readsDeviceTaps() {
        return true;
    }

    @Override
    public void inject(long id, int from, float[][] rows, int count) {
        injectAll(List.of(new Observation(id, from, rows, count)));
    }

    /**
     * Every sequence's rows together, in pieces of up to DraftHeadForward.MAX_INJECT_ROWS rows: one staged copy of the pieces' inputs
     * (the taps as bf16, each row's rotary factors at its position), fc, hidden_norm and each layer's k/v
     * projections, k_norm and RoPE over all rows, then one scatter_kv a layer writing each row's K and V after
     * its own context's rows. Nothing waits for the device at the end: the work runs while the engine samples
     * and plans, and the next draft's first copy waits for it.
     */
    @Override
    public void injectAll(List<Observation> batch) {
        cuda.makeCurrent();
        cuda.sync(); // the last injection's copies out of the staging buffer are done (the step between already waited)
        int h = c.hidden(), kw = kvWidth(), in = taps.length * h, half = c.headDim() / 2, L = c.layers();
        List<Context> owners = new ArrayList<>();
        List<float[]> rows = new ArrayList<>();
        List<Integer> positions = new ArrayList<>(), slots = new ArrayList<>(), stepRows = new ArrayList<>();
        Set<Long> seen = new HashSet<>();
        // taps kept on the device by the target's last step (the engine asked it to: readsDeviceTaps), or from the host
        boolean onDevice = batch.stream().anyMatch(o -> o.count() > 0 && o.taps() == null);
        CudaForwardPass.DeviceTaps dt = onDevice ? target.deviceTaps() : null;
        for (Observation o : batch) {
            if (o.count() == 0) {
                continue;
            }
            if (!seen.add(o.id())) {
                throw new IllegalArgumentException("sequence " + o.id() + " appears twice in one injection");
            }
            if ((o.taps() == null) != onDevice) {
                throw new IllegalArgumentException("an injection mixes taps on the host and on the device");
            }
            if (onDevice && (!Arrays.equals(dt.layers(), taps) || o.stepRow() < 0 || o.stepRow() + o.count() > dt.rows())) {
                throw new IllegalStateException("sequence " + o.id() + "'s rows " + o.stepRow() + ".." + (o.stepRow() + o.count()) + " are not in the target's last step's taps ("
                        + dt.rows() + " rows of layers " + Arrays.toString(dt.layers()) + ", the head reads " + Arrays.toString(taps) + ")");
            }
            Context cx = contexts.extendAt(o.id(), o.from(), Context::new);
            cx.ensure(o.count()); // before any row's address is taken: growing moves the arrays
            for (int r = 0; r < o.count(); r++) {
                owners.add(cx);
                rows.add(onDevice ? null : o.taps()[r]);
                stepRows.add(o.stepRow() + r);
                positions.add(o.from() + r);
                slots.add(cx.rows + r);
            }
            cx.rows += o.count();
        }
        float[] cs = new float[half], sn = new float[half];
        for (int at = 0; at < rows.size(); at += DraftHeadForward.MAX_INJECT_ROWS) {
            int n = Math.min(DraftHeadForward.MAX_INJECT_ROWS, rows.size() - at);
            // staging: feat (n x in bf16, host taps only), cos and sin (n x half fp32), the K and V row addresses (L x n
            // each), the rows' indices in the target's tap buffer (n ints, device taps)
            long featBytes = 2L * n * in, ropeBytes = 4L * n * half, addrBytes = 8L * L * n;
            MemorySegment st = fwd.injectStaging;
            short[] bits = new short[in];
            for (int r = 0; r < n; r++) {
                if (onDevice) {
                    st.set(ValueLayout.JAVA_INT_UNALIGNED, featBytes + 2 * ropeBytes + 2 * addrBytes + 4L * r, stepRows.get(at + r));
                } else {
                    float[] row = rows.get(at + r);
                    for (int i = 0; i < in; i++) {
                        bits[i] = Bf16.fromFloat(row[i]);
                    }
                    MemorySegment.copy(bits, 0, st, BF16, 2L * r * in, in); // one bulk copy a row
                }
                rotary.fill(positions.get(at + r), 1, cs, sn);
                MemorySegment.copy(cs, 0, st, ValueLayout.JAVA_FLOAT, featBytes + 4L * r * half, half);
                MemorySegment.copy(sn, 0, st, ValueLayout.JAVA_FLOAT, featBytes + ropeBytes + 4L * r * half, half);
                Context cx = owners.get(at + r);
                long off = (long) slots.get(at + r) * kw * 2;
                for (int l = 0; l < L; l++) {
                    long a = featBytes + 2 * ropeBytes + 8L * (l * n + r);
                    st.set(ValueLayout.JAVA_LONG_UNALIGNED, a, cx.k[l] + off);
                    st.set(ValueLayout.JAVA_LONG_UNALIGNED, a + addrBytes, cx.v[l] + off);
                }
            }
            cuda.copyToDeviceAsync(fwd.irope, st.asSlice(featBytes), 2 * ropeBytes + 2 * addrBytes + 4L * n);
            if (!onDevice) {
                cuda.copyToDeviceAsync(fwd.feat, st, featBytes);
            }
            injection(n, ropeBytes, addrBytes, dt);
            if (at + n < rows.size()) {
                cuda.sync(); // the staging buffer is written again for the next piece
            }
        }
    }

    /**
     * The injection of n staged rows (taps gathered from the target's buffer {@code dt}, or copied from the host when it is
     * null): fc, hidden_norm, then each layer's k and v projections, k_norm, RoPE and scatter_kv. Its launches depend on n
     * and the tap buffer alone (the staged inputs lie at offsets set by n), so one CUDA graph per (n, tap buffer and its
     * rows) replays them: ~5 launches a layer, each a call through the driver, cost one.
     */
    private void injection(int n, long ropeBytes, long addrBytes, CudaForwardPass.DeviceTaps dt) {
        replay(dt == null ? List.of(-1, n) : List.of(-2, n, dt.rows(), (int) (dt.buffer() >>> 32), (int) dt.buffer()),
                () -> fwd.launchInjection(n, ropeBytes, addrBytes, dt));
    }

    /**
     * Runs {@code launches} as the CUDA graph captured for {@code key} (captured at its first run, with programmatic dependent
     * launch as the target's steps: every kernel they launch waits first, common.cuh), or kernel by kernel where graphs are off
     * or MAX_GRAPHS are held.
     */
    private void replay(List<Integer> key, Runnable launches) {
        if (target.cudaGraphs()) {
            graphs.replay(key, launches);
        } else {
            launches.run();
        }
    }

    @Override
    public Proposal draft(long id, int anchor, int drafts, Sampling sampling) {
        return draftAll(List.of(new Call(id, anchor, drafts, sampling))).getFirst();
    }

    /** Up to DraftHeadForward.DRAFT_SEQUENCES sequences' blocks a forward (more in several). */
    @Override
    public List<Proposal> draftAll(List<Call> calls) {
        for (Call call : calls) {
            if (call.drafts() < 1 || call.drafts() > c.blockSize() - 1) {
                throw new IllegalArgumentException("a block drafts 1.." + (c.blockSize() - 1) + " tokens, asked for " + call.drafts());
            }
        }
        cuda.makeCurrent();
        List<Proposal> out = new ArrayList<>(calls.size());
        for (int at = 0; at < calls.size(); at += DraftHeadForward.DRAFT_SEQUENCES) {
            out.addAll(forward(calls.subList(at, Math.min(calls.size(), at + DraftHeadForward.DRAFT_SEQUENCES))));
        }
        return out;
    }

    /**
     * One forward over the blocks of calls (at most DraftHeadForward.DRAFT_SEQUENCES): the block of each, [anchor, mask x drafts] at the
     * positions after its context, its rows after the previous block's; every input (ids, each row's index in its block
     * and rotary rows, the drafted rows' indices, per sequence its context and per layer its context K / V addresses)
     * staged in one copy; the drafted rows gathered after the final norm for the output head. Drafts are picked on the
     * device where picksOnDevice says (DFlash's argmax over all rows; DFlash2's walk a sequence, after one top-k pass
     * over all rows), one copy bringing every id (and a sampled walk's q) back; the rest read their rows' logits on
     * the host.
     */
    private List<Proposal> forward(List<Call> calls) {
        int S = calls.size(), half = c.headDim() / 2;
        int[] row0 = new int[S], drafted0 = new int[S];
        int n = 0, d = 0;
        for (int i = 0; i < S; i++) {
            row0[i] = n;
            drafted0[i] = d;
            n += calls.get(i).drafts() + 1;
            d += calls.get(i).drafts();
        }
        MemorySegment st = fwd.draftStaging;
        float[] cs = new float[half], sn = new float[half];
        for (int i = 0; i < S; i++) {
            Call call = calls.get(i);
            Context cx = contexts.get(call.id());
            int position = cx == null ? 0 : cx.start + cx.rows, rows = call.drafts() + 1;
            for (int r = 0; r < rows; r++) {
                int row = row0[i] + r;
                st.setAtIndex(ValueLayout.JAVA_INT, fwd.dsIds + row, r == 0 ? call.anchor() : c.maskTokenId());
                st.setAtIndex(ValueLayout.JAVA_INT, fwd.dsInBlock + row, r);
                st.setAtIndex(ValueLayout.JAVA_INT, fwd.dsRowSeq + row, i);
                if (r > 0) {
                    st.setAtIndex(ValueLayout.JAVA_INT, fwd.dsGather + drafted0[i] + r - 1, row);
                }
                rotary.fill(position + r, 1, cs, sn);
                MemorySegment.copy(cs, 0, st, ValueLayout.JAVA_FLOAT, fwd.dsCos + 4L * row * half, half);
                MemorySegment.copy(sn, 0, st, ValueLayout.JAVA_FLOAT, fwd.dsSin + 4L * row * half, half);
            }
            if (sampled(call)) { // the draws a host walk would take from the sequence's generator, in the same order
                for (int r = 0; r < call.drafts(); r++) {
                    st.setAtIndex(ValueLayout.JAVA_DOUBLE, fwd.dsU / 8 + drafted0[i] + r, call.sampling().rng().nextDouble());
                }
            }
            int[] seq = {cx == null ? 0 : cx.rows, cx == null ? 0 : cx.start, position, row0[i], rows};
            for (int f = 0; f < 5; f++) {
                st.setAtIndex(ValueLayout.JAVA_INT, fwd.dsSeqs + 5L * i + f, seq[f]);
            }
            for (int l = 0; l < c.layers(); l++) {
                st.set(ValueLayout.JAVA_LONG_UNALIGNED, fwd.dsCtx + 16L * (l * DraftHeadForward.DRAFT_SEQUENCES + i), cx == null ? 0 : cx.k[l]);
                st.set(ValueLayout.JAVA_LONG_UNALIGNED, fwd.dsCtx + 16L * (l * DraftHeadForward.DRAFT_SEQUENCES + i) + 8, cx == null ? 0 : cx.v[l]);
            }
        }
        cuda.copyToDeviceAsync(fwd.dmeta, st, st.byteSize());
        boolean onDevice = false, sampledOnDevice = false; // picks made on the device, and sampled walks among them
        int topK = c.selectorTopK();
        blockForward(n, d);
        for (int i = 0; i < S; i++) {
            Call call = calls.get(i);
            boolean sampled = sampled(call);
            onDevice |= picksOnDevice(call);
            if (fwd.deviceWalk) {
                sampledOnDevice |= sampled;
                long off = drafted0[i];
                k.draft().selectorWalk(fwd.logits + 2L * off * vocab, call.drafts(), vocab, fwd.proj + 2L * off * c.selectorRank(), c.selectorRank(), topK,
                        weights.get("candidate_selector.predecessor_codebook"), weights.get("candidate_selector.successor_codebook"), call.anchor(), fwd.argmaxOut + 4L * off,
                        sampled ? fwd.dmeta + fwd.dsU + 8L * off : 0L, sampled ? call.sampling().params().temperature() : 0.0, fwd.walkQ + 4L * off * topK,
                        fwd.walkCand + 4L * off * topK, fwd.walkParts, d, drafted0[i]);
            }
        }
        MemorySegment got = null;
        if (onDevice) {
            got = fwd.idsHost.asSlice(0, sampledOnDevice ? fwd.walkQ - fwd.walkOut + 4L * d * topK : 4L * d);
            cuda.copyToHost(got, fwd.walkOut);
        }
        List<Proposal> out = new ArrayList<>(S);
        for (int i = 0; i < S; i++) {
            Call call = calls.get(i);
            boolean sampled = sampled(call);
            if (picksOnDevice(call)) {
                int[] tokens = new int[call.drafts()];
                MemorySegment.copy(got, ValueLayout.JAVA_INT, 4L * drafted0[i], tokens, 0, tokens.length);
                if (!sampled) {
                    out.add(Proposal.of(tokens));
                    continue;
                }
                float[][] q = new float[call.drafts()][vocab]; // the walk's q: its candidates' probabilities, zero elsewhere
                for (int r = 0; r < q.length; r++) {
                    for (int j = 0; j < Math.min(topK, vocab); j++) {
                        long at = (long) (drafted0[i] + r) * topK + j;
                        q[r][got.getAtIndex(ValueLayout.JAVA_INT, (fwd.walkCand - fwd.walkOut) / 4 + at)] = got.getAtIndex(ValueLayout.JAVA_FLOAT, (fwd.walkQ - fwd.walkOut) / 4 + at);
                    }
                }
                out.add(new Proposal(tokens, q));
            } else {
                out.add(onHost(call, drafted0[i]));
            }
        }
        Call last = calls.getLast();
        lastFirst = drafted0[S - 1];
        lastDrafts = last.drafts();
        lastLogits = null;
        return out;
    }

    /**
     * The block forward after its inputs are staged: embeddings, the layers, the final norm, the drafted rows' logits and their
     * argmax (DFlash) or top-k candidates (DFlash2's device walk). Its launches depend on the rows (n) and drafted rows (d) alone,
     * every other input being data at fixed addresses, so one CUDA graph per (n, d) replays it (as the target replays its decode
     * steps): ~20 launches a layer cost one.
     */
    private void blockForward(int n, int d) {
        replay(List.of(n, d), () -> fwd.launchBlockForward(n, d));
    }

    private static boolean sampled(Call call) {
        return call.sampling() != null && call.sampling().params().temperature() > 0;
    }

    /** Whether the call's drafts are picked on the device: every DFlash2 walk the kernel takes, DFlash's greedy argmax. */
    private boolean picksOnDevice(Call call) {
        return c.kind() == DraftHeadConfig.Kind.DFLASH2 ? fwd.deviceWalk : !sampled(call);
    }

    /** A draft picked on the host from its rows' logits (from row first of the drafted rows): a sampled one, or a walk too wide for the kernel. */
    private Proposal onHost(Call call, int first) {
        int drafts = call.drafts();
        Sampling sampling = sampled(call) ? call.sampling() : null;
        float[][] z = hostLogits(first, drafts);
        if (c.kind() == DraftHeadConfig.Kind.DFLASH2) {
            int rank = c.selectorRank();
            MemorySegment ph = fwd.projHost.asSlice(0, 2L * drafts * rank);
            cuda.copyToHost(ph, fwd.proj + 2L * first * rank);
            float[] pr = new float[drafts * rank];
            for (int i = 0; i < pr.length; i++) {
                pr[i] = Bf16.toFloat(ph.getAtIndex(BF16, i));
            }
            return CandidateSelector.walk(z, pr, rank, c.selectorTopK(), host.get("candidate_selector.predecessor_codebook").data(),
                    host.get("candidate_selector.successor_codebook").data(), call.anchor(), sampling);
        }
        int[] tokens = new int[drafts];
        float[][] qs = new float[drafts][];
        for (int r = 0; r < drafts; r++) {
            qs[r] = Sampler.probabilities(z[r], sampling.params());
            tokens[r] = Sampler.drawFrom(qs[r], sampling.rng());
        }
        return new Proposal(tokens, qs);
    }

    /** Drafted rows [first, first + drafts) of the last forward's logits on the host (fp32 of the bf16 values). */
    private float[][] hostLogits(int first, int drafts) {
        MemorySegment m = fwd.logitsHost.asSlice(0, 2L * drafts * vocab);
        cuda.copyToHost(m, fwd.logits + 2L * first * vocab);
        float[][] out = new float[drafts][vocab];
        for (int r = 0; r < drafts; r++) {
            for (int i = 0; i < vocab; i++) {
                out[r][i] = Bf16.toFloat(m.getAtIndex(BF16, (long) r * vocab + i));
            }
        }
        return out;
    }

    /** The draft logits of the last forward's last sequence (read back to the host for a greedy draft too: for tests). */
    @Override
    public float[][] lastLogits() {
        if (lastLogits == null && lastDrafts > 0) {
            cuda.makeCurrent();
            lastLogits = hostLogits(lastFirst, lastDrafts);
        }
        return lastLogits;
    }

    @Override
    public String describe() {
        return c.describe() + " on CUDA";
    }

    @Override
    public void close() {
        cuda.makeCurrent();
        cuda.sync();
        graphs.close();
        contexts.clear();
        fwd.close();
        weights.free(target.linear());
        closeResources();
    }
}
