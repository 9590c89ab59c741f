package dev.spindle.chat.jinja;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Jinja2's built-in filters with their Python signatures (positional or keyword), as HF's
 * environment has them: tojson is HF's json.dumps override, nothing autoescapes. Filters
 * that stringify treat Undefined as "", those that iterate treat it as empty, and the rest
 * (int, float, abs, round, indent, dictsort, tojson) raise on it, as Jinja's do.
 */
final class Filters {
    private Filters() {
    }

    static final Set<String> NAMES = Set.of("abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e",
            "escape", "first", "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list", "lower", "map",
            "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string",
            "striptags", "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "wordcount");

    private static final Pattern WORD = Pattern.compile("\\w+", Pattern.UNICODE_CHARACTER_CLASS);
    private static final Pattern WORD_BEGINNING = Pattern.compile("([-\\s({\\[<]+)", Pattern.UNICODE_CHARACTER_CLASS);

    /** Positional argument {@code i} or keyword {@code name}, else {@code dflt}. */
    private static Object arg(List<Object> a, Map<String, Object> kw, int i, String name, Object dflt) {
        return a.size() > i ? a.get(i) : kw.getOrDefault(name, dflt);
    }

    static Object apply(String name, Object v, List<Object> a, Map<String, Object> kw) {
        return switch (name) {
            case "length", "count" -> Py.len(v);
            case "string" -> Py.str(v);
            case "safe" -> v;
            case "e", "escape", "forceescape" -> escape(Py.str(v));
            case "upper" -> Py.str(v).toUpperCase(Locale.ROOT);
            case "lower" -> Py.str(v).toLowerCase(Locale.ROOT);
            case "capitalize" -> StringMethods.capitalize(Py.str(v));
            case "title" -> title(Py.str(v));
            case "trim" -> StringMethods.strip(Py.str(v), optionalStr(arg(a, kw, 0, "chars", null)), true, true);
            case "replace" -> {
                Object count = arg(a, kw, 2, "count", null);
                yield StringMethods.replace(Py.str(v), Py.str(arg(a, kw, 0, "old", null)), Py.str(arg(a, kw, 1, "new", null)),
                        count == null ? -1 : Py.toLong(count));
            }
            case "center" -> {
                int width = (int) Py.toLong(arg(a, kw, 0, "width", 80L));
                yield StringMethods.method(Py.str(v), "center").call(List.of((long) width), Map.of());
            }
            case "wordcount" -> {
                Matcher m = WORD.matcher(Py.str(v));
                long n = 0;
                while (m.find()) {
                    n++;
                }
                yield n;
            }
            case "truncate" -> truncate(Py.str(v), a, kw);
            case "striptags" -> String.join(" ", StringMethods.split(Py.str(v).replaceAll("(?s)<!--.*?-->|<[^>]*>", ""), null, -1)
                    .stream().map(Object::toString).toList());
            case "indent" -> indent(v, a, kw);
            case "format" -> {
                if (!a.isEmpty() && !kw.isEmpty()) {
                    throw new TemplateException("can't handle positional and keyword arguments at the same time");
                }
                yield PyFormat.percent(Py.str(v), kw.isEmpty() ? new Tuple(a) : kw);
            }
            case "default", "d" -> {
                Object dflt = arg(a, kw, 0, "default_value", "");
                boolean bool = Py.truthy(arg(a, kw, 1, "boolean", false));
                yield v instanceof Undefined || (bool && !Py.truthy(v)) ? dflt : v;
            }
            case "tojson" -> tojson(v, a, kw);
            case "items" -> {
                if (v instanceof Undefined) {
                    yield new ArrayList<>();
                }
                if (!(v instanceof Map<?, ?> m)) {
                    throw new TemplateException("Can only get item pairs from a mapping.");
                }
                yield Attributes.items(m);
            }
            case "list" -> Py.iterate(v);
            case "first" -> {
                List<Object> l = Py.iterate(v);
                yield l.isEmpty() ? new Undefined("No first item, sequence was empty.") : l.getFirst();
            }
            case "last" -> {
                List<Object> l = Py.iterate(v);
                yield l.isEmpty() ? new Undefined("No last item, sequence was empty.") : l.getLast();
            }
            case "reverse" -> {
                if (v instanceof String s) {
                    yield new StringBuilder(s).reverse().toString();
                }
                List<Object> l = Py.iterate(v);
                java.util.Collections.reverse(l);
                yield l;
            }
            case "join" -> {
                String sep = Py.str(arg(a, kw, 0, "d", ""));
                Object attr = arg(a, kw, 1, "attribute", null);
                yield String.join(sep, Py.iterate(v).stream().map(x -> Py.str(attr == null ? x : Attributes.path(x, attr))).toList());
            }
            case "int" -> toInt(v, arg(a, kw, 0, "default", 0L), arg(a, kw, 1, "base", 10L));
            case "float" -> toFloat(v, arg(a, kw, 0, "default", 0.0));
            case "abs" -> {
                if (v instanceof Double d) {
                    yield Math.abs(d);
                }
                if (v instanceof Long || v instanceof Boolean) {
                    yield Math.abs(Py.toLong(v));
                }
                throw new TemplateException("bad operand type for abs(): '" + Py.typeName(v) + "'");
            }
            case "round" -> round(v, (int) Py.toLong(arg(a, kw, 0, "precision", 0L)), Py.str(arg(a, kw, 1, "method", "common")));
            case "sort" -> {
                boolean reverse = Py.truthy(arg(a, kw, 0, "reverse", false));
                boolean caseSensitive = Py.truthy(arg(a, kw, 1, "case_sensitive", false));
                Object attr = arg(a, kw, 2, "attribute", null);
                List<Object> l = Py.iterate(v);
                Comparator<Object> byKey = (x, y) -> compareKeys(x, y, attr, caseSensitive);
                l.sort(reverse ? byKey.reversed() : byKey); // stable both ways, as Python's sorted(reverse=True)
                yield l;
            }
            case "dictsort" -> {
                if (v instanceof Undefined u) {
                    throw u.error();
                }
                if (!(v instanceof Map<?, ?> m)) {
                    throw new TemplateException("'" + Py.typeName(v) + "' object has no attribute 'items'");
                }
                boolean caseSensitive = Py.truthy(arg(a, kw, 0, "case_sensitive", false));
                String by = Py.str(arg(a, kw, 1, "by", "key"));
                boolean reverse = Py.truthy(arg(a, kw, 2, "reverse", false));
                int pos = switch (by) {
                    case "key" -> 0;
                    case "value" -> 1;
                    default -> throw new TemplateException("You can only sort by either \"key\" or \"value\"");
                };
                List<Object> l = Attributes.items(m);
                Comparator<Object> byKey = (x, y) -> Py.compare(ignoreCase(((List<?>) x).get(pos), caseSensitive),
                        ignoreCase(((List<?>) y).get(pos), caseSensitive));
                l.sort(reverse ? byKey.reversed() : byKey);
                yield l;
            }
            case "unique" -> {
                boolean caseSensitive = Py.truthy(arg(a, kw, 0, "case_sensitive", false));
                Object attr = arg(a, kw, 1, "attribute", null);
                List<Object> out = new ArrayList<>();
                List<Object> seen = new ArrayList<>();
                for (Object x : Py.iterate(v)) {
                    Object key = ignoreCase(attr == null ? x : Attributes.path(x, attr), caseSensitive);
                    if (seen.stream().noneMatch(y -> Py.eq(key, y))) {
                        seen.add(key);
                        out.add(x);
                    }
                }
                yield out;
            }
            case "min", "max" -> {
                boolean caseSensitive = Py.truthy(arg(a, kw, 0, "case_sensitive", false));
                Object attr = arg(a, kw, 1, "attribute", null);
                List<Object> l = Py.iterate(v);
                if (l.isEmpty()) {
                    yield new Undefined("No aggregated item, sequence was empty.");
                }
                Object best = l.getFirst();
                for (Object x : l) {
                    int c = compareKeys(x, best, attr, caseSensitive);
                    if (name.equals("min") ? c < 0 : c > 0) {
                        best = x;
                    }
                }
                yield best;
            }
            case "sum" -> {
                Object attr = arg(a, kw, 0, "attribute", null);
                Object total = arg(a, kw, 1, "start", 0L);
                for (Object x : Py.iterate(v)) {
                    total = Py.arithmetic("+", total, attr == null ? x : Attributes.path(x, attr));
                }
                yield total;
            }
            case "map" -> {
                List<Object> out = new ArrayList<>();
                if (a.isEmpty() && kw.containsKey("attribute")) {
                    Object attr = kw.get("attribute");
                    for (Object x : Py.iterate(v)) {
                        Object r = Attributes.path(x, attr);
                        out.add(r instanceof Undefined && kw.containsKey("default") ? kw.get("default") : r);
                    }
                    yield out;
                }
                if (a.isEmpty()) {
                    throw new TemplateException("map requires a filter argument");
                }
                String filter = Py.str(a.get(0));
                for (Object x : Py.iterate(v)) {
                    out.add(apply(filter, x, a.subList(1, a.size()), kw));
                }
                yield out;
            }
            case "select", "reject", "selectattr", "rejectattr" -> {
                boolean attrMode = name.endsWith("attr");
                boolean keep = name.startsWith("select");
                List<Object> out = new ArrayList<>();
                for (Object x : Py.iterate(v)) {
                    Object subject = attrMode ? Attributes.path(x, a.get(0)) : x;
                    int testAt = attrMode ? 1 : 0;
                    boolean passed = a.size() > testAt ? Tests.apply(Py.str(a.get(testAt)), subject, a.subList(testAt + 1, a.size()))
                            : Py.truthy(subject);
                    if (passed == keep) {
                        out.add(x);
                    }
                }
                yield out;
            }
            case "batch" -> {
                int size = (int) Py.toLong(arg(a, kw, 0, "linecount", null));
                Object fill = arg(a, kw, 1, "fill_with", null);
                List<Object> out = new ArrayList<>();
                List<Object> row = new ArrayList<>();
                for (Object x : Py.iterate(v)) {
                    if (row.size() == size) {
                        out.add(row);
                        row = new ArrayList<>();
                    }
                    row.add(x);
                }
                if (!row.isEmpty()) {
                    while (fill != null && row.size() < size) {
                        row.add(fill);
                    }
                    out.add(row);
                }
                yield out;
            }
            case "slice" -> slice(Py.iterate(v), (int) Py.toLong(arg(a, kw, 0, "slices", null)), arg(a, kw, 1, "fill_with", null));
            case "attr" -> {
                Object attrName = arg(a, kw, 0, "name", null);
                if (v instanceof Map<?, ?> && !(attrName instanceof String s && Set.of("get", "items", "keys", "values", "copy").contains(s))) {
                    yield new Undefined("'dict object' has no attribute " + Py.repr(attrName)); // attr() is getattr only: no item fallback
                }
                yield Attributes.getattr(v, Py.str(attrName));
            }
            default -> throw new TemplateException("No filter named '" + name + "'.");
        };
    }

    private static String optionalStr(Object x) {
        return x == null ? null : Py.str(x);
    }

    static String escape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&#34;").replace("'", "&#39;");
    }

    /** Jinja's title filter (not str.title): each run after a dash, space or opening bracket gets its first char upper-cased, the rest lower. */
    private static String title(String s) {
        StringBuilder b = new StringBuilder();
        Matcher m = WORD_BEGINNING.matcher(s);
        int from = 0;
        List<String> parts = new ArrayList<>();
        while (m.find()) {
            parts.add(s.substring(from, m.start()));
            parts.add(m.group());
            from = m.end();
        }
        parts.add(s.substring(from));
        for (String item : parts) {
            if (item.isEmpty()) {
                continue;
            }
            int first = item.codePointAt(0);
            b.append(new String(Character.toChars(first)).toUpperCase(Locale.ROOT))
                    .append(item.substring(Character.charCount(first)).toLowerCase(Locale.ROOT));
        }
        return b.toString();
    }

    private static String truncate(String s, List<Object> a, Map<String, Object> kw) {
        int length = (int) Py.toLong(arg(a, kw, 0, "length", 255L));
        boolean killwords = Py.truthy(arg(a, kw, 1, "killwords", false));
        String end = Py.str(arg(a, kw, 2, "end", "..."));
        Object leewayArg = arg(a, kw, 3, "leeway", null);
        int leeway = leewayArg == null ? 5 : (int) Py.toLong(leewayArg);
        int n = s.codePointCount(0, s.length());
        if (n <= length + leeway) {
            return s;
        }
        String head = (String) Py.slice(s, null, (long) (length - end.length()), null);
        if (killwords) {
            return head + end;
        }
        int space = head.lastIndexOf(' ');
        return (space < 0 ? head : head.substring(0, space)) + end;
    }

    /** Jinja 3's indent: lines as str.splitlines() sees them, rejoined with "\n"; blank lines stay bare unless blank=true. */
    private static String indent(Object v, List<Object> a, Map<String, Object> kw) {
        if (v instanceof Undefined u) {
            throw u.error();
        }
        Object width = arg(a, kw, 0, "width", 4L);
        boolean first = Py.truthy(arg(a, kw, 1, "first", false));
        boolean blank = Py.truthy(arg(a, kw, 2, "blank", false));
        String pad = width instanceof String w ? w : " ".repeat((int) Py.toLong(width));
        List<Object> lines = StringMethods.splitlines(Py.str(v) + "\n", false);
        StringBuilder b = new StringBuilder((String) lines.getFirst());
        for (int i = 1; i < lines.size(); i++) {
            String line = (String) lines.get(i);
            b.append('\n').append(blank || !line.isEmpty() ? pad : "").append(line);
        }
        return first ? pad + b : b.toString();
    }

    private static Object tojson(Object v, List<Object> a, Map<String, Object> kw) {
        // HF's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) over json.dumps
        boolean ascii = Py.truthy(arg(a, kw, 0, "ensure_ascii", false));
        Object indent = arg(a, kw, 1, "indent", null);
        Object seps = arg(a, kw, 2, "separators", null);
        boolean sortKeys = Py.truthy(arg(a, kw, 3, "sort_keys", false));
        String itemSep = null, keySep = null;
        if (seps != null) {
            List<Object> l = Py.iterate(seps);
            if (l.size() != 2) {
                throw new TemplateException("separators must be an (item_separator, key_separator) pair");
            }
            itemSep = Py.str(l.get(0));
            keySep = Py.str(l.get(1));
        }
        String indentText = indent == null ? null : indent instanceof String s ? s : " ".repeat((int) Math.max(0, Py.toLong(indent)));
        return PyJson.dumps(v, indentText, itemSep, keySep, sortKeys, ascii);
    }

    private static Object ignoreCase(Object x, boolean caseSensitive) {
        return !caseSensitive && x instanceof String s ? s.toLowerCase(Locale.ROOT) : x;
    }

    /** Orders by the attribute (comma-separated paths compare in turn), lower-cased strings unless case-sensitive. */
    private static int compareKeys(Object x, Object y, Object attr, boolean caseSensitive) {
        if (attr == null) {
            return Py.compare(ignoreCase(x, caseSensitive), ignoreCase(y, caseSensitive));
        }
        for (String part : Py.str(attr).split(",")) {
            int c = Py.compare(ignoreCase(Attributes.path(x, part), caseSensitive), ignoreCase(Attributes.path(y, part), caseSensitive));
            if (c != 0) {
                return c;
            }
        }
        return 0;
    }

    private static List<Object> slice(List<Object> seq, int slices, Object fill) {
        int perSlice = seq.size() / slices, withExtra = seq.size() % slices, offset = 0;
        List<Object> out = new ArrayList<>();
        for (int k = 0; k < slices; k++) {
            int start = offset + k * perSlice;
            if (k < withExtra) {
                offset++;
            }
            int end = offset + (k + 1) * perSlice;
            List<Object> part = new ArrayList<>(seq.subList(start, end));
            if (fill != null && k >= withExtra) {
                part.add(fill);
            }
            out.add(part);
        }
        return out;
    }

    /** Python's int(): base-10 text with optional sign, spaces and underscores, else via float(); the default on failure. */
    private static Object toInt(Object v, Object dflt, Object base) {
        if (v instanceof Undefined u) {
            throw u.error();
        }
        if (v instanceof String s) {
            Long parsed = parseInt(s, (int) Py.toLong(base));
            if (parsed != null) {
                return parsed;
            }
            Double d = parseFloat(s);
            return d != null && !d.isNaN() && !d.isInfinite() ? (Object) (long) (double) d : dflt;
        }
        if (v instanceof Double d) {
            return d.isNaN() || d.isInfinite() ? dflt : (Object) (long) (double) d;
        }
        if (v instanceof Long || v instanceof Boolean) {
            return Py.toLong(v);
        }
        return dflt;
    }

    private static Long parseInt(String s, int base) {
        String t = s.strip();
        boolean neg = false;
        if (t.startsWith("+") || t.startsWith("-")) {
            neg = t.startsWith("-");
            t = t.substring(1);
        }
        String lower = t.toLowerCase(Locale.ROOT);
        if ((base == 16 && lower.startsWith("0x")) || (base == 8 && lower.startsWith("0o")) || (base == 2 && lower.startsWith("0b"))) {
            t = t.substring(2);
            if (t.startsWith("_")) {
                t = t.substring(1);
            }
        }
        if (t.isEmpty() || t.startsWith("_") || t.endsWith("_") || t.contains("__")) {
            return null;
        }
        try {
            long x = Long.parseLong(t.replace("_", ""), base);
            return neg ? -x : x;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** Python's float() on text: decimal or exponent notation, nan, inf, infinity; not Java's hex floats or "1d". */
    private static Double parseFloat(String s) {
        String t = s.strip().toLowerCase(Locale.ROOT).replace("_", "");
        String body = t.startsWith("+") || t.startsWith("-") ? t.substring(1) : t;
        if (body.equals("nan") || body.equals("inf") || body.equals("infinity")) {
            double x = body.equals("nan") ? Double.NaN : Double.POSITIVE_INFINITY;
            return t.startsWith("-") ? -x : x;
        }
        if (!body.matches("(\\d+\\.?\\d*|\\.\\d+)(e[+-]?\\d+)?")) {
            return null;
        }
        return Double.parseDouble(t);
    }

    private static Object toFloat(Object v, Object dflt) {
        if (v instanceof Undefined u) {
            throw u.error();
        }
        if (v instanceof String s) {
            Double d = parseFloat(s);
            return d == null ? dflt : d;
        }
        return Py.isNumber(v) ? (Object) Py.toDouble(v) : dflt;
    }

    /** round(): Python's round() for 'common' (an int stays an int), math.ceil/floor over 10**precision otherwise (a float). */
    private static Object round(Object v, int precision, String method) {
        if (!Py.isNumber(v)) {
            throw new TemplateException("type " + Py.typeName(v) + " doesn't define __round__ method");
        }
        if (!method.equals("common") && !method.equals("ceil") && !method.equals("floor")) {
            throw new TemplateException("method must be common, ceil or floor");
        }
        if (method.equals("common")) {
            if (!(v instanceof Double d)) {
                long l = Py.toLong(v);
                return precision >= 0 ? l : new BigDecimal(l).setScale(precision, RoundingMode.HALF_EVEN).longValue();
            }
            if (d.isNaN() || d.isInfinite()) {
                return d;
            }
            double r = new BigDecimal(d).setScale(precision, RoundingMode.HALF_EVEN).doubleValue();
            return r == 0 && (d < 0 || 1 / d < 0) ? -0.0 : r;
        }
        double scale = Math.pow(10, precision);
        double x = Py.toDouble(v) * scale;
        return (method.equals("ceil") ? Math.ceil(x) : Math.floor(x)) / scale;
    }
}
