package dev.spindle.chat.jinja;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.List;
import java.util.Map;

/**
 * Python's two string formatting languages: {@code "fmt" % args} (printf style, also the
 * format filter) and {@code "fmt".format(...)}, with their shared number layouts. Floats
 * round half-even on their exact binary value, as CPython does.
 */
final class PyFormat {
    private PyFormat() {
    }

    /** One conversion: flags, width, precision (-1 when absent), type. */
    private record Spec(char fill, char align, char sign, boolean alt, int width, boolean grouping, int precision, char type) {
    }

    // ---- "fmt" % args --------------------------------------------------------------

    static String percent(String fmt, Object args) {
        // a tuple spreads over the conversions; any other value (a list too) is one argument
        List<Object> values = args instanceof Tuple t ? t : java.util.Collections.singletonList(args);
        Map<?, ?> mapping = args instanceof Map<?, ?> m ? m : null;
        StringBuilder b = new StringBuilder();
        int k = 0, i = 0, n = fmt.length();
        while (i < n) {
            char c = fmt.charAt(i++);
            if (c != '%') {
                b.append(c);
                continue;
            }
            if (i >= n) {
                throw new TemplateException("incomplete format");
            }
            Object value = null;
            boolean haveValue = false;
            if (fmt.charAt(i) == '(') {
                int close = fmt.indexOf(')', i);
                if (mapping == null) {
                    throw new TemplateException("format requires a mapping");
                }
                String key = fmt.substring(i + 1, close);
                if (!mapping.containsKey(key)) {
                    throw new TemplateException("KeyError: " + Py.repr(key));
                }
                value = mapping.get(key);
                haveValue = true;
                i = close + 1;
            }
            boolean left = false, zero = false, alt = false;
            char sign = '-';
            for (; i < n && "-+ 0#".indexOf(fmt.charAt(i)) >= 0; i++) {
                switch (fmt.charAt(i)) {
                    case '-' -> left = true;
                    case '+' -> sign = '+';
                    case ' ' -> sign = sign == '+' ? '+' : ' ';
                    case '0' -> zero = true;
                    default -> alt = true;
                }
            }
            int width = 0;
            for (; i < n && Character.isDigit(fmt.charAt(i)); i++) {
                width = width * 10 + fmt.charAt(i) - '0';
            }
            int precision = -1;
            if (i < n && fmt.charAt(i) == '.') {
                precision = 0;
                for (i++; i < n && Character.isDigit(fmt.charAt(i)); i++) {
                    precision = precision * 10 + fmt.charAt(i) - '0';
                }
            }
            while (i < n && "hlL".indexOf(fmt.charAt(i)) >= 0) {
                i++;
            }
            if (i >= n) {
                throw new TemplateException("incomplete format");
            }
            char type = fmt.charAt(i++);
            if (type == '%') {
                b.append('%');
                continue;
            }
            if (!haveValue) {
                if (mapping != null && !(args instanceof Tuple)) {
                    value = args;
                } else if (k < values.size()) {
                    value = values.get(k++);
                } else {
                    throw new TemplateException("not enough arguments for format string");
                }
            }
            char align = left ? '<' : '>';
            char fill = zero && !left && "sr".indexOf(type) < 0 ? '0' : ' ';
            Spec spec = new Spec(fill, fill == '0' ? '=' : align, sign, alt, width, false, precision, type);
            b.append(convert(value, spec, true));
        }
        if (mapping == null && k < values.size()) {
            throw new TemplateException("not all arguments converted during string formatting");
        }
        return b.toString();
    }

    // ---- "fmt".format(...) ---------------------------------------------------------

    static String format(String fmt, List<Object> args, Map<String, Object> kw) {
        StringBuilder b = new StringBuilder();
        int auto = 0;
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if ((c == '{' || c == '}') && i + 1 < fmt.length() && fmt.charAt(i + 1) == c) {
                b.append(c);
                i++;
                continue;
            }
            if (c == '}') {
                throw new TemplateException("Single '}' encountered in format string");
            }
            if (c != '{') {
                b.append(c);
                continue;
            }
            int end = fmt.indexOf('}', i);
            if (end < 0) {
                throw new TemplateException("Single '{' encountered in format string");
            }
            String field = fmt.substring(i + 1, end);
            i = end;
            String specText = "";
            int colon = field.indexOf(':');
            if (colon >= 0) {
                specText = field.substring(colon + 1);
                field = field.substring(0, colon);
            }
            char conversion = 0;
            int bang = field.indexOf('!');
            if (bang >= 0) {
                conversion = field.charAt(bang + 1);
                field = field.substring(0, bang);
            }
            String[] path = field.split("\\.", -1);
            String head = path[0];
            Object v;
            if (head.isEmpty()) {
                v = arg(args, auto++);
            } else if (head.chars().allMatch(Character::isDigit)) {
                v = arg(args, Integer.parseInt(head));
            } else if (kw.containsKey(head)) {
                v = kw.get(head);
            } else {
                throw new TemplateException("KeyError: " + Py.repr(head));
            }
            for (int p = 1; p < path.length; p++) {
                v = Attributes.getattr(v, path[p]);
            }
            if (conversion == 'r' || conversion == 'a') {
                v = Py.repr(v);
            } else if (conversion == 's') {
                v = Py.str(v);
            }
            b.append(specText.isEmpty() ? Py.str(v) : convert(v, parseSpec(specText, v), false));
        }
        return b.toString();
    }

    private static Object arg(List<Object> args, int i) {
        if (i >= args.size()) {
            throw new TemplateException("Replacement index " + i + " out of range for positional args tuple");
        }
        return args.get(i);
    }

    private static Spec parseSpec(String s, Object v) {
        int i = 0;
        char fill = ' ', align = 0;
        if (s.length() > 1 && "<>^=".indexOf(s.charAt(1)) >= 0) {
            fill = s.charAt(0);
            align = s.charAt(1);
            i = 2;
        } else if (!s.isEmpty() && "<>^=".indexOf(s.charAt(0)) >= 0) {
            align = s.charAt(0);
            i = 1;
        }
        char sign = '-';
        if (i < s.length() && "+- ".indexOf(s.charAt(i)) >= 0) {
            sign = s.charAt(i++);
        }
        boolean alt = false;
        if (i < s.length() && s.charAt(i) == '#') {
            alt = true;
            i++;
        }
        if (i < s.length() && s.charAt(i) == '0') {
            if (align == 0) {
                fill = '0';
                align = '=';
            }
            i++;
        }
        int width = 0;
        for (; i < s.length() && Character.isDigit(s.charAt(i)); i++) {
            width = width * 10 + s.charAt(i) - '0';
        }
        boolean grouping = false;
        if (i < s.length() && (s.charAt(i) == ',' || s.charAt(i) == '_')) {
            grouping = true;
            i++;
        }
        int precision = -1;
        if (i < s.length() && s.charAt(i) == '.') {
            precision = 0;
            for (i++; i < s.length() && Character.isDigit(s.charAt(i)); i++) {
                precision = precision * 10 + s.charAt(i) - '0';
            }
        }
        char type = i < s.length() ? s.charAt(i) : 0;
        if (align == 0) {
            align = v instanceof String || type == 's' ? '<' : '>';
        }
        return new Spec(fill, align, sign, alt, width, grouping, precision, type);
    }

    // ---- conversions ---------------------------------------------------------------

    private static String convert(Object v, Spec spec, boolean printf) {
        String body;
        boolean negative = false;
        char type = spec.type();
        switch (type) {
            case 's', 0 -> {
                if (type == 0 && v instanceof Double d && !printf) {
                    negative = d < 0 || (d == 0 && 1 / d < 0);
                    double a = Math.abs(d);
                    body = spec.precision() < 0 ? PyFloat.repr(a) : general(a, spec.precision(), spec.alt(), true);
                } else if (type == 0 && (v instanceof Long || v instanceof Boolean) && !printf) {
                    long l = Py.toLong(v);
                    negative = l < 0;
                    body = group(Long.toString(Math.abs(l)), spec.grouping());
                } else {
                    body = Py.str(v);
                    if (spec.precision() >= 0 && body.codePointCount(0, body.length()) > spec.precision()) {
                        body = body.substring(0, body.offsetByCodePoints(0, spec.precision()));
                    }
                    return pad(body, spec, false);
                }
            }
            case 'r', 'a' -> {
                body = Py.repr(v);
                if (spec.precision() >= 0 && body.length() > spec.precision()) {
                    body = body.substring(0, spec.precision());
                }
                return pad(body, spec, false);
            }
            case 'c' -> {
                body = v instanceof String s ? s : new String(Character.toChars((int) Py.toLong(v)));
                return pad(body, spec, false);
            }
            case 'd', 'i', 'u', 'x', 'X', 'o', 'b', 'n' -> {
                if (!Py.isNumber(v)) {
                    throw new TemplateException("%" + type + " format: a real number is required, not " + Py.typeName(v));
                }
                if (v instanceof Double && !printf) {
                    throw new TemplateException("Unknown format code '" + type + "' for object of type 'float'");
                }
                long l = v instanceof Double d ? (long) (double) d : Py.toLong(v);
                negative = l < 0;
                long a = Math.abs(l);
                body = switch (type) {
                    case 'x' -> (spec.alt() ? "0x" : "") + Long.toHexString(a);
                    case 'X' -> (spec.alt() ? "0X" : "") + Long.toHexString(a).toUpperCase();
                    case 'o' -> (spec.alt() ? "0o" : "") + Long.toOctalString(a);
                    case 'b' -> (spec.alt() ? "0b" : "") + Long.toBinaryString(a);
                    default -> group(Long.toString(a), spec.grouping());
                };
                if (printf && spec.precision() > body.length()) {
                    body = "0".repeat(spec.precision() - body.length()) + body;
                }
            }
            case 'f', 'F', 'e', 'E', 'g', 'G', '%' -> {
                if (!Py.isNumber(v)) {
                    throw new TemplateException("must be real number, not " + Py.typeName(v));
                }
                double d = Py.toDouble(v);
                negative = d < 0 || (d == 0 && 1 / d < 0 && v instanceof Double);
                double a = Math.abs(d);
                int p = spec.precision() < 0 ? 6 : spec.precision();
                if (Double.isNaN(a) || Double.isInfinite(a)) {
                    body = Double.isNaN(a) ? "nan" : "inf";
                } else {
                    body = switch (Character.toLowerCase(type)) {
                        case 'f' -> fixed(a, p, spec.alt());
                        case 'e' -> exponent(a, p, spec.alt());
                        case '%' -> fixed(a * 100, p, spec.alt()) + "%";
                        default -> general(a, p, spec.alt(), false);
                    };
                    if (spec.grouping()) {
                        int dot = body.indexOf('.');
                        body = dot < 0 ? group(body, true) : group(body.substring(0, dot), true) + body.substring(dot);
                    }
                }
                if (Character.isUpperCase(type)) {
                    body = body.toUpperCase();
                }
            }
            default -> throw new TemplateException("unsupported format character '" + type + "'");
        }
        String signText = negative ? "-" : spec.sign() == '+' ? "+" : spec.sign() == ' ' ? " " : "";
        return pad(signText + body, spec, true, signText.length());
    }

    private static String pad(String s, Spec spec, boolean numeric) {
        return pad(s, spec, numeric, 0);
    }

    /** Pads to the width; '=' puts the fill between the sign (its first {@code signLength} chars) and the digits. */
    private static String pad(String s, Spec spec, boolean numeric, int signLength) {
        int n = s.codePointCount(0, s.length());
        int total = spec.width() - n;
        if (total <= 0) {
            return s;
        }
        String fill = String.valueOf(spec.fill());
        return switch (spec.align()) {
            case '<' -> s + fill.repeat(total);
            case '^' -> fill.repeat(total / 2) + s + fill.repeat(total - total / 2);
            case '=' -> s.substring(0, signLength) + fill.repeat(total) + s.substring(signLength);
            default -> fill.repeat(total) + s;
        };
    }

    private static String group(String digits, boolean on) {
        if (!on) {
            return digits;
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < digits.length(); i++) {
            if (i > 0 && (digits.length() - i) % 3 == 0) {
                b.append(',');
            }
            b.append(digits.charAt(i));
        }
        return b.toString();
    }

    static String fixed(double a, int precision, boolean alt) {
        String s = new BigDecimal(a).setScale(precision, RoundingMode.HALF_EVEN).toPlainString();
        return alt && precision == 0 ? s + "." : s;
    }

    static String exponent(double a, int precision, boolean alt) {
        if (a == 0) {
            return "0" + (precision > 0 ? "." + "0".repeat(precision) : alt ? "." : "") + "e+00";
        }
        BigDecimal r = new BigDecimal(a).round(new MathContext(precision + 1, RoundingMode.HALF_EVEN));
        String digits = r.unscaledValue().toString();
        int exp = digits.length() - 1 - r.scale();
        digits = (digits + "0".repeat(precision + 1)).substring(0, precision + 1);
        String mant = digits.substring(0, 1) + (precision > 0 ? "." + digits.substring(1) : alt ? "." : "");
        return mant + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }

    /** %g: exponent form when the exponent is below -4 or at least the precision; trailing zeros dropped unless '#'. */
    private static String general(double a, int precision, boolean alt, boolean keepPoint) {
        int p = precision == 0 ? 1 : precision;
        int exp;
        if (a == 0) {
            exp = 0;
        } else {
            BigDecimal r = new BigDecimal(a).round(new MathContext(p, RoundingMode.HALF_EVEN));
            exp = r.precision() - 1 - r.scale();
        }
        String s = exp >= -4 && exp < p ? fixed(a, p - 1 - exp, alt) : exponent(a, p - 1, alt);
        if (!alt) {
            int e = s.indexOf('e');
            String mant = e < 0 ? s : s.substring(0, e);
            String tail = e < 0 ? "" : s.substring(e);
            if (mant.contains(".")) {
                mant = mant.replaceAll("0+$", "");
                if (mant.endsWith(".")) {
                    mant = keepPoint ? mant + "0" : mant.substring(0, mant.length() - 1);
                }
            } else if (keepPoint && tail.isEmpty()) {
                mant = mant + ".0";
            }
            s = mant + tail;
        }
        return s;
    }
}
