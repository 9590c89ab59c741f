package dev.spindle.chat;

/**
 * Splits generated text into reasoning and reply, incrementally. Nanbeige's generation
 * prompt ends inside {@code <think>}, so the model's text starts as reasoning; the first
 * {@code </think>} ends it. Started outside (thinking off), the reply may still open its
 * own {@code <think>} block as its first thing. Newlines that frame the block (the
 * template writes {@code <think>\n...\n</think>\n\n}) are not part of either text. An
 * unterminated block at the end is all reasoning. Tags split across deltas are held
 * back until they are complete.
 */
public final class ReasoningParser {
    static final String OPEN = ChatFormat.THINK_OPEN;
    static final String CLOSE = ChatFormat.THINK_CLOSE;

    private enum State { BEFORE_CONTENT, REASONING, CONTENT }

    private State state;
    private final StringBuilder pending = new StringBuilder();
    private boolean reasoningStarted;
    private boolean contentStarted;

    /** @param startsInReasoning whether the prompt left the model inside an open think block */
    public ReasoningParser(boolean startsInReasoning) {
        this.state = startsInReasoning ? State.REASONING : State.BEFORE_CONTENT;
    }

    /** Consumes a delta; returns [reasoning, content] text it releases. */
    public String[] next(String delta) {
        pending.append(delta);
        StringBuilder reasoning = new StringBuilder();
        StringBuilder content = new StringBuilder();
        boolean progressed = true;
        while (progressed) {
            progressed = switch (state) {
                case BEFORE_CONTENT -> beforeContent(content);
                case REASONING -> reasoning(reasoning);
                case CONTENT -> {
                    emitContent(content, pending.toString());
                    pending.setLength(0);
                    yield false;
                }
            };
        }
        return new String[]{reasoning.toString(), content.toString()};
    }

    /** End of the stream: releases everything held back. */
    public String[] finish() {
        String rest = pending.toString();
        pending.setLength(0);
        if (state == State.REASONING) {
            String r = reasoningStarted ? rest : stripLeadingNewlines(rest);
            return new String[]{stripTrailingNewlines(r), ""};
        }
        StringBuilder content = new StringBuilder();
        emitContent(content, rest);
        return new String[]{"", content.toString()};
    }

    private boolean beforeContent(StringBuilder content) {
        String text = pending.toString();
        String trimmed = text.stripLeading();
        if (trimmed.startsWith(OPEN)) {
            pending.delete(0, text.length() - trimmed.length() + OPEN.length());
            state = State.REASONING;
            return true;
        }
        if (trimmed.isEmpty() || OPEN.startsWith(trimmed)) {
            return false; // could still become "<think>"
        }
        state = State.CONTENT;
        return true;
    }

    private boolean reasoning(StringBuilder reasoning) {
        int close = pending.indexOf(CLOSE);
        if (close >= 0) {
            String r = pending.substring(0, close);
            if (!reasoningStarted) {
                r = stripLeadingNewlines(r);
            }
            reasoning.append(stripTrailingNewlines(r));
            pending.delete(0, close + CLOSE.length());
            state = State.CONTENT;
            return true;
        }
        // hold back a possible partial "</think>" and trailing newlines (they may frame the close tag)
        int hold = TagScanner.partialSuffix(pending, CLOSE);
        int end = pending.length() - hold;
        while (end > 0 && pending.charAt(end - 1) == '\n') {
            end--;
        }
        String r = pending.substring(0, end);
        if (!reasoningStarted) {
            String stripped = stripLeadingNewlines(r);
            end -= r.length() - stripped.length();
            pending.delete(0, r.length() - stripped.length());
            r = stripped;
        }
        if (!r.isEmpty()) {
            reasoningStarted = true;
            reasoning.append(r);
            pending.delete(0, end);
        }
        return false;
    }

    private void emitContent(StringBuilder content, String text) {
        if (!contentStarted) {
            text = stripLeadingNewlines(text);
            if (text.isEmpty()) {
                return;
            }
            contentStarted = true;
        }
        content.append(text);
    }

    private static String stripLeadingNewlines(String s) {
        int i = 0;
        while (i < s.length() && s.charAt(i) == '\n') {
            i++;
        }
        return s.substring(i);
    }

    private static String stripTrailingNewlines(String s) {
        int i = s.length();
        while (i > 0 && s.charAt(i - 1) == '\n') {
            i--;
        }
        return s.substring(0, i);
    }
}
