package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Python's {@code json.dumps(x, ensure_ascii=False, indent=?, separators=?, sort_keys=?)}, as HF's tojson calls it. */
final class PyJson {
    private PyJson() {
    }

    static String dumps(Object x, Integer indent, String itemSep, String keySep, boolean sortKeys) {
        if (itemSep == null) {
            itemSep = indent == null ? ", " : ",";
        }
        if (keySep == null) {
            keySep = ": ";
        }
        StringBuilder b = new StringBuilder();
        write(b, x, indent, itemSep, keySep, sortKeys, 0);
        return b.toString();
    }

    private static void write(StringBuilder b, Object x, Integer indent, String itemSep, String keySep, boolean sort, int level) {
        if (x == null) {
            b.append("null");
        } else if (x instanceof Boolean bo) {
            b.append(bo ? "true" : "false");
        } else if (x instanceof Long || x instanceof Integer || x instanceof java.math.BigInteger) {
            b.append(x);
        } else if (x instanceof Double d) {
            b.append(Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : PyFloat.repr(d));
        } else if (x instanceof String s) {
            string(b, s);
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
                newline(b, indent, level + 1);
                write(b, l.get(i), indent, itemSep, keySep, sort, level + 1);
            }
            newline(b, indent, level);
            b.append(']');
        } else if (x instanceof Map<?, ?> m) {
            if (m.isEmpty()) {
                b.append("{}");
                return;
            }
            List<Map.Entry<?, ?>> entries = new ArrayList<>(m.entrySet());
            if (sort) {
                entries.sort((a, c) -> Py.compare(a.getKey(), c.getKey()));
            }
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : entries) {
                if (!first) {
                    b.append(itemSep);
                }
                first = false;
                newline(b, indent, level + 1);
                Object k = e.getKey();
                string(b, k instanceof String s ? s : k instanceof Boolean bo ? (bo ? "true" : "false") : k == null ? "null" : Py.str(k));
                b.append(keySep);
                write(b, e.getValue(), indent, itemSep, keySep, sort, level + 1);
            }
            newline(b, indent, level);
            b.append('}');
        } else if (x instanceof Undefined u) {
            throw u.error();
        } else {
            throw new TemplateException("Object of type " + Py.typeName(x) + " is not JSON serializable");
        }
    }

    private static void newline(StringBuilder b, Integer indent, int level) {
        if (indent != null) {
            b.append('\n').append(" ".repeat(indent * level));
        }
    }

    static void string(StringBuilder b, String s) {
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
                    if (c < 0x20) {
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
