package dev.spindle.chat;

import java.util.List;

/**
 * Finds stop strings in streamed text. Text that could still be the start of a stop
 * string is held back; once one appears, the text before it is released and nothing
 * after it ever is (the stop string never leaks into the output).
 */
public final class StopMatcher {
    private final List<String> stops;
    private final StringBuilder held = new StringBuilder();
    private boolean stopped;
    private String matched;

    public StopMatcher(List<String> stops) {
        this.stops = stops.stream().filter(s -> !s.isEmpty()).toList();
    }

    /** Releasable text after adding {@code delta}; check {@link #stopped()} afterwards. */
    public String feed(String delta) {
        return feed(delta, true);
    }

    /**
     * As {@link #feed(String)}; with {@code active} false (vLLM's {@code min_tokens} not yet reached)
     * nothing is matched and everything held so far is released.
     */
    public String feed(String delta, boolean active) {
        if (stopped) {
            return "";
        }
        if (stops.isEmpty()) {
            return delta;
        }
        held.append(delta);
        if (!active) {
            String out = held.toString();
            held.setLength(0);
            return out;
        }
        int first = -1;
        String which = null;
        for (String s : stops) {
            int i = held.indexOf(s);
            if (i >= 0 && (first < 0 || i < first)) {
                first = i;
                which = s;
            }
        }
        if (first >= 0) {
            stopped = true;
            matched = which;
            String out = held.substring(0, first);
            held.setLength(0);
            return out;
        }
        int keep = 0;
        for (String s : stops) {
            keep = Math.max(keep, TagScanner.partialSuffix(held, s));
        }
        String out = held.substring(0, held.length() - keep);
        held.delete(0, held.length() - keep);
        return out;
    }

    /** End of the stream without a stop string: the held-back text is output after all. */
    public String flush() {
        String out = stopped ? "" : held.toString();
        held.setLength(0);
        return out;
    }

    public boolean stopped() {
        return stopped;
    }

    /** The stop string found, or null. */
    public String matched() {
        return matched;
    }
}
