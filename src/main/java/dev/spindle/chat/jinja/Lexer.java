package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.List;

/**
 * Splits a template into text and tag tokens, applying whitespace control as HF's
 * environment is set up: {@code trim_blocks} (the first newline after a block or
 * comment tag is dropped), {@code lstrip_blocks} (spaces and tabs before a block or
 * comment tag at the start of a line are dropped), and the {@code -} / {@code +}
 * markers. Handles {@code raw} blocks and comments.
 */
final class Lexer {
    private final String src;
    private final List<Token> out = new ArrayList<>();
    private int pos;
    private int line = 1;

    private Lexer(String src) {
        String s = src.replace("\r\n", "\n").replace('\r', '\n'); // Jinja's newline_sequence: every line break becomes \n
        // Jinja's keep_trailing_newline is off (as in HF): one trailing newline of the source is dropped
        this.src = s.endsWith("\n") ? s.substring(0, s.length() - 1) : s;
    }

    static List<Token> tokenize(String src) {
        Lexer l = new Lexer(src);
        l.run();
        return l.out;
    }

    private void run() {
        StringBuilder text = new StringBuilder();
        boolean lstripNext = false; // a "-" on the previous tag's end
        boolean trimNewline = false; // trim_blocks after a block/comment tag
        while (pos < src.length()) {
            int open = nextTagStart(pos);
            String chunk = src.substring(pos, open < 0 ? src.length() : open);
            String kept = chunk;
            if (lstripNext) {
                kept = stripLeading(chunk);
            } else if (trimNewline && chunk.startsWith("\n")) {
                kept = chunk.substring(1);
            }
            // Jinja's line_starting: the chunk begins a line if the source start is here, or
            // what the previous tag consumed after itself ended with a newline
            boolean lineStarting = pos == 0 || chunk.substring(0, chunk.length() - kept.length()).endsWith("\n");
            chunk = kept;
            lstripNext = trimNewline = false;
            text.append(chunk);
            countLines(src.substring(pos, open < 0 ? src.length() : open));
            if (open < 0) {
                pos = src.length();
                break;
            }
            char kind = src.charAt(open + 1); // '{', '%' or '#'
            char mod = open + 2 < src.length() ? src.charAt(open + 2) : ' ';
            if (mod == '-') {
                stripTrailing(text);
            } else if (mod != '+' && kind != '{') {
                lstripBlock(text, lineStarting);
            }
            pos = open + 2 + (mod == '-' || mod == '+' ? 1 : 0);
            if (kind == '#') {
                int end = src.indexOf("#}", pos);
                if (end < 0) {
                    throw error("unclosed comment");
                }
                boolean minus = src.charAt(end - 1) == '-';
                countLines(src.substring(pos, end));
                pos = end + 2;
                flush(text);
                lstripNext = minus;
                trimNewline = !minus;
                continue;
            }
            flush(text);
            if (kind == '%' && isRawStart()) {
                lstripNext = readRaw(text);
                trimNewline = !lstripNext; // endraw is a block tag: trim_blocks applies after it
                continue;
            }
            boolean block = kind == '%';
            out.add(new Token(block ? Token.Kind.BLOCK_BEGIN : Token.Kind.VAR_BEGIN, block ? "{%" : "{{", line));
            char endMod = lexInside(block ? '%' : '}');
            out.add(new Token(block ? Token.Kind.BLOCK_END : Token.Kind.VAR_END, block ? "%}" : "}}", line));
            lstripNext = endMod == '-';
            trimNewline = block && endMod != '-' && endMod != '+';
        }
        flush(text);
        out.add(new Token(Token.Kind.EOF, "", line));
    }

    private int nextTagStart(int from) {
        for (int i = src.indexOf('{', from); i >= 0 && i + 1 < src.length(); i = src.indexOf('{', i + 1)) {
            char c = src.charAt(i + 1);
            if (c == '{' || c == '%' || c == '#') {
                return i;
            }
        }
        return -1;
    }

    private boolean isRawStart() {
        int i = pos;
        while (i < src.length() && Character.isWhitespace(src.charAt(i))) {
            i++;
        }
        if (!src.startsWith("raw", i)) {
            return false;
        }
        i += 3;
        while (i < src.length() && Character.isWhitespace(src.charAt(i))) {
            i++;
        }
        return src.startsWith("%}", i) || src.startsWith("-%}", i);
    }

    /** Reads {@code raw %} ... {@code {% endraw %}}; returns whether the endraw tag ends with "-". */
    private boolean readRaw(StringBuilder text) {
        int close = src.indexOf("%}", pos);
        boolean minusAfterOpen = src.charAt(close - 1) == '-';
        pos = close + 2;
        int end = pos;
        while (true) {
            int t = src.indexOf("{%", end);
            if (t < 0) {
                throw error("missing endraw");
            }
            int j = t + 2;
            boolean minusBefore = j < src.length() && src.charAt(j) == '-';
            if (minusBefore || (j < src.length() && src.charAt(j) == '+')) {
                j++;
            }
            while (j < src.length() && Character.isWhitespace(src.charAt(j))) {
                j++;
            }
            if (src.startsWith("endraw", j)) {
                String body = src.substring(pos, t);
                if (minusAfterOpen) {
                    body = stripLeading(body);
                }
                if (minusBefore) {
                    body = body.stripTrailing();
                }
                text.append(body);
                countLines(src.substring(pos, t));
                int ce = src.indexOf("%}", j);
                boolean minusAfter = src.charAt(ce - 1) == '-';
                pos = ce + 2;
                flush(text);
                return minusAfter;
            }
            end = t + 2;
        }
    }

    /** Tokens inside a tag until its end marker; returns the end's modifier ('-', '+' or ' '). */
    private char lexInside(char endChar) {
        int depth = 0;
        while (true) {
            if (pos >= src.length()) {
                throw error("unclosed tag");
            }
            char c = src.charAt(pos);
            if (c == '\n') {
                line++;
                pos++;
                continue;
            }
            if (Character.isWhitespace(c)) {
                pos++;
                continue;
            }
            if (depth == 0) {
                for (char m : new char[]{'-', '+', ' '}) {
                    String end = (m == ' ' ? "" : String.valueOf(m)) + endChar + "}";
                    if (src.startsWith(end, pos)) {
                        pos += end.length();
                        return m;
                    }
                }
            }
            if (Character.isLetter(c) || c == '_') {
                int s = pos;
                while (pos < src.length() && (Character.isLetterOrDigit(src.charAt(pos)) || src.charAt(pos) == '_')) {
                    pos++;
                }
                out.add(new Token(Token.Kind.NAME, src.substring(s, pos), line));
            } else if (Character.isDigit(c)) {
                lexNumber();
            } else if (c == '\'' || c == '"') {
                out.add(new Token(Token.Kind.STRING, lexString(c), line));
            } else {
                String op = operator();
                if ("([{".contains(op)) {
                    depth++;
                } else if (")]}".contains(op)) {
                    depth = Math.max(0, depth - 1);
                }
                out.add(new Token(Token.Kind.OP, op, line));
            }
        }
    }

    private void lexNumber() {
        int s = pos;
        while (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '_')) {
            pos++;
        }
        boolean isFloat = false;
        if (pos + 1 < src.length() && src.charAt(pos) == '.' && Character.isDigit(src.charAt(pos + 1))) {
            isFloat = true;
            pos++;
            while (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '_')) {
                pos++;
            }
        }
        if (pos < src.length() && (src.charAt(pos) == 'e' || src.charAt(pos) == 'E')) {
            int save = pos;
            pos++;
            if (pos < src.length() && (src.charAt(pos) == '+' || src.charAt(pos) == '-')) {
                pos++;
            }
            if (pos < src.length() && Character.isDigit(src.charAt(pos))) {
                isFloat = true;
                while (pos < src.length() && Character.isDigit(src.charAt(pos))) {
                    pos++;
                }
            } else {
                pos = save;
            }
        }
        out.add(new Token(isFloat ? Token.Kind.FLOAT : Token.Kind.INTEGER, src.substring(s, pos).replace("_", ""), line));
    }

    private String lexString(char quote) {
        StringBuilder b = new StringBuilder();
        pos++;
        while (true) {
            if (pos >= src.length()) {
                throw error("unclosed string literal");
            }
            char c = src.charAt(pos++);
            if (c == quote) {
                return b.toString();
            }
            if (c == '\n') {
                line++;
            }
            if (c != '\\' || pos >= src.length()) {
                b.append(c);
                continue;
            }
            char e = src.charAt(pos++);
            switch (e) {
                case 'n' -> b.append('\n');
                case 't' -> b.append('\t');
                case 'r' -> b.append('\r');
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case '0' -> b.append('\0');
                case '\\', '\'', '"' -> b.append(e);
                case '\n' -> line++;
                case 'x' -> {
                    b.append((char) Integer.parseInt(src.substring(pos, pos + 2), 16));
                    pos += 2;
                }
                case 'u' -> {
                    b.append((char) Integer.parseInt(src.substring(pos, pos + 4), 16));
                    pos += 4;
                }
                case 'U' -> {
                    b.appendCodePoint(Integer.parseInt(src.substring(pos, pos + 8), 16));
                    pos += 8;
                }
                default -> b.append('\\').append(e);
            }
        }
    }

    private static final String[] OPS = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
            "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};

    private String operator() {
        for (String op : OPS) {
            if (src.startsWith(op, pos)) {
                pos += op.length();
                return op;
            }
        }
        throw error("unexpected character '" + src.charAt(pos) + "'");
    }

    private void flush(StringBuilder text) {
        if (!text.isEmpty()) {
            out.add(new Token(Token.Kind.TEXT, text.toString(), line));
            text.setLength(0);
        }
    }

    private void countLines(String s) {
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) == '\n') {
                line++;
            }
        }
    }

    /** lstrip_blocks: drop spaces/tabs between the last newline of the text and the tag. */
    private static void lstripBlock(StringBuilder text, boolean lineStarting) {
        int i = text.length();
        while (i > 0 && (text.charAt(i - 1) == ' ' || text.charAt(i - 1) == '\t')) {
            i--;
        }
        if ((i == 0 && lineStarting) || (i > 0 && text.charAt(i - 1) == '\n')) {
            text.setLength(i);
        }
    }

    private static void stripTrailing(StringBuilder text) {
        int i = text.length();
        while (i > 0 && Character.isWhitespace(text.charAt(i - 1))) {
            i--;
        }
        text.setLength(i);
    }

    private static String stripLeading(String s) {
        int i = 0;
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
            i++;
        }
        return s.substring(i);
    }

    private TemplateException error(String what) {
        return new TemplateException("template syntax error at line " + line + ": " + what);
    }
}
