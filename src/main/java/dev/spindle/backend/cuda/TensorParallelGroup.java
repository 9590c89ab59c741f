package dev.spindle.backend.cuda;

import dev.spindle.step.ModelStep;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The ranks of a tensor-parallel CUDA pass ({@link dev.spindle.backend.TensorParallelLayout}), driven by the leader (rank 0,
 * the {@link CudaForwardPass} the engine holds) from its one thread: each rank is a pass over its heads and MLP columns on
 * its own GPU (or lane of a GPU) and stream. A step's launches run segment by segment ({@link Launches}):
 * every rank's segment i, then the all-reduce of the partials it ended with, then segment i + 1. The all-reduce is
 * Spindle's own over peer memory: each rank records an event after its partial GEMM, waits for every other rank's, and
 * runs {@code all_reduce_sum}, which adds the ranks' fp32 partials in rank order and rounds once, so every rank holds
 * the same bits and no rank's bits depend on the batch or on timing. Two partial buffers a rank (o_proj's and
 * down_proj's) make a rank's next write to a buffer come after every rank's read of it. A decode step's graph is one
 * capture on the leader's stream that the other ranks' streams join (a fork event) and leave (join events), so a
 * step of N ranks is one graph launch.
 */
final class TensorParallelGroup implements AutoCloseable {
    private final CudaForwardPass lead;
    /** Every rank, in rank order (the leader first). */
    private final List<CudaForwardPass> ranks;
    /** Per rank: its partial is written; per rank after the leader (index 0 unused): its step integers are uploaded, its step is done. */
    private final MemorySegment[] partialReady, uploaded, done;
    private final MemorySegment fork;
    /** The other ranks' plans of the current step (index: rank). */
    private final StepPlan[] plans;

    TensorParallelGroup(CudaForwardPass lead, List<CudaForwardPass> others) {
        this.lead = lead;
        this.ranks = new ArrayList<>();
        ranks.add(lead);
        ranks.addAll(others);
        for (CudaForwardPass a : ranks) {
            for (CudaForwardPass b : ranks) {
                a.driver().enablePeerAccess(b.driver());
            }
        }
        partialReady = new MemorySegment[ranks.size()];
        uploaded = new MemorySegment[ranks.size()];
        done = new MemorySegment[ranks.size()];
        plans = new StepPlan[ranks.size()];
        for (int r = 0; r < ranks.size(); r++) {
            CudaDriver d = ranks.get(r).driver();
            partialReady[r] = d.createEvent();
            if (r > 0) {
                uploaded[r] = d.createEvent();
                done[r] = d.createEvent();
            }
        }
        fork = lead.driver().createEvent();
        lead.driver().makeCurrent();
    }

    /** How many ranks. */
    int size() {
        return ranks.size();
    }

    /** The other ranks upload their step integers for {@code step}; true when a buffer a captured step holds has moved. */
    boolean prepare(ModelStep step, int fixedSplits) {
        boolean moved = false;
        for (int r = 1; r < ranks.size(); r++) {
            CudaForwardPass p = ranks.get(r);
            p.driver().makeCurrent();
            plans[r] = p.prepare(step, fixedSplits);
            moved |= p.takeMoved();
        }
        lead.driver().makeCurrent();
        return moved;
    }

    /** The leader's stream waits for the other ranks' uploads: its graph (or launches) run every rank's work. */
    void uploaded() {
        for (int r = 1; r < ranks.size(); r++) {
            CudaDriver d = ranks.get(r).driver();
            d.makeCurrent();
            d.record(uploaded[r]);
        }
        lead.driver().makeCurrent();
        for (int r = 1; r < ranks.size(); r++) {
            lead.driver().waitFor(uploaded[r]);
        }
    }

    /** Every rank's launches of the step the leader planned as {@code leadPlan}, segment by segment, with the all-reduces between. */
    void layers(StepPlan leadPlan) {
        int n = ranks.size();
        List<Launches> programs = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            programs.add(ranks.get(r).launches(r == 0 ? leadPlan : plans[r]));
        }
        CudaDriver leader = lead.driver();
        leader.makeCurrent();
        leader.record(fork);
        for (int r = 1; r < n; r++) {
            CudaDriver d = ranks.get(r).driver();
            d.makeCurrent();
            d.waitFor(fork); // in a capture, this stream joins the leader's
        }
        int segments = programs.getFirst().segments().size();
        long count = (long) leadPlan.rows * lead.shapes().hiddenSize();
        for (int i = 0; i < segments; i++) {
            for (int r = 0; r < n; r++) {
                ranks.get(r).driver().makeCurrent();
                programs.get(r).segments().get(i).forEach(Runnable::run);
            }
            if (i == segments - 1) {
                break;
            }
            int buffer = programs.getFirst().cutBuffers().get(i);
            long[] partials = new long[n];
            for (int r = 0; r < n; r++) {
                partials[r] = ranks.get(r).partialBuffer(buffer);
                CudaDriver d = ranks.get(r).driver();
                d.makeCurrent();
                d.record(partialReady[r]);
            }
            for (int r = 0; r < n; r++) {
                CudaForwardPass p = ranks.get(r);
                CudaDriver d = p.driver();
                int rank = r;
                d.makeCurrent();
                // timed on the leader in a profiled step: the sum and the wait for the other ranks' partials
                p.op("all-reduce", () -> {
                    for (int s = 0; s < n; s++) {
                        if (s != rank) {
                            d.waitFor(partialReady[s]);
                        }
                    }
                    p.kernels().allReduceSum(p.projBuffer(), partials, count);
                });
            }
        }
        for (int r = 1; r < n; r++) {
            CudaDriver d = ranks.get(r).driver();
            d.makeCurrent();
            d.record(done[r]);
        }
        leader.makeCurrent();
        for (int r = 1; r < n; r++) {
            leader.waitFor(done[r]); // in a capture, the other streams join back
        }
    }

    /** Device memory of each rank: weights and KV pool bytes, for the start log. */
    List<String> memorySplit() {
        List<String> out = new ArrayList<>();
        for (int r = 0; r < ranks.size(); r++) {
            CudaForwardPass p = ranks.get(r);
            out.add(String.format(java.util.Locale.ROOT, "rank %d on GPU %d%s: %.1f GB of weights, %.1f GiB of KV pool (%d blocks)", r,
                    p.driver().ordinal(), p.driver().lane() == 0 ? "" : " (lane " + p.driver().lane() + ")", p.weights().bytes() / 1e9,
                    p.kvPoolBytes() / (double) (1L << 30), p.kvCapacity().blocks()));
        }
        return out;
    }

    @Override
    public void close() {
        for (int r = 0; r < ranks.size(); r++) {
            CudaDriver d = ranks.get(r).driver();
            d.makeCurrent();
            d.sync();
            d.destroyEvent(partialReady[r]);
            if (r > 0) {
                d.destroyEvent(uploaded[r]);
                d.destroyEvent(done[r]);
            }
        }
        lead.driver().makeCurrent();
        lead.driver().destroyEvent(fork);
        for (int r = 1; r < ranks.size(); r++) {
            ranks.get(r).close();
        }
        lead.driver().makeCurrent();
    }
}
