package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Python's {@code json.dumps(x, ensure_ascii=?, indent=?, separators=?, sort_keys=?)}, as HF's
 * tojson calls it: keys in insertion order, nothing HTML-escaped, non-ASCII kept unless asked.
 */
final class PyJson {
    private PyJson() {
    }

    /** @param indent the text of one indent level (json.dumps' int n is n spaces), or null for one line */
    static String dumps(Object x, String indent, String itemSep, String keySep, boolean sortKeys, boolean ascii) {
        if (itemSep == null) {
            itemSep = indent == null ? ", " : ",";
        }
        if (keySep == null) {
            keySep = ": ";
        }
        StringBuilder b = new StringBuilder();
        new PyJson.Writer(b, indent, itemSep, keySep, sortKeys, ascii).write(x, 0);
        return b.toString();
    }

    /** One dumps call's settings and output. */
    private record Writer(StringBuilder b, String indent, String itemSep, String keySep, boolean sortKeys, boolean ascii) {
        void write(Object x, int level) {
            if (x == null) {
                b.append("null");
            } else if (x instanceof Boolean bo) {
                b.append(bo ? "true" : "false");
            } else if (x instanceof Long || x instanceof Integer || x instanceof java.math.BigInteger) {
                b.append(x);
            } else if (x instanceof Double d) {
                b.append(Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : PyFloat.repr(d));
            } else if (x instanceof String s) {
                string(b, s, ascii);
            } else if (x instanceof List<?> l) {
                if (l.isEmpty()) {
                    b.append("[]");
                    return;
                }
                b.append('[');
                for (int i = 0; i < l.size(); i++) {
                    if (i > 0) {
                        b.append(itemSep);
                    }
                    newline(level + 1);
                    write(l.get(i), level + 1);
                }
                newline(level);
                b.append(']');
            } else if (x instanceof Map<?, ?> m) {
                if (m.isEmpty()) {
                    b.append("{}");
                    return;
                }
                List<Map.Entry<?, ?>> entries = new ArrayList<>(m.entrySet());
                if (sortKeys) {
                    entries.sort((a, c) -> Py.compare(a.getKey(), c.getKey()));
                }
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : entries) {
                    if (!first) {
                        b.append(itemSep);
                    }
                    first = false;
                    newline(level + 1);
                    string(b, key(e.getKey()), ascii);
                    b.append(keySep);
                    write(e.getValue(), level + 1);
                }
                newline(level);
                b.append('}');
            } else {
                throw new TemplateException("Object of type " + Py.typeName(x) + " is not JSON serializable");
            }
        }

        private void newline(int level) {
            if (indent != null) {
                b.append('\n').append(indent.repeat(level));
            }
        }
    }

    /** json.dumps' key coercion: str as is, numbers by their repr, true/false/null; anything else is refused. */
    private static String key(Object k) {
        return switch (k) {
            case null -> "null";
            case String s -> s;
            case Boolean bo -> bo ? "true" : "false";
            case Long l -> l.toString();
            case Double d -> Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : PyFloat.repr(d);
            default -> throw new TemplateException("keys must be str, int, float, bool or None, not " + Py.typeName(k));
        };
    }

    static void string(StringBuilder b, String s, boolean ascii) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                case '\b' -> b.append("\\b");
                case '\f' -> b.append("\\f");
                default -> {
                    if (c < 0x20 || (ascii && c > 0x7e)) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }
}
