package dev.spindle.backend.cuda;

import java.util.ArrayList;
import java.util.List;

/** Where a tensor-parallel rank runs: device {@code ordinal}, lane {@code lane} of it ({@link CudaDriver#device(int, int)}). */
public record Placement(int ordinal, int lane) {
    /** Rank r on GPU r, for each of {@code ranks} ranks. */
    public static List<Placement> oneGpuEach(int ranks) {
        List<Placement> out = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
            out.add(new Placement(r, 0));
        }
        return out;
    }

    /** Every rank on GPU 0, rank r on lane r (tests, and measuring the path's own cost on one GPU). */
    public static List<Placement> lanesOfGpu0(int ranks) {
        List<Placement> out = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
            out.add(new Placement(0, r));
        }
        return out;
    }
}
