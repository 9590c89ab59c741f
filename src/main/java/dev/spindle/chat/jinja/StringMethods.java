package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.IntPredicate;

/** The methods of Python's str that templates call, over code points as Python counts them. */
final class StringMethods {
    private StringMethods() {
    }

    /** {@code s.name} as a bound method, or null when str has no such (safe) method. */
    static PyCallable method(String s, String name) {
        return switch (name) {
            case "startswith" -> (a, kw) -> affix(s, a, true);
            case "endswith" -> (a, kw) -> affix(s, a, false);
            case "strip" -> (a, kw) -> strip(s, charsArg(a), true, true);
            case "lstrip" -> (a, kw) -> strip(s, charsArg(a), true, false);
            case "rstrip" -> (a, kw) -> strip(s, charsArg(a), false, true);
            case "split" -> (a, kw) -> split(s, sepArg(a, kw), maxsplitArg(a, kw));
            case "rsplit" -> (a, kw) -> rsplit(s, sepArg(a, kw), maxsplitArg(a, kw));
            case "splitlines" -> (a, kw) -> splitlines(s, a.isEmpty() ? Py.truthy(kw.get("keepends")) : Py.truthy(a.get(0)));
            case "upper" -> (a, kw) -> s.toUpperCase(Locale.ROOT);
            case "lower" -> (a, kw) -> s.toLowerCase(Locale.ROOT);
            case "casefold" -> (a, kw) -> s.toUpperCase(Locale.ROOT).toLowerCase(Locale.ROOT);
            case "swapcase" -> (a, kw) -> swapcase(s);
            case "title" -> (a, kw) -> title(s);
            case "capitalize" -> (a, kw) -> capitalize(s);
            case "replace" -> (a, kw) -> replace(s, Py.str(a.get(0)), Py.str(a.get(1)), a.size() > 2 ? Py.toLong(a.get(2)) : -1);
            case "find" -> (a, kw) -> find(s, a, false);
            case "rfind" -> (a, kw) -> find(s, a, true);
            case "index", "rindex" -> (a, kw) -> {
                long i = find(s, a, name.equals("rindex"));
                if (i < 0) {
                    throw new TemplateException("substring not found");
                }
                return i;
            };
            case "count" -> (a, kw) -> count(window(s, a, 1), Py.str(a.get(0)));
            case "join" -> (a, kw) -> {
                List<String> parts = new ArrayList<>();
                for (Object x : Py.iterate(a.get(0))) {
                    if (!(x instanceof String str)) {
                        throw new TemplateException("sequence item " + parts.size() + ": expected str instance, " + Py.typeName(x) + " found");
                    }
                    parts.add(str);
                }
                return String.join(s, parts);
            };
            case "format" -> (a, kw) -> PyFormat.format(s, a, kw);
            case "center" -> (a, kw) -> pad(s, a, 'c');
            case "ljust" -> (a, kw) -> pad(s, a, 'l');
            case "rjust" -> (a, kw) -> pad(s, a, 'r');
            case "zfill" -> (a, kw) -> zfill(s, (int) Py.toLong(a.get(0)));
            case "removeprefix" -> (a, kw) -> s.startsWith(Py.str(a.get(0))) ? s.substring(Py.str(a.get(0)).length()) : s;
            case "removesuffix" -> (a, kw) -> {
                String suf = Py.str(a.get(0));
                return !suf.isEmpty() && s.endsWith(suf) ? s.substring(0, s.length() - suf.length()) : s;
            };
            case "partition", "rpartition" -> (a, kw) -> partition(s, Py.str(a.get(0)), name.equals("rpartition"));
            case "isdigit", "isdecimal", "isnumeric" -> (a, kw) -> !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
            case "isalpha" -> (a, kw) -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
            case "isalnum" -> (a, kw) -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
            case "isspace" -> (a, kw) -> !s.isEmpty() && s.codePoints().allMatch(Py::isSpace);
            case "isupper" -> (a, kw) -> hasCased(s) && s.equals(s.toUpperCase(Locale.ROOT));
            case "islower" -> (a, kw) -> hasCased(s) && s.equals(s.toLowerCase(Locale.ROOT));
            case "istitle" -> (a, kw) -> hasCased(s) && s.equals(title(s));
            case "expandtabs" -> (a, kw) -> s.replace("\t", " ".repeat(a.isEmpty() ? 8 : (int) Py.toLong(a.get(0))));
            default -> null;
        };
    }

    private static boolean hasCased(String s) {
        return s.codePoints().anyMatch(cp -> Character.isUpperCase(cp) || Character.isLowerCase(cp) || Character.isTitleCase(cp));
    }

    private static String charsArg(List<Object> a) {
        return a.isEmpty() || a.get(0) == null ? null : Py.str(a.get(0));
    }

    private static String sepArg(List<Object> a, Map<String, Object> kw) {
        Object sep = a.isEmpty() ? kw.get("sep") : a.get(0);
        return sep == null ? null : Py.str(sep);
    }

    private static long maxsplitArg(List<Object> a, Map<String, Object> kw) {
        Object m = a.size() > 1 ? a.get(1) : kw.get("maxsplit");
        return m == null ? -1 : Py.toLong(m);
    }

    /** The code points of {@code s[start:end]} for a method's optional start/end at {@code a[from]}, {@code a[from+1]}. */
    private static String window(String s, List<Object> a, int from) {
        if (a.size() <= from) {
            return s;
        }
        return (String) Py.slice(s, a.get(from), a.size() > from + 1 ? a.get(from + 1) : null, null);
    }

    private static boolean affix(String s, List<Object> a, boolean prefix) {
        String w = window(s, a, 1);
        Object what = a.get(0);
        List<Object> options = what instanceof List<?> l ? new ArrayList<>(l) : List.of(what);
        for (Object o : options) {
            if (!(o instanceof String str)) {
                throw new TemplateException((prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " + Py.typeName(o));
            }
            if (prefix ? w.startsWith(str) : w.endsWith(str)) {
                return true;
            }
        }
        return false;
    }

    private static long find(String s, List<Object> a, boolean last) {
        String sub = Py.str(a.get(0));
        long start = 0;
        if (a.size() > 1 && a.get(1) != null) {
            long n = Py.len(s), st = Py.toLong(a.get(1));
            start = st < 0 ? Math.max(0, st + n) : Math.min(st, n);
        }
        String w = window(s, a, 1);
        int i = last ? w.lastIndexOf(sub) : w.indexOf(sub);
        return i < 0 ? -1 : start + w.codePointCount(0, i);
    }

    private static long count(String s, String sub) {
        if (sub.isEmpty()) {
            return s.codePointCount(0, s.length()) + 1;
        }
        long n = 0;
        for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length())) {
            n++;
        }
        return n;
    }

    static String strip(String s, String chars, boolean left, boolean right) {
        int[] cps = s.codePoints().toArray();
        int lo = 0, hi = cps.length;
        IntPredicate drop = chars == null ? Py::isSpace : cp -> chars.codePoints().anyMatch(c -> c == cp);
        while (left && lo < hi && drop.test(cps[lo])) {
            lo++;
        }
        while (right && hi > lo && drop.test(cps[hi - 1])) {
            hi--;
        }
        return new String(cps, lo, hi - lo);
    }

    static List<Object> split(String s, String sep, long max) {
        List<Object> out = new ArrayList<>();
        if (sep == null) {
            int[] cps = s.codePoints().toArray();
            int i = 0;
            while (i < cps.length) {
                while (i < cps.length && Py.isSpace(cps[i])) {
                    i++;
                }
                if (i >= cps.length) {
                    break;
                }
                if (max >= 0 && out.size() == max) {
                    out.add(new String(cps, i, cps.length - i)); // the rest, trailing whitespace and all
                    return out;
                }
                int start = i;
                while (i < cps.length && !Py.isSpace(cps[i])) {
                    i++;
                }
                out.add(new String(cps, start, i - start));
            }
            return out;
        }
        if (sep.isEmpty()) {
            throw new TemplateException("empty separator");
        }
        int from = 0;
        for (int i = s.indexOf(sep); i >= 0 && (max < 0 || out.size() < max); i = s.indexOf(sep, from)) {
            out.add(s.substring(from, i));
            from = i + sep.length();
        }
        out.add(s.substring(from));
        return out;
    }

    /** {@code str.rsplit}: as split but the splits counted from the right. */
    static List<Object> rsplit(String s, String sep, long max) {
        if (max < 0) {
            return split(s, sep, max);
        }
        List<Object> out = new ArrayList<>();
        if (sep == null) {
            int[] cps = s.codePoints().toArray();
            int i = cps.length;
            while (i > 0) {
                while (i > 0 && Py.isSpace(cps[i - 1])) {
                    i--;
                }
                if (i == 0) {
                    break;
                }
                if (out.size() == max) {
                    out.addFirst(new String(cps, 0, i)); // the rest, leading whitespace and all
                    return out;
                }
                int end = i;
                while (i > 0 && !Py.isSpace(cps[i - 1])) {
                    i--;
                }
                out.addFirst(new String(cps, i, end - i));
            }
            return out;
        }
        if (sep.isEmpty()) {
            throw new TemplateException("empty separator");
        }
        int end = s.length();
        while (out.size() < max) {
            int i = s.lastIndexOf(sep, end - sep.length());
            if (i < 0) {
                break;
            }
            out.addFirst(s.substring(i + sep.length(), end));
            end = i;
        }
        out.addFirst(s.substring(0, end));
        return out;
    }

    /** Python's line boundaries: \n \r \r\n \v \f \x1c-\x1e \x85 \u2028 \u2029. */
    static boolean isLineBreak(int c) {
        return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 || c == 0x2029;
    }

    static List<Object> splitlines(String s, boolean keepEnds) {
        List<Object> out = new ArrayList<>();
        int start = 0, i = 0;
        while (i < s.length()) {
            char c = s.charAt(i);
            if (!isLineBreak(c)) {
                i++;
                continue;
            }
            int eol = i + (c == '\r' && i + 1 < s.length() && s.charAt(i + 1) == '\n' ? 2 : 1);
            out.add(s.substring(start, keepEnds ? eol : i));
            start = i = eol;
        }
        if (start < s.length()) {
            out.add(s.substring(start));
        }
        return out;
    }

    static String replace(String s, String old, String neu, long count) {
        if (count < 0) {
            return old.isEmpty() ? insertEverywhere(s, neu, Long.MAX_VALUE) : s.replace(old, neu);
        }
        if (old.isEmpty()) {
            return insertEverywhere(s, neu, count);
        }
        StringBuilder b = new StringBuilder();
        int from = 0;
        for (long n = 0; n < count; n++) {
            int i = s.indexOf(old, from);
            if (i < 0) {
                break;
            }
            b.append(s, from, i).append(neu);
            from = i + old.length();
        }
        return b.append(s.substring(from)).toString();
    }

    /** {@code s.replace('', x)}: x before every code point and at the end, up to count times. */
    private static String insertEverywhere(String s, String neu, long count) {
        StringBuilder b = new StringBuilder();
        long n = 0;
        for (int cp : s.codePoints().toArray()) {
            if (n++ < count) {
                b.append(neu);
            }
            b.appendCodePoint(cp);
        }
        if (n < count) {
            b.append(neu);
        }
        return b.toString();
    }

    /** {@code str.title()}: a cased letter after an uncased character starts a word. */
    static String title(String s) {
        StringBuilder b = new StringBuilder();
        boolean prevCased = false;
        for (int cp : s.codePoints().toArray()) {
            b.append(prevCased ? lower(cp) : titleCase(cp));
            prevCased = Character.isUpperCase(cp) || Character.isLowerCase(cp) || Character.isTitleCase(cp);
        }
        return b.toString();
    }

    /** {@code str.capitalize()}: first code point title-cased, the rest lower-cased. */
    static String capitalize(String s) {
        if (s.isEmpty()) {
            return s;
        }
        int first = s.codePointAt(0);
        return titleCase(first) + s.substring(Character.charCount(first)).toLowerCase(Locale.ROOT);
    }

    private static String titleCase(int cp) {
        String up = new String(Character.toChars(cp)).toUpperCase(Locale.ROOT);
        // Python title-cases one code point to its title form; a special upper form (ß -> SS) becomes "Ss"
        if (up.codePointCount(0, up.length()) > 1) {
            int f = up.codePointAt(0);
            return new String(Character.toChars(f)) + up.substring(Character.charCount(f)).toLowerCase(Locale.ROOT);
        }
        return new String(Character.toChars(Character.toTitleCase(cp)));
    }

    private static String lower(int cp) {
        return new String(Character.toChars(cp)).toLowerCase(Locale.ROOT);
    }

    private static String swapcase(String s) {
        StringBuilder b = new StringBuilder();
        for (int cp : s.codePoints().toArray()) {
            String c = new String(Character.toChars(cp));
            b.append(Character.isUpperCase(cp) ? c.toLowerCase(Locale.ROOT) : Character.isLowerCase(cp) ? c.toUpperCase(Locale.ROOT) : c);
        }
        return b.toString();
    }

    /** center / ljust / rjust with an optional one-character fill. */
    private static String pad(String s, List<Object> a, char how) {
        int width = (int) Py.toLong(a.get(0));
        String fill = a.size() > 1 ? Py.str(a.get(1)) : " ";
        int n = s.codePointCount(0, s.length());
        int total = Math.max(0, width - n);
        int left = switch (how) {
            case 'l' -> 0;
            case 'r' -> total;
            default -> total / 2 + (total & width & 1); // CPython's centering rounds toward the left on odd widths
        };
        return fill.repeat(left) + s + fill.repeat(total - left);
    }

    private static String zfill(String s, int width) {
        int n = s.codePointCount(0, s.length());
        if (n >= width) {
            return s;
        }
        String zeros = "0".repeat(width - n);
        if (!s.isEmpty() && (s.charAt(0) == '+' || s.charAt(0) == '-')) {
            return s.charAt(0) + zeros + s.substring(1);
        }
        return zeros + s;
    }

    private static Tuple partition(String s, String sep, boolean fromRight) {
        if (sep.isEmpty()) {
            throw new TemplateException("empty separator");
        }
        int i = fromRight ? s.lastIndexOf(sep) : s.indexOf(sep);
        if (i < 0) {
            return fromRight ? Tuple.of("", "", s) : Tuple.of(s, "", "");
        }
        return Tuple.of(s.substring(0, i), sep, s.substring(i + sep.length()));
    }
}
