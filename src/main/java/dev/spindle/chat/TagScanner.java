package dev.spindle.chat;

/** Helpers for finding tags in streamed text, where a tag may be split across deltas. */
final class TagScanner {
    private TagScanner() {
    }

    /**
     * Length of the longest suffix of {@code text} that is a proper prefix of {@code tag}:
     * text that must be held back because the next delta may complete the tag.
     */
    static int partialSuffix(CharSequence text, String tag) {
        int max = Math.min(tag.length() - 1, text.length());
        for (int n = max; n > 0; n--) {
            boolean match = true;
            for (int i = 0; i < n; i++) {
                if (text.charAt(text.length() - n + i) != tag.charAt(i)) {
                    match = false;
                    break;
                }
            }
            if (match) {
                return n;
            }
        }
        return 0;
    }
}
