package dev.spindle.grammar;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A Lark grammar (the syntax OpenAI's custom tools and Codex use for free-form tool input) reduced to
 * one regular expression over its language, for constrained decoding. Read: rules ({@code name: ...},
 * lowercase, optionally prefixed by {@code ?} or {@code !}) and terminals ({@code NAME: ...} or
 * {@code NAME.priority: ...}), alternatives over several lines ({@code |}), string literals ({@code "..."},
 * with Python escapes and the {@code i} flag), regular expressions ({@code /.../}, no flags), groups,
 * {@code [optional]}, {@code ? * +}, {@code ~n} and {@code ~n..m} repetition, aliases ({@code -> name},
 * which only name tree nodes), comments ({@code //}) and {@code %import common.NAME} (or
 * {@code %import common (A, B)}) for Lark's common terminals listed in {@link #COMMON}. The grammar's
 * language is enforced as written: the text matches {@code start} with nothing between the pieces.
 *
 * <p>Refused by name (an {@link IllegalArgumentException}): recursion (a rule reaching itself: its
 * language may not be regular), {@code %ignore} (pieces separated by ignored text), {@code %declare},
 * {@code %override}, {@code %extend}, other imports, templates, regex flags.
 */
public final class LarkGrammar {
    /** Lark's common terminals this reader knows (common.lark), as regular expressions. */
    static final Map<String, String> COMMON = Map.ofEntries(
            Map.entry("LF", "\\n"), Map.entry("CR", "\\r"), Map.entry("NEWLINE", "(\\r?\\n)+"),
            Map.entry("WS", "[ \\t\\f\\r\\n]+"), Map.entry("WS_INLINE", "[ \\t]+"),
            Map.entry("DIGIT", "[0-9]"), Map.entry("HEXDIGIT", "[a-fA-F0-9]"), Map.entry("INT", "[0-9]+"),
            Map.entry("SIGNED_INT", "[+-]?[0-9]+"), Map.entry("DECIMAL", "([0-9]+\\.[0-9]*|\\.[0-9]+)"),
            Map.entry("NUMBER", "([0-9]+\\.[0-9]*|\\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?"),
            Map.entry("SIGNED_NUMBER", "[+-]?([0-9]+\\.[0-9]*|\\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?"),
            Map.entry("LETTER", "[A-Za-z]"), Map.entry("LCASE_LETTER", "[a-z]"), Map.entry("UCASE_LETTER", "[A-Z]"),
            Map.entry("WORD", "[A-Za-z]+"), Map.entry("CNAME", "[_A-Za-z][_A-Za-z0-9]*"),
            Map.entry("ESCAPED_STRING", "\"(\\\\.|[^\"\\\\])*\""));

    private final Map<String, String> definitions = new LinkedHashMap<>(); // name → its expansion's source
    private final Map<String, String> regexes = new LinkedHashMap<>();     // name → its language as a regex
    private final Set<String> expanding = new HashSet<>();

    private LarkGrammar() {
    }

    /** The grammar's language (from {@code start}) as a regular expression, unanchored. */
    public static String toRegex(String grammar) {
        LarkGrammar g = new LarkGrammar();
        g.read(grammar);
        if (!g.definitions.containsKey("start")) {
            throw new IllegalArgumentException("the Lark grammar has no 'start' rule");
        }
        return g.regexOf("start");
    }

    private void read(String grammar) {
        String current = null;
        StringBuilder body = new StringBuilder();
        for (String raw : grammar.split("\n", -1)) {
            String line = stripComment(raw).strip();
            if (line.isEmpty()) {
                continue;
            }
            if (line.startsWith("%")) {
                directive(line);
                continue;
            }
            if (line.startsWith("|") && current != null) {
                body.append(' ').append(line);
                continue;
            }
            int colon = definitionColon(line);
            if (colon < 0) {
                throw new IllegalArgumentException("Lark grammar line '" + raw.strip() + "' is neither a definition (name: ...) nor a continuation (| ...)");
            }
            if (current != null) {
                define(current, body.toString());
            }
            current = line.substring(0, colon).strip();
            body.setLength(0);
            body.append(line.substring(colon + 1));
        }
        if (current != null) {
            define(current, body.toString());
        }
    }

    private void define(String head, String body) {
        String name = head.replaceFirst("^[?!]", "");
        int dot = name.indexOf('.');
        if (dot > 0 && name.substring(dot + 1).matches("-?[0-9]+")) {
            name = name.substring(0, dot); // a priority: order of lexing, no effect on the language
        }
        if (!name.matches("[A-Za-z_][A-Za-z0-9_]*")) {
            throw new IllegalArgumentException("Lark grammar: '" + head + "' is not a rule or terminal name this server reads (templates are not supported)");
        }
        if (definitions.containsKey(name)) {
            throw new IllegalArgumentException("Lark grammar: '" + name + "' is defined twice");
        }
        definitions.put(name, body);
    }

    private void directive(String line) {
        if (line.startsWith("%import")) {
            String rest = line.substring("%import".length()).strip();
            List<String> names = new ArrayList<>();
            if (rest.startsWith("common.")) {
                String n = rest.substring("common.".length()).strip();
                int arrow = n.indexOf("->");
                if (arrow >= 0) {
                    throw new IllegalArgumentException("Lark grammar: '%import ... -> alias' is not supported");
                }
                names.add(n);
            } else if (rest.matches("common\\s*\\(.*\\)")) {
                for (String n : rest.substring(rest.indexOf('(') + 1, rest.lastIndexOf(')')).split(",")) {
                    names.add(n.strip());
                }
            } else {
                throw new IllegalArgumentException("Lark grammar: '" + line + "' imports from outside Lark's common terminals, which this server does not have");
            }
            for (String n : names) {
                String re = COMMON.get(n);
                if (re == null) {
                    throw new IllegalArgumentException("Lark grammar: common." + n + " is not one of the common terminals this server knows " + COMMON.keySet());
                }
                regexes.put(n, re);
                definitions.put(n, null);
            }
            return;
        }
        String word = line.split("\\s+")[0];
        throw new IllegalArgumentException("Lark grammar: " + word + " is not supported (only %import common.NAME)"
                + (word.equals("%ignore") ? "; text between the grammar's pieces cannot be enforced" : ""));
    }

    /** The colon of {@code name: ...} outside quotes, or -1. */
    private static int definitionColon(String line) {
        int i = 0;
        while (i < line.length() && (Character.isLetterOrDigit(line.charAt(i)) || "_?!.-".indexOf(line.charAt(i)) >= 0)) {
            i++;
        }
        while (i < line.length() && line.charAt(i) == ' ') {
            i++;
        }
        return i > 0 && i < line.length() && line.charAt(i) == ':' ? i : -1;
    }

    /** A line without its {@code //} comment (outside literals and regexes). */
    private static String stripComment(String line) {
        char quote = 0;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quote != 0) {
                if (c == '\\') {
                    i++;
                } else if (c == quote) {
                    quote = 0;
                }
            } else if (c == '"' || (c == '/' && !(i + 1 < line.length() && line.charAt(i + 1) == '/'))) {
                quote = c;
            } else if (c == '/' && i + 1 < line.length() && line.charAt(i + 1) == '/') {
                return line.substring(0, i);
            }
        }
        return line;
    }

    private String regexOf(String name) {
        String done = regexes.get(name);
        if (done != null) {
            return done;
        }
        if (!definitions.containsKey(name)) {
            throw new IllegalArgumentException("Lark grammar: '" + name + "' is used but never defined");
        }
        if (!expanding.add(name)) {
            throw new IllegalArgumentException("Lark grammar: '" + name + "' is recursive; this server enforces Lark grammars without recursion "
                    + "(their language is then regular)");
        }
        String re = new Expansion(definitions.get(name), name).alternatives();
        expanding.remove(name);
        regexes.put(name, re);
        return re;
    }

    /** A recursive-descent reader of one definition's expansion, writing its regex. */
    private final class Expansion {
        private final String s;
        private final String owner;
        private int i;

        Expansion(String s, String owner) {
            this.s = s;
            this.owner = owner;
        }

        String alternatives() {
            List<String> alts = new ArrayList<>();
            alts.add(sequence());
            while (peek() == '|') {
                i++;
                alts.add(sequence());
            }
            skipSpace();
            if (i < s.length() && s.charAt(i) != ')' && s.charAt(i) != ']') {
                throw error("unexpected '" + s.charAt(i) + "'");
            }
            return alts.size() == 1 ? alts.getFirst() : "(" + String.join("|", alts) + ")";
        }

        private String sequence() {
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = peek();
                if (c == 0 || c == '|' || c == ')' || c == ']') {
                    return b.toString();
                }
                if (c == '-' && i + 1 < s.length() && s.charAt(i + 1) == '>') {
                    i += 2;
                    skipSpace();
                    while (i < s.length() && (Character.isLetterOrDigit(s.charAt(i)) || s.charAt(i) == '_')) {
                        i++; // an alias names the tree node: nothing to enforce
                    }
                    continue;
                }
                b.append(quantified(atom()));
            }
        }

        private String quantified(String atom) {
            char c = i < s.length() ? s.charAt(i) : 0;
            String group = "(" + atom + ")";
            switch (c) {
                case '?' -> {
                    i++;
                    return group + "?";
                }
                case '*' -> {
                    i++;
                    return group + "*";
                }
                case '+' -> {
                    i++;
                    return group + "+";
                }
                case '~' -> {
                    i++;
                    int from = number();
                    if (s.startsWith("..", i)) {
                        i += 2;
                        return group + "{" + from + "," + number() + "}";
                    }
                    return group + "{" + from + "}";
                }
                default -> {
                    return atom;
                }
            }
        }

        private int number() {
            int start = i;
            while (i < s.length() && Character.isDigit(s.charAt(i))) {
                i++;
            }
            if (start == i) {
                throw error("a repetition count was expected after '~'");
            }
            return Integer.parseInt(s.substring(start, i));
        }

        private String atom() {
            char c = peek();
            switch (c) {
                case '(' -> {
                    i++;
                    String inner = alternatives();
                    expect(')');
                    return "(" + inner + ")";
                }
                case '[' -> {
                    i++;
                    String inner = alternatives();
                    expect(']');
                    return "(" + inner + ")?";
                }
                case '"' -> {
                    return literal();
                }
                case '/' -> {
                    return regex();
                }
                default -> {
                    int start = i;
                    while (i < s.length() && (Character.isLetterOrDigit(s.charAt(i)) || s.charAt(i) == '_')) {
                        i++;
                    }
                    if (start == i) {
                        throw error("unexpected '" + c + "'");
                    }
                    return "(" + regexOf(s.substring(start, i)) + ")";
                }
            }
        }

        /** A string literal: its characters, escaped for the regex; with the i flag each letter matches either case. */
        private String literal() {
            i++; // "
            StringBuilder text = new StringBuilder();
            while (true) {
                if (i >= s.length()) {
                    throw error("an unterminated string literal");
                }
                char c = s.charAt(i++);
                if (c == '"') {
                    break;
                }
                if (c == '\\') {
                    if (i >= s.length()) {
                        throw error("an unterminated string literal");
                    }
                    char e = s.charAt(i++);
                    switch (e) {
                        case 'n' -> text.append('\n');
                        case 't' -> text.append('\t');
                        case 'r' -> text.append('\r');
                        case 'f' -> text.append('\f');
                        case '0' -> text.append('\0');
                        case 'u' -> {
                            text.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                            i += 4;
                        }
                        default -> text.append(e);
                    }
                } else {
                    text.append(c);
                }
            }
            boolean insensitive = i < s.length() && s.charAt(i) == 'i' && (i + 1 >= s.length() || !Character.isLetterOrDigit(s.charAt(i + 1)));
            if (insensitive) {
                i++;
            }
            StringBuilder re = new StringBuilder();
            text.codePoints().forEach(cp -> {
                if (insensitive && Character.isLetter(cp) && Character.toLowerCase(cp) != Character.toUpperCase(cp)) {
                    re.append('[').append(Character.toChars(Character.toLowerCase(cp))).append(Character.toChars(Character.toUpperCase(cp))).append(']');
                } else {
                    re.append(escape(cp));
                }
            });
            return re.isEmpty() ? "" : "(" + re + ")";
        }

        /** A regex literal, as written (Python's syntax, which this server's regex dialect shares for what grammars use). */
        private String regex() {
            int start = ++i;
            while (i < s.length() && s.charAt(i) != '/') {
                if (s.charAt(i) == '\\') {
                    i++;
                }
                i++;
            }
            if (i >= s.length()) {
                throw error("an unterminated regular expression");
            }
            String body = s.substring(start, i++).replace("\\/", "/");
            if (i < s.length() && Character.isLetter(s.charAt(i))) {
                throw error("regular expression flags (/.../" + s.charAt(i) + ") are not supported");
            }
            return "(" + body + ")";
        }

        private char peek() {
            skipSpace();
            return i < s.length() ? s.charAt(i) : 0;
        }

        private void skipSpace() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private void expect(char c) {
            if (peek() != c) {
                throw error("'" + c + "' was expected");
            }
            i++;
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("Lark grammar, in '" + owner + "' at column " + (i + 1) + ": " + what);
        }
    }

    /** A character as a regex matching just it. */
    static String escape(int cp) {
        return switch (cp) {
            case '\n' -> "\\n";
            case '\r' -> "\\r";
            case '\t' -> "\\t";
            case '\f' -> "\\f";
            default -> {
                if ("\\.^$|?*+()[]{}".indexOf(cp) >= 0) {
                    yield "\\" + (char) cp;
                }
                if (cp < 0x20 || cp == 0x7f) {
                    yield String.format("\\u%04x", cp);
                }
                yield new String(Character.toChars(cp));
            }
        };
    }
}
