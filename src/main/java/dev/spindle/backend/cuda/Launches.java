package dev.spindle.backend.cuda;

import java.util.ArrayList;
import java.util.List;

/**
 * A step's launches, in order, cut after each row-parallel GEMM (o_proj, down_proj) of a tensor-parallel rank: the next
 * segment reads proj, which the group's all-reduce fills from every rank's partial ({@link TensorParallelGroup}). At one
 * rank there is no cut (the GEMMs write proj in bf16) and the segments run back to back.
 *
 * @param segments   the launches between cuts
 * @param cutBuffers per cut, the partial buffer (0: o_proj's, 1: down_proj's) its GEMM wrote
 */
record Launches(List<List<Runnable>> segments, List<Integer> cutBuffers) {
    Launches() {
        this(new ArrayList<>(List.of(new ArrayList<>())), new ArrayList<>());
    }

    void add(Runnable launch) {
        segments.getLast().add(launch);
    }

    void cut(int buffer) {
        cutBuffers.add(buffer);
        segments.add(new ArrayList<>());
    }

    /** Launches every segment in order (one rank: nothing to all-reduce between them). */
    void run() {
        for (List<Runnable> segment : segments) {
            segment.forEach(Runnable::run);
        }
    }
}
