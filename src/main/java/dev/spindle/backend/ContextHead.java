package dev.spindle.backend;

import dev.spindle.model.DraftHeadConfig;
import dev.spindle.step.DraftHead;

import java.util.function.Consumer;

/**
 * What every backend's draft head shares: its config, the target layers it reads, and the bookkeeping of each
 * request's context ({@link DraftContexts}: positions {@code [start, end)} it holds, cut back and released as the
 * engine says). A backend's head adds its weights, its storage of a context and its forward.
 *
 * @param <C> the backend's context: a {@link DraftContexts.Span} with its storage
 */
public abstract class ContextHead<C extends DraftContexts.Span> implements DraftHead {
    protected final DraftHeadConfig c;
    /** The target layers whose hidden states the head reads, in its order. */
    protected final int[] taps;
    protected final DraftContexts<C> contexts;
    /** Closed with the head (the arena its host weights live in), or null. */
    private AutoCloseable resources;

    /** @param onRelease frees a context's storage when its request is released */
    protected ContextHead(DraftHeadConfig config, int[] tapLayers, Consumer<C> onRelease) {
        this.c = config;
        this.taps = tapLayers.clone();
        this.contexts = new DraftContexts<>(onRelease);
    }

    /** Makes this head close {@code resources} (the arena its host weights live in) when it closes; returns it. */
    public ContextHead<C> owning(AutoCloseable resources) {
        this.resources = resources;
        return this;
    }

    /** Closes what the head owns ({@link #owning}); the last thing a head's {@code close} does. */
    protected void closeResources() {
        if (resources == null) {
            return;
        }
        try {
            resources.close();
        } catch (Exception e) {
            throw new IllegalStateException("closing the draft head's weights: " + e.getMessage(), e);
        }
    }

    /** Runs before a context's storage is freed (a device head makes its device current). */
    protected void beforeRelease() {
    }

    @Override
    public int blockSize() {
        return c.blockSize();
    }

    @Override
    public int[] tapLayers() {
        return taps.clone();
    }

    @Override
    public int contextEnd(long id) {
        return contexts.end(id);
    }

    @Override
    public int contextStart(long id) {
        return contexts.start(id);
    }

    @Override
    public void truncate(long id, int position) {
        contexts.truncate(id, position);
    }

    @Override
    public void release(long id) {
        beforeRelease();
        contexts.release(id);
    }
}
