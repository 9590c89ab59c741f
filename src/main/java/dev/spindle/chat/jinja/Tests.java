package dev.spindle.chat.jinja;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/** Jinja2's built-in tests ({@code x is name(args)}), with Python's notion of each type. */
final class Tests {
    private Tests() {
    }

    static final Set<String> NAMES = Set.of("defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number",
            "string", "mapping", "iterable", "sequence", "callable", "sameas", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<",
            "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in", "odd", "even", "divisibleby", "lower", "upper", "escaped", "filter", "test");

    static boolean apply(String name, Object v, List<Object> a) {
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
            case "mapping" -> v instanceof Map<?, ?>;
            // Undefined iterates as empty and has a length, so it passes both, as in Jinja
            case "iterable" -> v instanceof List<?> || v instanceof Map<?, ?> || v instanceof String || v instanceof Undefined;
            case "sequence" -> v instanceof List<?> || v instanceof Map<?, ?> || v instanceof String || v instanceof Undefined;
            case "callable" -> v instanceof PyCallable;
            case "sameas" -> v == a.get(0) || (v instanceof Boolean && v.equals(a.get(0)));
            case "eq", "equalto", "==" -> Py.eq(v, a.get(0));
            case "ne", "!=" -> !Py.eq(v, a.get(0));
            case "lt", "lessthan", "<" -> Py.compare(v, a.get(0)) < 0;
            case "le", "<=" -> Py.compare(v, a.get(0)) <= 0;
            case "gt", "greaterthan", ">" -> Py.compare(v, a.get(0)) > 0;
            case "ge", ">=" -> Py.compare(v, a.get(0)) >= 0;
            case "in" -> Py.contains(a.get(0), v);
            case "odd" -> Py.eq(Py.arithmetic("%", v, 2L), 1L);
            case "even" -> Py.eq(Py.arithmetic("%", v, 2L), 0L);
            case "divisibleby" -> Py.eq(Py.arithmetic("%", v, a.get(0)), 0L);
            case "lower" -> {
                String s = Py.str(v);
                yield cased(s) && s.equals(s.toLowerCase(Locale.ROOT));
            }
            case "upper" -> {
                String s = Py.str(v);
                yield cased(s) && s.equals(s.toUpperCase(Locale.ROOT));
            }
            case "escaped" -> false;
            case "filter" -> v instanceof String s && Filters.NAMES.contains(s);
            case "test" -> v instanceof String s && NAMES.contains(s);
            default -> throw new TemplateException("No test named '" + name + "'.");
        };
    }

    private static boolean cased(String s) {
        return s.codePoints().anyMatch(cp -> Character.isUpperCase(cp) || Character.isLowerCase(cp) || Character.isTitleCase(cp));
    }
}
