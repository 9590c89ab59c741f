package dev.spindle.chat.jinja;

/** A lexical token of a template; {@code line} is 1-based. */
record Token(Kind kind, String text, int line) {
    enum Kind { TEXT, VAR_BEGIN, VAR_END, BLOCK_BEGIN, BLOCK_END, NAME, STRING, INTEGER, FLOAT, OP, EOF }

    boolean is(Kind k, String t) {
        return kind == k && text.equals(t);
    }

    boolean isOp(String t) {
        return is(Kind.OP, t);
    }

    boolean isName(String t) {
        return is(Kind.NAME, t);
    }
}
