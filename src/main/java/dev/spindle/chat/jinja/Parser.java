package dev.spindle.chat.jinja;

import dev.spindle.chat.jinja.Node.Expr;
import dev.spindle.chat.jinja.Node.Stmt;
import dev.spindle.chat.jinja.Token.Kind;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/** Recursive-descent parser for the Jinja2 statements chat templates use; expressions are {@link ExpressionParser}'s. */
final class Parser extends ExpressionParser {
    /** for-loop bodies around the statement being parsed (a macro's body starts outside any): where break and continue may stand */
    private int loops;

    private Parser(List<Token> tokens) {
        super(tokens);
    }

    static List<Stmt> parse(String source) {
        Parser parser = new Parser(Lexer.tokenize(source));
        List<Stmt> body = parser.statements(Set.of());
        if (parser.peek().kind() != Kind.EOF) {
            throw parser.error("unexpected '" + parser.peekBlockName() + "'");
        }
        return body;
    }

    private String peekBlockName() {
        Token t = peek();
        if (t.kind() == Kind.BLOCK_BEGIN && p + 1 < tokens.size()) {
            return tokens.get(p + 1).text();
        }
        return t.text();
    }

    /** Statements until a block tag whose name is in {@code ends} (left unconsumed) or EOF. */
    private List<Stmt> statements(Set<String> ends) {
        List<Stmt> out = new ArrayList<>();
        while (true) {
            Token t = peek();
            switch (t.kind()) {
                case EOF -> {
                    if (!ends.isEmpty()) {
                        throw error("missing " + String.join(" or ", ends.stream().sorted().toList()));
                    }
                    return out;
                }
                case TEXT -> out.add(new Node.Text(next().text()));
                case VAR_BEGIN -> {
                    next();
                    out.add(new Node.Output(expression()));
                    expect(Kind.VAR_END, null);
                }
                case BLOCK_BEGIN -> {
                    String name = tokens.get(p + 1).text();
                    if (ends.contains(name)) {
                        return out;
                    }
                    next();
                    out.add(statement());
                }
                default -> throw error("unexpected '" + t.text() + "'");
            }
        }
    }

    private void endTag(String name) {
        expect(Kind.BLOCK_BEGIN, null);
        expect(Kind.NAME, name);
        expect(Kind.BLOCK_END, null);
    }

    private Stmt statement() {
        Token head = next();
        if (head.kind() != Kind.NAME) {
            throw error("expected a tag name, found '" + head.text() + "'");
        }
        return switch (head.text()) {
            case "if" -> ifStatement();
            case "for" -> forStatement(head.line());
            case "set" -> setStatement();
            case "macro" -> macroStatement();
            case "call" -> callStatement();
            case "with" -> withStatement();
            case "filter" -> {
                Expr f = filterChain(null);
                expect(Kind.BLOCK_END, null);
                List<Stmt> body = statements(Set.of("endfilter"));
                endTag("endfilter");
                yield new Node.FilterBlock(f, body);
            }
            case "generation" -> {
                expect(Kind.BLOCK_END, null);
                List<Stmt> body = statements(Set.of("endgeneration"));
                endTag("endgeneration");
                yield new Node.Block(body);
            }
            case "break", "continue" -> {
                if (loops == 0) {
                    p--;
                    throw error("'" + head.text() + "' outside a for loop");
                }
                expect(Kind.BLOCK_END, null);
                yield head.text().equals("break") ? new Node.Break() : new Node.Continue();
            }
            default -> {
                p--;
                throw error("unknown tag '" + head.text() + "'");
            }
        };
    }

    private Stmt ifStatement() {
        List<Expr> conds = new ArrayList<>();
        List<List<Stmt>> bodies = new ArrayList<>();
        List<Stmt> otherwise = List.of();
        conds.add(expression());
        expect(Kind.BLOCK_END, null);
        bodies.add(statements(Set.of("elif", "else", "endif")));
        while (true) {
            expect(Kind.BLOCK_BEGIN, null);
            String t = expectName();
            if (t.equals("elif")) {
                conds.add(expression());
                expect(Kind.BLOCK_END, null);
                bodies.add(statements(Set.of("elif", "else", "endif")));
            } else if (t.equals("else")) {
                expect(Kind.BLOCK_END, null);
                otherwise = statements(Set.of("endif"));
                endTag("endif");
                break;
            } else {
                expect(Kind.BLOCK_END, null);
                break;
            }
        }
        return new Node.If(conds, bodies, otherwise);
    }

    private Stmt forStatement(int line) {
        List<String> targets = new ArrayList<>();
        boolean paren = peek().isOp("(");
        if (paren) {
            next();
        }
        targets.add(expectName());
        while (peek().isOp(",")) {
            next();
            targets.add(expectName());
        }
        if (paren) {
            expect(Kind.OP, ")");
        }
        expect(Kind.NAME, "in");
        Expr iterable = condExpr(false);
        Expr filter = null;
        if (peek().isName("if")) {
            next();
            filter = condExpr(true);
        }
        if (peek().isName("recursive")) {
            throw error("recursive loops are not supported");
        }
        expect(Kind.BLOCK_END, null);
        loops++;
        List<Stmt> body = statements(Set.of("else", "endfor"));
        loops--;
        List<Stmt> otherwise = List.of();
        expect(Kind.BLOCK_BEGIN, null);
        if (expectName().equals("else")) {
            expect(Kind.BLOCK_END, null);
            otherwise = statements(Set.of("endfor"));
            endTag("endfor");
        } else {
            expect(Kind.BLOCK_END, null);
        }
        return new Node.For(targets, iterable, filter, body, otherwise, line);
    }

    private Stmt setStatement() {
        List<String> targets = new ArrayList<>();
        targets.add(expectName());
        String attribute = null;
        if (peek().isOp(".")) {
            next();
            attribute = expectName();
        }
        while (peek().isOp(",")) {
            next();
            targets.add(expectName());
        }
        if (peek().kind() == Kind.BLOCK_END || peek().isOp("|")) {
            Expr filter = peek().isOp("|") ? filterChain(null) : null;
            expect(Kind.BLOCK_END, null);
            List<Stmt> body = statements(Set.of("endset"));
            endTag("endset");
            return new Node.Set(targets, attribute, null, body, filter);
        }
        expect(Kind.OP, "=");
        Expr value = tupleOrExpression();
        expect(Kind.BLOCK_END, null);
        return new Node.Set(targets, attribute, value, null, null);
    }

    private Stmt withStatement() {
        List<String> targets = new ArrayList<>();
        List<Expr> values = new ArrayList<>();
        while (peek().kind() != Kind.BLOCK_END) {
            if (!targets.isEmpty()) {
                expect(Kind.OP, ",");
            }
            targets.add(expectName());
            expect(Kind.OP, "=");
            values.add(expression());
        }
        next();
        List<Stmt> body = statements(Set.of("endwith"));
        endTag("endwith");
        return new Node.With(targets, values, body);
    }

    /** {@code call(params) target(args)}: the block's body becomes the callee's {@code caller}. */
    private Stmt callStatement() {
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        if (peek().isOp("(")) {
            next();
            parameters(params, defaults);
        }
        Expr call = postfix(primary());
        if (!(call instanceof Node.Call c)) {
            throw error("expected a call after 'call'");
        }
        expect(Kind.BLOCK_END, null);
        return new Node.CallBlock(c, macroBody("caller", params, defaults, "endcall"));
    }

    /** After '(' : parameter names with optional defaults, up to and including ')'. */
    private void parameters(List<String> params, List<Expr> defaults) {
        while (!peek().isOp(")")) {
            params.add(expectName());
            if (peek().isOp("=")) {
                next();
                defaults.add(expression());
            } else {
                defaults.add(null);
            }
            if (!peek().isOp(")")) {
                expect(Kind.OP, ",");
            }
        }
        next();
    }

    /** A macro's (or caller's) body up to its end tag, noting which of varargs, kwargs and caller it names. */
    private Node.Macro macroBody(String name, List<String> params, List<Expr> defaults, String endTag) {
        int outer = loops;
        Set<String> outerNames = namesSeen;
        loops = 0; // a macro runs wherever it is called: a loop around its definition is not around its body
        namesSeen = new HashSet<>();
        List<Stmt> body;
        Set<String> names = namesSeen;
        try {
            body = statements(Set.of(endTag));
        } finally {
            loops = outer;
            namesSeen = outerNames;
        }
        if (outerNames != null) {
            outerNames.addAll(names); // a nested macro's use of an outer name is the outer body's use too
        }
        endTag(endTag);
        return new Node.Macro(name, params, defaults, body, names.contains("varargs"), names.contains("kwargs"), names.contains("caller"));
    }

    private Stmt macroStatement() {
        String name = expectName();
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        expect(Kind.OP, "(");
        parameters(params, defaults);
        expect(Kind.BLOCK_END, null);
        return macroBody(name, params, defaults, "endmacro");
    }

}
