package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Python value semantics for template values. Values are: null (None), Boolean, Long,
 * Double, String, List, Map (insertion-ordered), Undefined, Namespace, LoopContext,
 * PyCallable. Strings are indexed and measured in code points, as Python's are.
 */
final class Py {
    private Py() {
    }

    static String typeName(Object x) {
        if (x == null) {
            return "NoneType";
        }
        return switch (x) {
            case Boolean b -> "bool";
            case Tuple t -> "tuple";
            case Long l -> "int";
            case Double d -> "float";
            case String s -> "str";
            case List<?> l -> "list";
            case Map<?, ?> m -> "dict";
            case Undefined u -> "Undefined";
            case Namespace n -> "Namespace";
            case PyCallable c -> "function";
            default -> x.getClass().getSimpleName();
        };
    }

    static boolean truthy(Object x) {
        if (x == null || x instanceof Undefined) {
            return false;
        }
        return switch (x) {
            case Boolean b -> b;
            case Long l -> l != 0;
            case Double d -> d != 0;
            case String s -> !s.isEmpty();
            case Collection<?> c -> !c.isEmpty();
            case Map<?, ?> m -> !m.isEmpty();
            default -> true;
        };
    }

    /** {@code str(x)}, as {@code {{ x }}} prints it. */
    static String str(Object x) {
        if (x instanceof String s) {
            return s;
        }
        if (x instanceof Undefined) {
            return "";
        }
        return repr(x);
    }

    static String repr(Object x) {
        if (x == null) {
            return "None";
        }
        return switch (x) {
            case Boolean b -> b ? "True" : "False";
            case Long l -> l.toString();
            case Double d -> PyFloat.repr(d);
            case String s -> reprString(s);
            case Tuple t -> {
                StringBuilder b = new StringBuilder("(");
                for (int i = 0; i < t.size(); i++) {
                    b.append(i > 0 ? ", " : "").append(repr(t.get(i)));
                }
                yield b.append(t.size() == 1 ? ",)" : ")").toString();
            }
            case List<?> l -> {
                StringBuilder b = new StringBuilder("[");
                for (int i = 0; i < l.size(); i++) {
                    b.append(i > 0 ? ", " : "").append(repr(l.get(i)));
                }
                yield b.append(']').toString();
            }
            case Map<?, ?> m -> {
                StringBuilder b = new StringBuilder("{");
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    b.append(first ? "" : ", ").append(repr(e.getKey())).append(": ").append(repr(e.getValue()));
                    first = false;
                }
                yield b.append('}').toString();
            }
            case Undefined u -> "Undefined";
            case Namespace n -> "<Namespace " + repr(n.attrs) + ">";
            default -> "<" + typeName(x) + ">";
        };
    }

    private static String reprString(String s) {
        char q = s.contains("'") && !s.contains("\"") ? '"' : '\'';
        StringBuilder b = new StringBuilder().append(q);
        s.codePoints().forEach(cp -> {
            if (cp == q || cp == '\\') {
                b.append('\\').appendCodePoint(cp);
            } else if (cp == '\n') {
                b.append("\\n");
            } else if (cp == '\r') {
                b.append("\\r");
            } else if (cp == '\t') {
                b.append("\\t");
            } else if (cp < 0x20 || cp == 0x7f) {
                b.append(String.format("\\x%02x", cp));
            } else {
                b.appendCodePoint(cp);
            }
        });
        return b.append(q).toString();
    }

    static boolean isNumber(Object x) {
        return x instanceof Long || x instanceof Double || x instanceof Boolean;
    }

    static double toDouble(Object x) {
        return switch (x) {
            case Long l -> l;
            case Double d -> d;
            case Boolean b -> b ? 1 : 0;
            default -> throw new TemplateException("expected a number, got " + typeName(x));
        };
    }

    static long toLong(Object x) {
        return switch (x) {
            case Long l -> l;
            case Boolean b -> b ? 1 : 0;
            case Double d -> (long) (double) d;
            default -> throw new TemplateException("expected an integer, got " + typeName(x));
        };
    }

    private static boolean integral(Object x) {
        return x instanceof Long || x instanceof Boolean;
    }

    static boolean eq(Object a, Object b) {
        if (a instanceof Undefined || b instanceof Undefined) {
            return a instanceof Undefined && b instanceof Undefined;
        }
        if (a == null || b == null) {
            return a == b;
        }
        if (isNumber(a) && isNumber(b)) {
            return integral(a) && integral(b) ? toLong(a) == toLong(b) : toDouble(a) == toDouble(b);
        }
        if (a instanceof List<?> x && b instanceof List<?> y) {
            if (x.size() != y.size() || (a instanceof Tuple) != (b instanceof Tuple)) {
                return false;
            }
            for (int i = 0; i < x.size(); i++) {
                if (!eq(x.get(i), y.get(i))) {
                    return false;
                }
            }
            return true;
        }
        if (a instanceof Map<?, ?> x && b instanceof Map<?, ?> y) {
            if (x.size() != y.size()) {
                return false;
            }
            for (Map.Entry<?, ?> e : x.entrySet()) {
                if (!y.containsKey(e.getKey()) || !eq(e.getValue(), y.get(e.getKey()))) {
                    return false;
                }
            }
            return true;
        }
        return Objects.equals(a, b);
    }

    static int compare(Object a, Object b) {
        undefinedCheck(a);
        undefinedCheck(b);
        if (isNumber(a) && isNumber(b)) {
            return integral(a) && integral(b) ? Long.compare(toLong(a), toLong(b)) : Double.compare(toDouble(a), toDouble(b));
        }
        if (a instanceof String x && b instanceof String y) {
            int[] p = x.codePoints().toArray(), q = y.codePoints().toArray();
            return java.util.Arrays.compare(p, q);
        }
        if (a instanceof List<?> x && b instanceof List<?> y) {
            for (int i = 0; i < Math.min(x.size(), y.size()); i++) {
                if (!eq(x.get(i), y.get(i))) {
                    return compare(x.get(i), y.get(i));
                }
            }
            return Integer.compare(x.size(), y.size());
        }
        throw new TemplateException("'<' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
    }

    static boolean contains(Object container, Object item) {
        return switch (container) {
            case String s when item instanceof String t -> s.contains(t);
            case String s -> throw new TemplateException("'in <string>' requires string as left operand, not " + typeName(item));
            case List<?> l -> l.stream().anyMatch(x -> eq(x, item));
            case Map<?, ?> m -> m.containsKey(item) || (isNumber(item) && m.keySet().stream().anyMatch(k -> isNumber(k) && eq(k, item)));
            case Undefined u -> false; // Undefined iterates as empty, and Python's `in` falls back to iterating
            case null -> throw new TemplateException("argument of type 'NoneType' is not iterable");
            default -> throw new TemplateException("argument of type '" + typeName(container) + "' is not iterable");
        };
    }

    static long len(Object x) {
        return switch (x) {
            case String s -> s.codePointCount(0, s.length());
            case Collection<?> c -> c.size();
            case Map<?, ?> m -> m.size();
            case Undefined u -> 0;
            case null -> throw new TemplateException("object of type 'NoneType' has no len()");
            default -> throw new TemplateException("object of type '" + typeName(x) + "' has no len()");
        };
    }

    /** The items a for loop visits: list elements, dict keys, string characters. */
    static List<Object> iterate(Object x) {
        return switch (x) {
            case List<?> l -> new ArrayList<>(l);
            case Map<?, ?> m -> new ArrayList<>(m.keySet());
            case String s -> {
                List<Object> out = new ArrayList<>();
                s.codePoints().forEach(cp -> out.add(new String(Character.toChars(cp))));
                yield out;
            }
            case Undefined u -> new ArrayList<>();
            case null -> throw new TemplateException("'NoneType' object is not iterable");
            default -> throw new TemplateException("'" + typeName(x) + "' object is not iterable");
        };
    }

    static Object add(Object a, Object b) {
        if (a instanceof String x && b instanceof String y) {
            return x + y;
        }
        if (a instanceof List<?> x && b instanceof List<?> y) {
            List<Object> out = new ArrayList<>(x);
            out.addAll(y);
            return out;
        }
        if (isNumber(a) && isNumber(b)) {
            return integral(a) && integral(b) ? (Object) (toLong(a) + toLong(b)) : (Object) (toDouble(a) + toDouble(b));
        }
        if (a instanceof String) {
            throw new TemplateException("can only concatenate str (not \"" + typeName(b) + "\") to str");
        }
        throw unsupported("+", a, b);
    }

    static Object arithmetic(String op, Object a, Object b) {
        undefinedCheck(a);
        undefinedCheck(b);
        switch (op) {
            case "+":
                return add(a, b);
            case "-":
                if (isNumber(a) && isNumber(b)) {
                    return integral(a) && integral(b) ? (Object) (toLong(a) - toLong(b)) : (Object) (toDouble(a) - toDouble(b));
                }
                break;
            case "*":
                if (isNumber(a) && isNumber(b)) {
                    return integral(a) && integral(b) ? (Object) (toLong(a) * toLong(b)) : (Object) (toDouble(a) * toDouble(b));
                }
                if (integral(a) && (b instanceof String || b instanceof List<?>)) {
                    return arithmetic("*", b, a); // sequence repetition commutes
                }
                if (a instanceof String s && integral(b)) {
                    return s.repeat((int) Math.max(0, toLong(b)));
                }
                if (a instanceof List<?> l && integral(b)) {
                    List<Object> out = new ArrayList<>();
                    for (long i = 0; i < toLong(b); i++) {
                        out.addAll(l);
                    }
                    return a instanceof Tuple ? new Tuple(out) : out;
                }
                break;
            case "/":
                if (isNumber(a) && isNumber(b)) {
                    if (toDouble(b) == 0) {
                        throw new TemplateException("division by zero");
                    }
                    return toDouble(a) / toDouble(b);
                }
                break;
            case "//":
                if (isNumber(a) && isNumber(b)) {
                    if (toDouble(b) == 0) {
                        throw new TemplateException("integer division or modulo by zero");
                    }
                    return integral(a) && integral(b) ? (Object) Math.floorDiv(toLong(a), toLong(b)) : (Object) Math.floor(toDouble(a) / toDouble(b));
                }
                break;
            case "%":
                if (a instanceof String fmt) {
                    return PyFormat.percent(fmt, b);
                }
                if (isNumber(a) && isNumber(b)) {
                    if (toDouble(b) == 0) {
                        throw new TemplateException("integer division or modulo by zero");
                    }
                    if (integral(a) && integral(b)) {
                        return Math.floorMod(toLong(a), toLong(b));
                    }
                    double x = toDouble(a), y = toDouble(b);
                    return x - Math.floor(x / y) * y;
                }
                break;
            case "**":
                if (isNumber(a) && isNumber(b)) {
                    if (integral(a) && integral(b) && toLong(b) >= 0) {
                        return java.math.BigInteger.valueOf(toLong(a)).pow((int) toLong(b)).longValue();
                    }
                    return Math.pow(toDouble(a), toDouble(b));
                }
                break;
            default:
                break;
        }
        throw unsupported(op, a, b);
    }

    static void undefinedCheck(Object x) {
        if (x instanceof Undefined u) {
            throw u.error();
        }
    }

    private static TemplateException unsupported(String op, Object a, Object b) {
        return new TemplateException("unsupported operand type(s) for " + op + ": '" + typeName(a) + "' and '" + typeName(b) + "'");
    }

    /** Python slicing over lists and (code points of) strings. */
    static Object slice(Object x, Object start, Object stop, Object step) {
        long st = step == null ? 1 : toLong(step);
        if (st == 0) {
            throw new TemplateException("slice step cannot be zero");
        }
        List<Object> items;
        boolean isString = x instanceof String;
        if (x instanceof String s) {
            items = iterate(s);
        } else if (x instanceof List<?> l) {
            items = new ArrayList<>(l);
        } else if (x instanceof Undefined u) {
            throw u.error();
        } else {
            throw new TemplateException("'" + typeName(x) + "' object is not subscriptable");
        }
        int n = items.size();
        long lo, hi;
        if (st > 0) {
            lo = start == null ? 0 : clamp(toLong(start), n, 0, n);
            hi = stop == null ? n : clamp(toLong(stop), n, 0, n);
        } else {
            lo = start == null ? n - 1 : clamp(toLong(start), n, -1, n - 1);
            hi = stop == null ? -1 : clamp(toLong(stop), n, -1, n - 1);
        }
        List<Object> out = new ArrayList<>();
        for (long i = lo; st > 0 ? i < hi : i > hi; i += st) {
            out.add(items.get((int) i));
        }
        if (isString) {
            StringBuilder b = new StringBuilder();
            out.forEach(o -> b.append((String) o));
            return b.toString();
        }
        return x instanceof Tuple ? new Tuple(out) : out;
    }

    private static long clamp(long i, int n, long min, long max) {
        if (i < 0) {
            i += n;
        }
        return Math.max(min, Math.min(max, i));
    }

    /** Python's str.isspace() for one code point (Java's isWhitespace misses U+00A0, U+2007, U+202F, U+0085...). */
    static boolean isSpace(int cp) {
        return Character.isWhitespace(cp) || Character.isSpaceChar(cp) || cp == 0x85 || (cp >= 0x1c && cp <= 0x1f);
    }
}
