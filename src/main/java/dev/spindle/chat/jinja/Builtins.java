package dev.spindle.chat.jinja;

import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** Jinja's filters, tests and globals, and the Python methods of str and dict that templates call. */
final class Builtins {
    private Builtins() {
    }

    // ---- attribute access ------------------------------------------------------------

    /** {@code obj.name}: a method of str/dict (Jinja looks up attributes first), else an item, else Undefined. */
    static Object getattr(Object obj, String name) {
        if (name.startsWith("_")) {
            throw new TemplateException("access to attribute '" + name + "' of '" + Py.typeName(obj) + "' object is unsafe");
        }
        return switch (obj) {
            case Undefined u -> throw u.error();
            case Namespace ns -> ns.attrs.containsKey(name) ? ns.attrs.get(name) : new Undefined("'" + name + "' of namespace");
            case LoopContext loop -> loop.attribute(name);
            case String s -> stringMethod(s, name);
            case Map<?, ?> m -> {
                PyCallable method = dictMethod(m, name);
                if (method != null) {
                    yield method;
                }
                yield m.containsKey(name) ? m.get(name) : new Undefined("'dict object' has no attribute '" + name + "'");
            }
            case List<?> l -> {
                if (List.of("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse").contains(name)) {
                    throw new TemplateException("access to attribute '" + name + "' of 'list' object is unsafe (templates cannot modify lists)");
                }
                if (name.equals("index") || name.equals("count")) {
                    yield (PyCallable) (args, kw) -> name.equals("count")
                            ? (Object) l.stream().filter(x -> Py.eq(x, args.get(0))).count()
                            : (Object) (long) indexOf(l, args.get(0));
                }
                yield new Undefined("'list object' has no attribute '" + name + "'");
            }
            case null -> new Undefined("'None' has no attribute '" + name + "'");
            default -> new Undefined("'" + Py.typeName(obj) + " object' has no attribute '" + name + "'");
        };
    }

    private static int indexOf(List<?> l, Object x) {
        for (int i = 0; i < l.size(); i++) {
            if (Py.eq(l.get(i), x)) {
                return i;
            }
        }
        throw new TemplateException(Py.repr(x) + " is not in list");
    }

    /** {@code obj[key]}: item first, then attribute (Jinja's subscript). */
    static Object getitem(Object obj, Object key) {
        switch (obj) {
            case Undefined u -> throw u.error();
            case Map<?, ?> m -> {
                if (m.containsKey(key)) {
                    return m.get(key);
                }
                return key instanceof String s && dictMethod(m, s) != null ? dictMethod(m, s)
                        : new Undefined("'dict object' has no attribute " + Py.repr(key));
            }
            case List<?> l when key instanceof Long || key instanceof Boolean -> {
                long i = Py.toLong(key);
                if (i < 0) {
                    i += l.size();
                }
                return i >= 0 && i < l.size() ? l.get((int) i) : new Undefined("list index " + key + " out of range");
            }
            case String s when key instanceof Long i0 -> {
                int n = s.codePointCount(0, s.length());
                long i = i0 < 0 ? i0 + n : i0;
                if (i < 0 || i >= n) {
                    return new Undefined("string index " + i0 + " out of range");
                }
                int at = s.offsetByCodePoints(0, (int) i);
                return new String(Character.toChars(s.codePointAt(at)));
            }
            default -> {
                if (key instanceof String name) {
                    return getattr(obj, name);
                }
                return new Undefined("'" + Py.typeName(obj) + " object' has no item " + Py.repr(key));
            }
        }
    }

    private static PyCallable dictMethod(Map<?, ?> m, String name) {
        return switch (name) {
            case "get" -> (args, kw) -> m.containsKey(args.get(0)) ? m.get(args.get(0)) : args.size() > 1 ? args.get(1) : kw.getOrDefault("default", null);
            case "items" -> (args, kw) -> items(m);
            case "keys" -> (args, kw) -> new ArrayList<Object>(m.keySet());
            case "values" -> (args, kw) -> new ArrayList<Object>(m.values());
            default -> null;
        };
    }

    /** {@code dict.items()}: [key, value] pairs in insertion order (values may be None). */
    static List<Object> items(Map<?, ?> m) {
        List<Object> out = new ArrayList<>();
        for (Map.Entry<?, ?> e : m.entrySet()) {
            List<Object> pair = new ArrayList<>(2);
            pair.add(e.getKey());
            pair.add(e.getValue());
            out.add(new Tuple(pair));
        }
        return out;
    }

    private static Object stringMethod(String s, String name) {
        return switch (name) {
            case "startswith" -> (PyCallable) (a, kw) -> anyOf(a.get(0), s::startsWith);
            case "endswith" -> (PyCallable) (a, kw) -> anyOf(a.get(0), s::endsWith);
            case "strip" -> (PyCallable) (a, kw) -> strip(s, arg(a, 0), true, true);
            case "lstrip" -> (PyCallable) (a, kw) -> strip(s, arg(a, 0), true, false);
            case "rstrip" -> (PyCallable) (a, kw) -> strip(s, arg(a, 0), false, true);
            case "split" -> (PyCallable) (a, kw) -> split(s, arg(a, 0) != null ? arg(a, 0) : kw.get("sep") == null ? null : Py.str(kw.get("sep")),
                    a.size() > 1 ? Py.toLong(a.get(1)) : kw.containsKey("maxsplit") ? Py.toLong(kw.get("maxsplit")) : -1);
            case "rsplit" -> (PyCallable) (a, kw) -> rsplit(s, arg(a, 0), a.size() > 1 ? Py.toLong(a.get(1)) : -1);
            case "splitlines" -> (PyCallable) (a, kw) -> splitlines(s);
            case "upper" -> (PyCallable) (a, kw) -> s.toUpperCase(Locale.ROOT);
            case "lower" -> (PyCallable) (a, kw) -> s.toLowerCase(Locale.ROOT);
            case "title" -> (PyCallable) (a, kw) -> title(s);
            case "capitalize" -> (PyCallable) (a, kw) -> capitalize(s);
            case "replace" -> (PyCallable) (a, kw) -> replace(s, Py.str(a.get(0)), Py.str(a.get(1)), a.size() > 2 ? Py.toLong(a.get(2)) : -1);
            case "find" -> (PyCallable) (a, kw) -> (long) cpIndex(s, s.indexOf(Py.str(a.get(0))));
            case "rfind" -> (PyCallable) (a, kw) -> (long) cpIndex(s, s.lastIndexOf(Py.str(a.get(0))));
            case "count" -> (PyCallable) (a, kw) -> count(s, Py.str(a.get(0)));
            case "join" -> (PyCallable) (a, kw) -> String.join(s, Py.iterate(a.get(0)).stream().map(Py::str).toList());
            case "format" -> (PyCallable) (a, kw) -> format(s, a, kw);
            case "isdigit" -> (PyCallable) (a, kw) -> !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
            case "isalpha" -> (PyCallable) (a, kw) -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
            case "isalnum" -> (PyCallable) (a, kw) -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
            case "isspace" -> (PyCallable) (a, kw) -> !s.isEmpty() && s.codePoints().allMatch(Py::isSpace);
            case "isupper" -> (PyCallable) (a, kw) -> !s.equals(s.toLowerCase(Locale.ROOT)) && s.equals(s.toUpperCase(Locale.ROOT));
            case "islower" -> (PyCallable) (a, kw) -> !s.equals(s.toUpperCase(Locale.ROOT)) && s.equals(s.toLowerCase(Locale.ROOT));
            case "zfill" -> (PyCallable) (a, kw) -> "0".repeat((int) Math.max(0, Py.toLong(a.get(0)) - s.length())) + s;
            default -> new Undefined("'str object' has no attribute '" + name + "'");
        };
    }

    private static List<Object> splitlines(String s) {
        List<Object> out = new ArrayList<>(List.of((Object[]) s.split("\r\n|\r|\n", -1)));
        if (!out.isEmpty() && ((String) out.getLast()).isEmpty()) {
            out.removeLast(); // a trailing line break ends the last line, it does not start another
        }
        return out;
    }

    private static String arg(List<Object> a, int i) {
        return a.size() > i && a.get(i) != null ? Py.str(a.get(i)) : null;
    }

    private static boolean anyOf(Object prefixes, java.util.function.Predicate<String> p) {
        if (prefixes instanceof List<?> l) {
            return l.stream().anyMatch(x -> p.test(Py.str(x)));
        }
        return p.test(Py.str(prefixes));
    }

    private static int cpIndex(String s, int charIndex) {
        return charIndex < 0 ? -1 : s.codePointCount(0, charIndex);
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
        java.util.function.IntPredicate drop = chars == null ? Py::isSpace : cp -> chars.codePoints().anyMatch(c -> c == cp);
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
                    int j = cps.length;
                    while (j > i && Py.isSpace(cps[j - 1])) {
                        j--;
                    }
                    out.add(new String(cps, i, j - i));
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

    private static List<Object> rsplit(String s, String sep, long max) {
        if (max < 0 || sep == null) {
            return split(s, sep, max);
        }
        List<Object> out = new ArrayList<>();
        int end = s.length();
        for (int i = s.lastIndexOf(sep, end - sep.length()); i >= 0 && out.size() < max; i = s.lastIndexOf(sep, end - sep.length())) {
            out.addFirst(s.substring(i + sep.length(), end));
            end = i;
            if (end < sep.length()) {
                i = s.lastIndexOf(sep, end - sep.length());
                if (i < 0) {
                    break;
                }
            }
        }
        out.addFirst(s.substring(0, end));
        return out;
    }

    private static String replace(String s, String old, String neu, long count) {
        if (count < 0) {
            return s.replace(old, neu);
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

    private static String title(String s) {
        StringBuilder b = new StringBuilder();
        boolean prevCased = false;
        for (int cp : s.codePoints().toArray()) {
            b.appendCodePoint(prevCased ? Character.toLowerCase(cp) : Character.toTitleCase(cp));
            prevCased = Character.isLetter(cp);
        }
        return b.toString();
    }

    private static String capitalize(String s) {
        if (s.isEmpty()) {
            return s;
        }
        int first = s.codePointAt(0);
        return new String(Character.toChars(Character.toTitleCase(first))) + s.substring(Character.charCount(first)).toLowerCase(Locale.ROOT);
    }

    private static String format(String fmt, List<Object> args, Map<String, Object> kw) {
        StringBuilder b = new StringBuilder();
        int auto = 0;
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if (c == '{' && i + 1 < fmt.length() && fmt.charAt(i + 1) == '{') {
                b.append('{');
                i++;
            } else if (c == '}' && i + 1 < fmt.length() && fmt.charAt(i + 1) == '}') {
                b.append('}');
                i++;
            } else if (c == '{') {
                int end = fmt.indexOf('}', i);
                String field = fmt.substring(i + 1, end);
                Object v = field.isEmpty() ? args.get(auto++) : field.chars().allMatch(Character::isDigit) ? args.get(Integer.parseInt(field)) : kw.get(field);
                b.append(Py.str(v));
                i = end;
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    /** {@code "fmt" % args} for %s, %d, %r, %f and %%. */
    static String percentFormat(String fmt, Object args) {
        List<Object> values = args instanceof List<?> l ? new ArrayList<>(l) : new ArrayList<>(java.util.Collections.singletonList(args));
        StringBuilder b = new StringBuilder();
        int k = 0;
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if (c != '%' || i + 1 >= fmt.length()) {
                b.append(c);
                continue;
            }
            char t = fmt.charAt(++i);
            switch (t) {
                case '%' -> b.append('%');
                case 's' -> b.append(Py.str(values.get(k++)));
                case 'r' -> b.append(Py.repr(values.get(k++)));
                case 'd', 'i' -> b.append(Py.toLong(values.get(k++)));
                case 'f' -> b.append(String.format(Locale.ROOT, "%f", Py.toDouble(values.get(k++))));
                default -> throw new TemplateException("unsupported format character '" + t + "'");
            }
        }
        return b.toString();
    }

    // ---- filters ---------------------------------------------------------------------

    static Object filter(String name, Object v, List<Object> a, Map<String, Object> kw, Interpreter in) {
        switch (name) {
            case "length", "count" -> {
                return Py.len(v);
            }
            case "trim" -> {
                return strip(Py.str(v), arg(a, 0), true, true);
            }
            case "replace" -> {
                return replace(Py.str(v), Py.str(a.get(0)), Py.str(a.get(1)), a.size() > 2 ? Py.toLong(a.get(2)) : -1);
            }
            case "string" -> {
                return Py.str(v);
            }
            case "safe", "e", "escape", "forceescape" -> {
                if (name.equals("safe")) {
                    return v;
                }
                return Py.str(v).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&#34;").replace("'", "&#39;");
            }
            case "tojson" -> {
                Object indent = a.size() > 1 ? a.get(1) : kw.get("indent");
                if (!a.isEmpty() && kw.isEmpty() && a.size() == 1 && (a.get(0) instanceof Long)) {
                    indent = a.get(0); // Jinja's own tojson(indent)
                }
                Object seps = kw.get("separators");
                String itemSep = null, keySep = null;
                if (seps instanceof List<?> l && l.size() == 2) {
                    itemSep = Py.str(l.get(0));
                    keySep = Py.str(l.get(1));
                }
                return PyJson.dumps(v, indent == null ? null : (int) Py.toLong(indent), itemSep, keySep, Py.truthy(kw.get("sort_keys")));
            }
            case "items" -> {
                if (v instanceof Undefined) {
                    return List.of();
                }
                if (v instanceof Map<?, ?> m) {
                    return items(m);
                }
                throw new TemplateException("items filter needs a mapping, got " + Py.typeName(v));
            }
            case "list" -> {
                return Py.iterate(v);
            }
            case "first" -> {
                List<Object> l = Py.iterate(v);
                return l.isEmpty() ? new Undefined("first of an empty sequence") : l.getFirst();
            }
            case "last" -> {
                List<Object> l = Py.iterate(v);
                return l.isEmpty() ? new Undefined("last of an empty sequence") : l.getLast();
            }
            case "join" -> {
                String sep = a.isEmpty() ? Py.str(kw.getOrDefault("d", "")) : Py.str(a.get(0));
                Object attr = a.size() > 1 ? a.get(1) : kw.get("attribute");
                return String.join(sep, Py.iterate(v).stream().map(x -> Py.str(attr == null ? x : getitem(x, attr))).toList());
            }
            case "upper" -> {
                return Py.str(v).toUpperCase(Locale.ROOT);
            }
            case "lower" -> {
                return Py.str(v).toLowerCase(Locale.ROOT);
            }
            case "title" -> {
                return title(Py.str(v));
            }
            case "capitalize" -> {
                return capitalize(Py.str(v));
            }
            case "default", "d" -> {
                boolean bool = a.size() > 1 ? Py.truthy(a.get(1)) : Py.truthy(kw.get("boolean"));
                Object dflt = a.isEmpty() ? kw.getOrDefault("default_value", "") : a.get(0);
                return v instanceof Undefined || (bool && !Py.truthy(v)) ? dflt : v;
            }
            case "int" -> {
                try {
                    return v instanceof String s ? Long.parseLong(s.strip()) : Py.toLong(v);
                } catch (RuntimeException e) {
                    return a.isEmpty() ? 0L : a.get(0);
                }
            }
            case "float" -> {
                try {
                    return v instanceof String s ? Double.parseDouble(s.strip()) : Py.toDouble(v);
                } catch (RuntimeException e) {
                    return a.isEmpty() ? 0.0 : a.get(0);
                }
            }
            case "abs" -> {
                return v instanceof Double d ? (Object) Math.abs(d) : (Object) Math.abs(Py.toLong(v));
            }
            case "round" -> {
                int precision = a.isEmpty() ? 0 : (int) Py.toLong(a.get(0));
                double s = Math.pow(10, precision);
                return Math.rint(Py.toDouble(v) * s) / s;
            }
            case "reverse" -> {
                if (v instanceof String s) {
                    return new StringBuilder(s).reverse().toString();
                }
                List<Object> l = Py.iterate(v);
                java.util.Collections.reverse(l);
                return l;
            }
            case "sort" -> {
                List<Object> l = Py.iterate(v);
                Object attr = kw.get("attribute");
                l.sort((x, y) -> Py.compare(attr == null ? x : getitem(x, attr), attr == null ? y : getitem(y, attr)));
                if (Py.truthy(a.isEmpty() ? kw.get("reverse") : a.get(0))) {
                    java.util.Collections.reverse(l);
                }
                return l;
            }
            case "dictsort" -> {
                List<Object> l = items((Map<?, ?>) v);
                l.sort((x, y) -> Py.compare(((List<?>) x).get(0), ((List<?>) y).get(0)));
                return l;
            }
            case "unique" -> {
                List<Object> out = new ArrayList<>();
                for (Object x : Py.iterate(v)) {
                    if (out.stream().noneMatch(y -> Py.eq(x, y))) {
                        out.add(x);
                    }
                }
                return out;
            }
            case "min", "max" -> {
                List<Object> l = Py.iterate(v);
                if (l.isEmpty()) {
                    return new Undefined("no " + name + " of an empty sequence");
                }
                Object best = l.getFirst();
                for (Object x : l) {
                    int c = Py.compare(x, best);
                    if (name.equals("min") ? c < 0 : c > 0) {
                        best = x;
                    }
                }
                return best;
            }
            case "sum" -> {
                Object total = a.isEmpty() ? (Object) 0L : a.get(0);
                for (Object x : Py.iterate(v)) {
                    total = Py.add(total, x);
                }
                return total;
            }
            case "map" -> {
                List<Object> out = new ArrayList<>();
                for (Object x : Py.iterate(v)) {
                    if (kw.containsKey("attribute")) {
                        Object r = getitem(x, kw.get("attribute"));
                        out.add(r instanceof Undefined && kw.containsKey("default") ? kw.get("default") : r);
                    } else {
                        out.add(filter(Py.str(a.get(0)), x, a.subList(1, a.size()), Map.of(), in));
                    }
                }
                return out;
            }
            case "select", "reject", "selectattr", "rejectattr" -> {
                boolean attrMode = name.endsWith("attr");
                boolean keep = name.startsWith("select");
                List<Object> out = new ArrayList<>();
                for (Object x : Py.iterate(v)) {
                    Object subject = attrMode ? getitem(x, a.get(0)) : x;
                    int testAt = attrMode ? 1 : 0;
                    boolean passed = a.size() > testAt ? test(Py.str(a.get(testAt)), subject, a.subList(testAt + 1, a.size()))
                            : Py.truthy(subject);
                    if (passed == keep) {
                        out.add(x);
                    }
                }
                return out;
            }
            case "indent" -> {
                int width = a.isEmpty() ? (int) Py.toLong(kw.getOrDefault("width", 4L)) : (int) Py.toLong(a.get(0));
                boolean first = a.size() > 1 ? Py.truthy(a.get(1)) : Py.truthy(kw.get("first"));
                String pad = " ".repeat(width);
                String s = Py.str(v);
                String[] lines = s.split("\n", -1);
                StringBuilder b = new StringBuilder();
                for (int i = 0; i < lines.length; i++) {
                    if (i > 0) {
                        b.append('\n');
                    }
                    b.append((i > 0 || first) && !lines[i].isEmpty() ? pad : "").append(lines[i]);
                }
                return b.toString();
            }
            case "wordcount" -> {
                return (long) split(Py.str(v), null, -1).size();
            }
            case "center" -> {
                int width = a.isEmpty() ? 80 : (int) Py.toLong(a.get(0));
                String s = Py.str(v);
                int total = Math.max(0, width - s.length());
                int left = total / 2 + (total % 2 & width % 2);
                return " ".repeat(left) + s + " ".repeat(total - left);
            }
            default -> throw new TemplateException("no filter named '" + name + "'");
        }
    }

    // ---- tests ----------------------------------------------------------------------

    static boolean test(String name, Object v, List<Object> a) {
        return switch (name) {
            case "defined" -> !(v instanceof Undefined);
            case "undefined" -> v instanceof Undefined;
            case "none" -> v == null;
            case "boolean" -> v instanceof Boolean;
            case "true" -> Boolean.TRUE.equals(v);
            case "false" -> Boolean.FALSE.equals(v);
            case "integer" -> v instanceof Long;
            case "float" -> v instanceof Double;
            case "number" -> Py.isNumber(v);
            case "string" -> v instanceof String;
            case "mapping" -> v instanceof Map<?, ?> || v instanceof Namespace;
            case "iterable" -> v instanceof List<?> || v instanceof Map<?, ?> || v instanceof String || v instanceof Undefined;
            case "sequence" -> v instanceof List<?> || v instanceof Map<?, ?> || v instanceof String;
            case "callable" -> v instanceof PyCallable;
            case "sameas" -> v == a.get(0) || (v != null && Py.isNumber(v) && Py.eq(v, a.get(0)) && v.getClass() == a.get(0).getClass());
            case "eq", "equalto", "==" -> Py.eq(v, a.get(0));
            case "ne", "!=" -> !Py.eq(v, a.get(0));
            case "lt", "lessthan", "<" -> Py.compare(v, a.get(0)) < 0;
            case "le", "<=" -> Py.compare(v, a.get(0)) <= 0;
            case "gt", "greaterthan", ">" -> Py.compare(v, a.get(0)) > 0;
            case "ge", ">=" -> Py.compare(v, a.get(0)) >= 0;
            case "in" -> Py.contains(a.get(0), v);
            case "odd" -> Py.toLong(v) % 2 != 0;
            case "even" -> Py.toLong(v) % 2 == 0;
            case "divisibleby" -> Py.toLong(v) % Py.toLong(a.get(0)) == 0;
            case "lower" -> v instanceof String s && s.equals(s.toLowerCase(Locale.ROOT));
            case "upper" -> v instanceof String s && s.equals(s.toUpperCase(Locale.ROOT));
            default -> throw new TemplateException("no test named '" + name + "'");
        };
    }

    // ---- globals --------------------------------------------------------------------

    static Map<String, Object> globals() {
        Map<String, Object> g = new LinkedHashMap<>();
        g.put("raise_exception", (PyCallable) (a, kw) -> {
            throw new RaisedException(a.isEmpty() ? "" : Py.str(a.get(0)));
        });
        g.put("strftime_now", (PyCallable) (a, kw) -> strftime(Py.str(a.get(0)), ZonedDateTime.now()));
        g.put("namespace", (PyCallable) (a, kw) -> {
            Namespace ns = new Namespace();
            if (!a.isEmpty() && a.get(0) instanceof Map<?, ?> m) {
                m.forEach((k, val) -> ns.attrs.put(Py.str(k), val));
            }
            ns.attrs.putAll(kw);
            return ns;
        });
        g.put("range", (PyCallable) (a, kw) -> {
            long start = a.size() > 1 ? Py.toLong(a.get(0)) : 0, stop = Py.toLong(a.get(a.size() > 1 ? 1 : 0));
            long step = a.size() > 2 ? Py.toLong(a.get(2)) : 1;
            List<Object> out = new ArrayList<>();
            for (long i = start; step > 0 ? i < stop : i > stop; i += step) {
                out.add(i);
            }
            return out;
        });
        g.put("dict", (PyCallable) (a, kw) -> new LinkedHashMap<Object, Object>(kw));
        return g;
    }

    /** Python's strftime for the common directives. */
    static String strftime(String fmt, ZonedDateTime t) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if (c != '%' || i + 1 >= fmt.length()) {
                b.append(c);
                continue;
            }
            char d = fmt.charAt(++i);
            switch (d) {
                case 'Y' -> b.append(t.getYear());
                case 'y' -> b.append(String.format("%02d", t.getYear() % 100));
                case 'm' -> b.append(String.format("%02d", t.getMonthValue()));
                case 'd' -> b.append(String.format("%02d", t.getDayOfMonth()));
                case 'e' -> b.append(String.format("%2d", t.getDayOfMonth()));
                case 'H' -> b.append(String.format("%02d", t.getHour()));
                case 'I' -> b.append(String.format("%02d", (t.getHour() + 11) % 12 + 1));
                case 'M' -> b.append(String.format("%02d", t.getMinute()));
                case 'S' -> b.append(String.format("%02d", t.getSecond()));
                case 'p' -> b.append(t.getHour() < 12 ? "AM" : "PM");
                case 'B' -> b.append(t.getMonth().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
                case 'b' -> b.append(t.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
                case 'A' -> b.append(t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
                case 'a' -> b.append(t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
                case 'j' -> b.append(String.format("%03d", t.getDayOfYear()));
                case 'Z' -> b.append(t.getZone().getId());
                case '%' -> b.append('%');
                default -> b.append('%').append(d);
            }
        }
        return b.toString();
    }
}
