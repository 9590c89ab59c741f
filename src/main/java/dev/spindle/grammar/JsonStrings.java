package dev.spindle.grammar;

import dev.spindle.grammar.JsonRecognizer.Obj;
import dev.spindle.grammar.JsonRecognizer.Stack;
import dev.spindle.grammar.JsonRecognizer.Str;
import dev.spindle.grammar.JsonRecognizer.StrCheck;

import java.util.List;

/**
 * The string states of {@link JsonRecognizer}: keys (their text collected, to check property
 * names) and values (free text, or text held to a {@link StringRule}: the automaton steps on
 * decoded code points, so an escape counts as the character it stands for, and a surrogate
 * pair, raw or escaped, as one code point).
 */
final class JsonStrings {
    private JsonStrings() {
    }

    private static final long STRING_SPECIALS = TokenTrie.CONTROLS | TokenTrie.bits("\"\\");

    /** {@link Recognizer#stableExcept} of a value string outside an escape. */
    static long stableExcept(Str str) {
        long s = STRING_SPECIALS | (str.guard() == null ? 0 : str.guard().starts());
        StrCheck k = str.check();
        if (k == null) {
            return s;
        }
        StringRule r = k.rule();
        if (k.high() != 0 || r.maxLength != Integer.MAX_VALUE || k.count() < r.minLength) {
            return TokenTrie.NOT_STABLE; // the length still counts
        }
        long d = r.dfa == null ? 0 : r.dfa.stableExcept(k.q());
        return d < 0 ? TokenTrie.NOT_STABLE : s | d;
    }

    /**
     * {@link Recognizer#stableExceptWithin} of a value string outside an escape: as {@link #stableExcept},
     * and also under a maxLength once minLength is reached, for {@link #budget} more plain characters.
     */
    static long stableExceptWithin(Str str) {
        long s = stableExcept(str);
        StrCheck k = str.check();
        if (s >= 0 || k == null || k.high() != 0 || k.count() < k.rule().minLength) {
            return s;
        }
        StringRule r = k.rule();
        long d = r.dfa == null ? 0 : r.dfa.stableExcept(k.q());
        return d < 0 ? TokenTrie.NOT_STABLE : STRING_SPECIALS | (str.guard() == null ? 0 : str.guard().starts()) | d;
    }

    /** Plain characters a string stable within a maxLength takes, each keeping its automaton state (see {@link StringRule#budget}). */
    static int budget(Str str) {
        StrCheck k = str.check();
        return k == null || k.rule().maxLength == Integer.MAX_VALUE ? Integer.MAX_VALUE : k.rule().budget(k.q(), k.count());
    }

    static StrCheck startCheck(StringRule rule) {
        return rule == null ? null : new StrCheck(rule, rule.start(), 0, 0, (char) 0);
    }

    /** The check after one UTF-16 unit of decoded text, or null when no accepted string continues so. */
    private static StrCheck unit(StrCheck k, char u) {
        StringRule r = k.rule();
        if (k.high() != 0) {
            return Character.isLowSurrogate(u) ? advance(k, Character.toCodePoint(k.high(), u)) : null;
        }
        if (Character.isHighSurrogate(u)) {
            return r.anyUnit(k.q(), k.count(), u, 0xDC00, 0xDFFF) ? new StrCheck(r, k.q(), k.count(), 0, u) : null;
        }
        return Character.isLowSurrogate(u) ? null : advance(k, u);
    }

    private static StrCheck advance(StrCheck k, int cp) {
        StringRule r = k.rule();
        int q = r.step(k.q(), cp);
        int n = r.counted(k.count() + 1);
        return q >= 0 && r.viable(q, n) ? new StrCheck(r, q, n, 0, (char) 0) : null;
    }

    private static int hexValue(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    }

    static void step(Str str, Stack s, char c, List<Stack> out) {
        TagGuard g = str.guard();
        StrCheck k = str.check();
        if (str.escape() == 1) {
            if ("\"\\/bfnrt".indexOf(c) >= 0) {
                char decoded = unescape(c).charAt(0);
                String text = str.key() ? str.text() + decoded : null;
                StrCheck next = k == null ? null : unit(k, decoded);
                if (k != null && next == null) {
                    return;
                }
                if (!str.key() || keyAllowed((Obj) s.rest().top(), text, false)) {
                    out.add(new Stack(new Str(str.key(), text, 0, g == null ? null : g.step(c), next), s.rest()));
                }
            } else if (c == 'u' && (!str.key() || anyKey(((Obj) s.rest().top()).schema()))) {
                // a key's unicode escape is not resolved, so it is allowed only where any key is
                if (k == null || k.rule().anyUnit(k.q(), k.count(), k.high(), 0, 0xFFFF)) {
                    out.add(new Stack(new Str(str.key(), str.text(), 2, g == null ? null : g.step(c), k), s.rest()));
                }
            }
            return;
        }
        if (str.escape() >= 2) { // \\uXXXX: escape 2..5 count the hex digits, the check's hex collects them
            int h = hexValue(c);
            if (h < 0) {
                return;
            }
            StrCheck next = k;
            if (k != null) {
                int v = k.hex() * 16 + h, rest = 5 - str.escape(); // hex digits still to come
                if (rest == 0) {
                    next = unit(new StrCheck(k.rule(), k.q(), k.count(), 0, k.high()), (char) v);
                } else {
                    int lo = v << (4 * rest), hi = lo + (1 << (4 * rest)) - 1;
                    next = k.rule().anyUnit(k.q(), k.count(), k.high(), lo, hi) ? new StrCheck(k.rule(), k.q(), k.count(), v, k.high()) : null;
                }
                if (next == null) {
                    return;
                }
            }
            out.add(new Stack(new Str(str.key(), str.text(), str.escape() == 5 ? 0 : str.escape() + 1, g == null ? null : g.step(c), next), s.rest()));
            return;
        }
        if (c == '"') {
            if (!str.key()) {
                if (k == null || k.high() == 0 && k.rule().complete(k.q(), k.count())) {
                    out.add(JsonRecognizer.completed(s.rest()));
                }
                return;
            }
            Obj o = (Obj) s.rest().top();
            if (keyAllowed(o, str.text(), true)) {
                out.add(new Stack(new Obj(o.schema(), 2, o.seen(), str.text(), 0), s.rest().rest()));
            }
            return;
        }
        if (c < 0x20) {
            return;
        }
        TagGuard next = g == null ? null : g.step(c);
        if (g != null && next == null) {
            return; // a forbidden tag
        }
        if (c == '\\') {
            if (str.key() ? keyEscapePossible((Obj) s.rest().top(), str.text()) : k == null || escapePossible(k)) {
                out.add(new Stack(new Str(str.key(), str.text(), 1, next, k), s.rest()));
            }
        } else if (!str.key()) {
            if (k == null) {
                out.add(next == g ? s : new Stack(new Str(false, null, 0, next, null), s.rest()));
            } else {
                StrCheck after = unit(k, c);
                if (after != null) {
                    out.add(after.equals(k) && next == g ? s : new Stack(new Str(false, null, 0, next, after), s.rest()));
                }
            }
        } else if (keyAllowed((Obj) s.rest().top(), str.text() + c, false)) {
            out.add(new Stack(new Str(true, str.text() + c, 0, next, null), s.rest()));
        }
    }

    /** Whether some escape can follow a backslash here (a simple one, or a unicode one). */
    private static boolean escapePossible(StrCheck k) {
        for (char e : "\"\\/bfnrt".toCharArray()) {
            if (unit(k, unescape(e).charAt(0)) != null) {
                return true;
            }
        }
        return k.rule().anyUnit(k.q(), k.count(), k.high(), 0, 0xFFFF);
    }

    static String unescape(char c) {
        return switch (c) {
            case 'b' -> "\b";
            case 'f' -> "\f";
            case 'n' -> "\n";
            case 'r' -> "\r";
            case 't' -> "\t";
            default -> String.valueOf(c);
        };
    }

    /** Whether the object takes any key and names none: only there is a key's unresolved unicode escape harmless. */
    private static boolean anyKey(Schema object) {
        return object.takesOtherKeys() && object.properties().isEmpty() && object.maxProperties() == Integer.MAX_VALUE;
    }

    /** Whether every key the object may still take is ASCII (closed to other keys, ASCII property names). */
    static boolean asciiKeys(Obj o) {
        if (o.schema().takesOtherKeys()) {
            return false;
        }
        for (String p : o.schema().properties().keySet()) {
            if (!o.seen().contains(p) && !p.chars().allMatch(ch -> ch < 0x80)) {
                return false;
            }
        }
        return true;
    }

    /** Whether an escape after {@code key} can still lead to a property name (no dead end). */
    private static boolean keyEscapePossible(Obj o, String key) {
        if (ObjectRules.otherKeyFits(o)) {
            return true;
        }
        for (char e : "\"\\/bfnrt".toCharArray()) {
            if (keyAllowed(o, key + unescape(e), false)) {
                return true;
            }
        }
        return false;
    }

    /** Whether {@code key} (complete, or a prefix) can name a property not yet given. */
    static boolean keyAllowed(Obj o, String key, boolean complete) {
        Schema s = o.schema();
        if (complete) {
            if (o.seen().contains(key)) {
                return false;
            }
            return s.properties().containsKey(key) ? ObjectRules.listedKeyFits(o, key) : ObjectRules.otherKeyFits(o);
        }
        if (ObjectRules.otherKeyFits(o)) {
            return true;
        }
        for (String p : s.properties().keySet()) {
            if (p.startsWith(key) && !o.seen().contains(p) && ObjectRules.listedKeyFits(o, p)) {
                return true;
            }
        }
        return false;
    }
}
