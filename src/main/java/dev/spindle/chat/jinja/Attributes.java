package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code obj.name} and {@code obj[key]} as Jinja's immutable sandbox resolves them: a
 * method of str, dict or list first for attributes (items for subscripts), then the
 * other; missing gives Undefined, and so do underscore names and the methods that would
 * mutate a list or dict (which raise only once called).
 */
final class Attributes {
    private Attributes() {
    }

    private static final Set<String> LIST_MUTATORS = Set.of("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse");
    private static final Set<String> DICT_MUTATORS = Set.of("update", "pop", "popitem", "setdefault", "clear");

    static Object getattr(Object obj, String name) {
        if (obj instanceof Undefined u) {
            throw u.error();
        }
        if (name.startsWith("_")) {
            return unsafe(obj, name);
        }
        return switch (obj) {
            case Namespace ns -> ns.attrs.containsKey(name) ? ns.attrs.get(name) : missing(obj, name);
            case LoopContext loop -> loop.attribute(name);
            case String s -> {
                PyCallable m = StringMethods.method(s, name);
                yield m != null ? m : missing(obj, name);
            }
            case Map<?, ?> m -> {
                if (DICT_MUTATORS.contains(name)) {
                    yield unsafe(obj, name);
                }
                PyCallable method = dictMethod(m, name);
                if (method != null) {
                    yield method;
                }
                yield m.containsKey(name) ? m.get(name) : missing(obj, name);
            }
            case List<?> l -> {
                if (LIST_MUTATORS.contains(name)) {
                    yield unsafe(obj, name);
                }
                PyCallable method = listMethod(l, name);
                yield method != null ? method : missing(obj, name);
            }
            case null -> new Undefined("'None' has no attribute '" + name + "'");
            default -> missing(obj, name);
        };
    }

    /** {@code obj[key]}: item first, then attribute (Jinja's subscript). */
    static Object getitem(Object obj, Object key) {
        switch (obj) {
            case Undefined u -> throw u.error();
            case null -> {
                return new Undefined("'None' has no attribute " + Py.repr(key));
            }
            case Map<?, ?> m -> {
                if (key instanceof List<?> && !(key instanceof Tuple)) {
                    return new Undefined("unhashable type: 'list'"); // Python's TypeError, which Jinja turns into Undefined
                }
                if (m.containsKey(key)) {
                    return m.get(key);
                }
                Object numeric = numericKey(m, key);
                if (numeric != null) {
                    return m.get(numeric);
                }
                return key instanceof String s ? getattr(obj, s) : new Undefined("'dict object' has no attribute " + Py.repr(key));
            }
            case List<?> l when key instanceof Long || key instanceof Boolean -> {
                long i = Py.toLong(key);
                if (i < 0) {
                    i += l.size();
                }
                return i >= 0 && i < l.size() ? l.get((int) i) : new Undefined(Py.typeName(obj) + " object has no element " + key);
            }
            case String s when key instanceof Long i0 -> {
                int n = s.codePointCount(0, s.length());
                long i = i0 < 0 ? i0 + n : i0;
                if (i < 0 || i >= n) {
                    return new Undefined("str object has no element " + i0);
                }
                int at = s.offsetByCodePoints(0, (int) i);
                return new String(Character.toChars(s.codePointAt(at)));
            }
            default -> {
                if (key instanceof String name) {
                    return getattr(obj, name);
                }
                return new Undefined("'" + Py.typeName(obj) + " object' has no element " + Py.repr(key));
            }
        }
    }

    /** The key a dict stores {@code key} under: an equal numeric key already there keeps its spelling. */
    static Object storedKey(Map<?, ?> m, Object key) {
        Object numeric = m.containsKey(key) ? null : numericKey(m, key);
        return numeric != null ? numeric : key;
    }

    /** Python dict keys 1, 1.0 and True are one key: find the stored spelling of a numeric key. */
    private static Object numericKey(Map<?, ?> m, Object key) {
        if (!Py.isNumber(key)) {
            return null;
        }
        for (Object k : m.keySet()) {
            if (Py.isNumber(k) && Py.eq(k, key)) {
                return k;
            }
        }
        return null;
    }

    /**
     * Jinja's attribute getter for filters ({@code map(attribute=)}, {@code sort(attribute=)}...):
     * "a.b.0" walks item by item, an all-digit part indexes as an int.
     */
    static Object path(Object obj, Object attribute) {
        if (!(attribute instanceof String s)) {
            return getitem(obj, attribute);
        }
        Object v = obj;
        for (String part : s.split("\\.", -1)) {
            Object key = !part.isEmpty() && part.chars().allMatch(Character::isDigit) ? (Object) Long.parseLong(part) : part;
            v = getitem(v, key);
            if (v instanceof Undefined) {
                return v;
            }
        }
        return v;
    }

    private static Undefined missing(Object obj, String name) {
        return new Undefined("'" + Py.typeName(obj) + " object' has no attribute '" + name + "'");
    }

    private static Undefined unsafe(Object obj, String name) {
        return new Undefined("access to attribute '" + name + "' of '" + Py.typeName(obj) + "' object is unsafe.");
    }

    private static PyCallable dictMethod(Map<?, ?> m, String name) {
        return switch (name) {
            case "get" -> (args, kw) -> {
                Object key = args.get(0);
                Object dflt = args.size() > 1 ? args.get(1) : kw.getOrDefault("default", null);
                if (m.containsKey(key)) {
                    return m.get(key);
                }
                Object numeric = numericKey(m, key);
                return numeric != null ? m.get(numeric) : dflt;
            };
            case "items" -> (args, kw) -> items(m);
            case "keys" -> (args, kw) -> new ArrayList<Object>(m.keySet());
            case "values" -> (args, kw) -> new ArrayList<Object>(m.values());
            case "copy" -> (args, kw) -> new java.util.LinkedHashMap<Object, Object>(m);
            default -> null;
        };
    }

    private static PyCallable listMethod(List<?> l, String name) {
        return switch (name) {
            case "count" -> (args, kw) -> l.stream().filter(x -> Py.eq(x, args.get(0))).count();
            case "index" -> (args, kw) -> {
                for (int i = 0; i < l.size(); i++) {
                    if (Py.eq(l.get(i), args.get(0))) {
                        return (long) i;
                    }
                }
                throw new TemplateException(Py.repr(args.get(0)) + " is not in list");
            };
            case "copy" -> (args, kw) -> new ArrayList<Object>(l);
            default -> null;
        };
    }

    /** {@code dict.items()}: (key, value) tuples in insertion order. */
    static List<Object> items(Map<?, ?> m) {
        List<Object> out = new ArrayList<>();
        for (Map.Entry<?, ?> e : m.entrySet()) {
            out.add(Tuple.of(e.getKey(), e.getValue()));
        }
        return out;
    }
}
