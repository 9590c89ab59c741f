package dev.spindle.chat.jinja;

import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The names every template sees: Jinja's range, dict, namespace, joiner, cycler, and HF's raise_exception and strftime_now. */
final class Globals {
    private Globals() {
    }

    /** The sandbox's cap on range(), against templates that would loop for ever. */
    private static final long MAX_RANGE = 100_000;

    static Map<String, Object> all() {
        Map<String, Object> g = new LinkedHashMap<>();
        g.put("raise_exception", (PyCallable) (a, kw) -> {
            throw new RaisedException(a.isEmpty() ? Py.str(kw.getOrDefault("message", "")) : Py.str(a.get(0)));
        });
        g.put("strftime_now", (PyCallable) (a, kw) -> strftime(Py.str(a.get(0)), ZonedDateTime.now()));
        g.put("namespace", (PyCallable) (a, kw) -> {
            Namespace ns = new Namespace();
            for (Object x : a) {
                putAll(ns.attrs, x);
            }
            ns.attrs.putAll(kw);
            return ns;
        });
        g.put("range", (PyCallable) Globals::range);
        g.put("dict", (PyCallable) (a, kw) -> {
            Map<Object, Object> out = new LinkedHashMap<>();
            if (!a.isEmpty()) {
                putAll(out, a.get(0));
            }
            out.putAll(kw);
            return out;
        });
        g.put("joiner", (PyCallable) (a, kw) -> {
            String sep = a.isEmpty() ? Py.str(kw.getOrDefault("sep", ", ")) : Py.str(a.get(0));
            boolean[] used = {false};
            return (PyCallable) (x, y) -> {
                if (used[0]) {
                    return sep;
                }
                used[0] = true;
                return "";
            };
        });
        return g;
    }

    /** A mapping's entries, or (key, value) pairs, into {@code out}. */
    private static void putAll(Map<? super String, Object> out, Object source) {
        if (source instanceof Map<?, ?> m) {
            m.forEach((k, v) -> out.put(Py.str(k), v));
            return;
        }
        for (Object pair : Py.iterate(source)) {
            List<Object> kv = Py.iterate(pair);
            if (kv.size() != 2) {
                throw new TemplateException("dictionary update sequence element has length " + kv.size() + "; 2 is required");
            }
            out.put(Py.str(kv.get(0)), kv.get(1));
        }
    }

    private static Object range(List<Object> a, Map<String, Object> kw) {
        if (a.isEmpty()) {
            throw new TemplateException("range expected at least 1 argument, got 0");
        }
        long start = a.size() > 1 ? Py.toLong(a.get(0)) : 0, stop = Py.toLong(a.get(a.size() > 1 ? 1 : 0));
        long step = a.size() > 2 ? Py.toLong(a.get(2)) : 1;
        if (step == 0) {
            throw new TemplateException("range() arg 3 must not be zero");
        }
        long count = step > 0 ? Math.max(0, (stop - start + step - 1) / step) : Math.max(0, (start - stop - step - 1) / -step);
        if (count > MAX_RANGE) {
            throw new TemplateException("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + MAX_RANGE + ").");
        }
        List<Object> out = new ArrayList<>();
        for (long i = 0, v = start; i < count; i++, v += step) {
            out.add(v);
        }
        return out;
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
            if (d == '-' && i + 1 < fmt.length()) { // glibc's %-d, %-m...: the number without its padding
                String padded = strftime("%" + fmt.charAt(++i), t);
                String bare = padded.replaceFirst("^[0 ]+(?=.)", "");
                b.append(bare);
                continue;
            }
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
                case 'b', 'h' -> b.append(t.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
                case 'A' -> b.append(t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
                case 'a' -> b.append(t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
                case 'j' -> b.append(String.format("%03d", t.getDayOfYear()));
                case 'w' -> b.append(t.getDayOfWeek().getValue() % 7);
                case 'u' -> b.append(t.getDayOfWeek().getValue());
                case 'Z' -> b.append(t.getZone().getId());
                case 'z' -> b.append(t.getOffset().getId().equals("Z") ? "+0000" : t.getOffset().getId().replace(":", ""));
                case 'F' -> b.append(strftime("%Y-%m-%d", t));
                case 'T' -> b.append(strftime("%H:%M:%S", t));
                case 'D' -> b.append(strftime("%m/%d/%y", t));
                case 'n' -> b.append('\n');
                case 't' -> b.append('\t');
                case '%' -> b.append('%');
                default -> b.append('%').append(d);
            }
        }
        return b.toString();
    }
}
