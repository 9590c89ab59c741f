package dev.spindle.backend.cuda;

import dev.spindle.step.ModelStep;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The token ids a step drew on the device (the argmax or the sample kernel; one int a logit row, in the step's row order):
 * where the next step's feed_tokens reads them ({@link ModelStep#fed}), and their way to the host through one of two
 * pinned slots, so that a started step's copy may still wait in the stream while the next step starts. Everything runs
 * on the pass's one stream: a step's draws are written before its copy and the next step's feed read them, and read
 * before the next step's draws overwrite them.
 */
final class DrawnIds implements AutoCloseable {
    private final CudaDriver cuda;
    /** The device ids, one int a logit row of a step. */
    final long device;
    private final MemorySegment[] host;
    /** Where a step read at once ({@link #readNow}) copies its ids: never one of the two slots a started step may hold. */
    private final MemorySegment now;
    /** Recorded after each slot's copy: its ids are on the host once it has passed. */
    private final MemorySegment[] copied;
    /** The step whose ids each slot holds (-1: read, or none): a read finds its own step's, or knows they were overwritten. */
    private final long[] owner = {-1, -1};
    private int slot;
    /** The step whose draws {@link #device} holds (-1: none) and its rows. */
    private long drawnStep = -1;
    private int drawnRows;

    DrawnIds(CudaDriver cuda, int maxRows) {
        this.cuda = cuda;
        device = cuda.alloc(maxRows * 4L);
        host = new MemorySegment[]{cuda.allocHost(maxRows * 4L), cuda.allocHost(maxRows * 4L)};
        now = cuda.allocHost(maxRows * 4L);
        copied = new MemorySegment[]{cuda.createEvent(), cuda.createEvent()};
    }

    /** Step {@code step} has queued its draws of {@code rows} rows into {@link #device}: the step after it may be fed from them. */
    void drew(long step, int rows) {
        drawnStep = step;
        drawnRows = rows;
    }

    /**
     * Checks the fed windows of the step after {@code previous} (the last step run): each must be fed from a row that
     * step drew here. A step that ran otherwise (its tokens sampled on the host) leaves nothing to feed from.
     */
    void checkFeeds(ModelStep step, long previous) {
        for (int i = 0; i < step.windows().size(); i++) {
            int row = step.fedRow(i);
            if (row >= 0 && (drawnStep != previous || row >= drawnRows)) {
                throw new IllegalArgumentException("window " + i + " is fed from logit row " + row + ", but the previous step on this pass "
                        + (drawnStep != previous ? "left no device draws to feed from" : "drew " + drawnRows + " rows"));
            }
        }
    }

    /** The ids of a step, on their way to the host. */
    interface Copy {
        /** Waits for the copy and returns the ids; once, before two more steps have queued theirs. */
        int[] ids();
    }

    /**
     * Queues the copy of step {@code step}'s {@code rows} ids (queued draws) to the next host slot, after the stream's work so
     * far; returns at once. The slot's previous step must have read its ids (else that read says they were overwritten).
     */
    Copy copyBack(long step, int rows) {
        int s = slot;
        slot ^= 1;
        cuda.syncEvent(copied[s]); // the slot's last copy: read by now, or never to be read
        MemorySegment h = host[s].asSlice(0, 4L * rows);
        cuda.copyToHostAsync(h, device);
        cuda.record(copied[s]);
        owner[s] = step;
        return () -> {
            if (owner[s] != step) {
                throw new IllegalStateException("a started step's ids are read once, before two more steps start (their slot was reused)");
            }
            cuda.makeCurrent();
            cuda.syncEvent(copied[s]);
            owner[s] = -1;
            return h.toArray(ValueLayout.JAVA_INT);
        };
    }

    /** The first {@code rows} ids of the step just queued, copied and waited for now (a step not started ahead). */
    int[] readNow(int rows) {
        MemorySegment h = now.asSlice(0, 4L * rows);
        cuda.copyToHost(h, device);
        return h.toArray(ValueLayout.JAVA_INT);
    }

    @Override
    public void close() {
        cuda.free(device);
        cuda.freeHost(now);
        for (int i = 0; i < 2; i++) {
            cuda.freeHost(host[i]);
            cuda.destroyEvent(copied[i]);
        }
    }
}
