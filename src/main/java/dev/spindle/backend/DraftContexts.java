package dev.spindle.backend;

import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * A draft head's per-request contexts (its own K/V of the injected rows, on whatever memory the backend
 * keeps them): positions {@code [start, start + rows)} of each request, the {@link DraftHead} bookkeeping
 * both heads share. The backend's context type carries the storage; {@code onRelease} frees it.
 */
public final class DraftContexts<C extends DraftContexts.Span> {
    /** The positions a context holds: {@code [start, start + rows)}. */
    public abstract static class Span {
        public int start;
        public int rows;

        public int end() {
            return start + rows;
        }
    }

    private final Map<Long, C> byId = new HashMap<>();
    private final Consumer<C> onRelease;

    public DraftContexts(Consumer<C> onRelease) {
        this.onRelease = onRelease;
    }

    /** Request {@code id}'s context, or null. */
    public C get(long id) {
        return byId.get(id);
    }

    /**
     * The context that rows injected from position {@code from} extend: request {@code id}'s (made by
     * {@code make} if it has none; an empty one starts at {@code from}), checked to end at {@code from}.
     */
    public C extendAt(long id, int from, Supplier<C> make) {
        C x = byId.computeIfAbsent(id, k -> make.get());
        if (x.rows == 0) {
            x.start = from;
        }
        if (from != x.end()) {
            throw new IllegalArgumentException("context rows from " + from + " do not follow the head's context, which ends at " + x.end());
        }
        return x;
    }

    /** {@link DraftHead#contextEnd}. */
    public int end(long id) {
        C x = byId.get(id);
        return x == null ? 0 : x.end();
    }

    /** {@link DraftHead#contextStart}. */
    public int start(long id) {
        C x = byId.get(id);
        return x == null ? 0 : x.start;
    }

    /** {@link DraftHead#truncate}: keeps the positions before {@code position}. */
    public void truncate(long id, int position) {
        C x = byId.get(id);
        if (x != null) {
            x.rows = Math.max(0, Math.min(x.rows, position - x.start));
        }
    }

    /** {@link DraftHead#release}. */
    public void release(long id) {
        C x = byId.remove(id);
        if (x != null) {
            onRelease.accept(x);
        }
    }

    /** Releases every context. */
    public void clear() {
        byId.values().forEach(onRelease);
        byId.clear();
    }
}
