package dev.spindle.chat.jinja;

import dev.spindle.chat.jinja.Node.Expr;
import dev.spindle.chat.jinja.Node.Stmt;
import dev.spindle.chat.jinja.Token.Kind;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/** Recursive-descent parser for the Jinja2 subset chat templates use, with Jinja2's precedence. */
final class Parser {
    private final List<Token> tokens;
    private int p;
    /** for-loop bodies around the statement being parsed (a macro's body starts outside any): where break and continue may stand */
    private int loops;

    private Parser(List<Token> tokens) {
        this.tokens = tokens;
    }

    static List<Stmt> parse(String source) {
        Parser parser = new Parser(Lexer.tokenize(source));
        List<Stmt> body = parser.statements(Set.of());
        if (parser.peek().kind() != Kind.EOF) {
            throw parser.error("unexpected '" + parser.peekBlockName() + "'");
        }
        return body;
    }

    private Token peek() {
        return tokens.get(p);
    }

    private Token next() {
        return tokens.get(p++);
    }

    private TemplateException error(String what) {
        return new TemplateException("template syntax error at line " + peek().line() + ": " + what);
    }

    private Token expect(Kind kind, String text) {
        Token t = next();
        if (t.kind() != kind || (text != null && !t.text().equals(text))) {
            p--;
            throw error("expected " + (text != null ? "'" + text + "'" : kind.name().toLowerCase()) + ", found '" + t.text() + "'");
        }
        return t;
    }

    private String expectName() {
        return expect(Kind.NAME, null).text();
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
        if (peek().kind() == Kind.BLOCK_END) {
            next();
            List<Stmt> body = statements(Set.of("endset"));
            endTag("endset");
            return new Node.Set(targets, attribute, null, body);
        }
        expect(Kind.OP, "=");
        Expr value = tupleOrExpression();
        expect(Kind.BLOCK_END, null);
        return new Node.Set(targets, attribute, value, null);
    }

    private Stmt macroStatement() {
        String name = expectName();
        List<String> params = new ArrayList<>();
        List<Expr> defaults = new ArrayList<>();
        expect(Kind.OP, "(");
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
        expect(Kind.BLOCK_END, null);
        int outer = loops;
        loops = 0; // a macro runs wherever it is called: a loop around its definition is not around its body
        List<Stmt> body = statements(Set.of("endmacro"));
        loops = outer;
        endTag("endmacro");
        return new Node.Macro(name, params, defaults, body);
    }

    /** {@code a, b} (an implicit tuple, as in {@code set x = a, b}) or a single expression. */
    private Expr tupleOrExpression() {
        Expr first = expression();
        if (!peek().isOp(",")) {
            return first;
        }
        List<Expr> items = new ArrayList<>(List.of(first));
        while (peek().isOp(",")) {
            next();
            items.add(expression());
        }
        return new Node.TupleLit(items);
    }

    Expr expression() {
        return condExpr(true);
    }

    private Expr condExpr(boolean withCondExpr) {
        Expr e = or();
        while (withCondExpr && peek().isName("if")) {
            next();
            Expr cond = or();
            Expr otherwise = null;
            if (peek().isName("else")) {
                next();
                otherwise = condExpr(true);
            }
            e = new Node.Cond(cond, e, otherwise);
        }
        return e;
    }

    private Expr or() {
        Expr e = and();
        while (peek().isName("or")) {
            next();
            e = new Node.Or(e, and());
        }
        return e;
    }

    private Expr and() {
        Expr e = not();
        while (peek().isName("and")) {
            next();
            e = new Node.And(e, not());
        }
        return e;
    }

    private Expr not() {
        if (peek().isName("not")) {
            next();
            return new Node.Not(not());
        }
        return compare();
    }

    private static final Set<String> CMP = Set.of("==", "!=", "<", "<=", ">", ">=");

    private Expr compare() {
        Expr first = math1();
        List<String> ops = new ArrayList<>();
        List<Expr> rest = new ArrayList<>();
        while (true) {
            Token t = peek();
            if (t.kind() == Kind.OP && CMP.contains(t.text())) {
                next();
                ops.add(t.text());
            } else if (t.isName("in")) {
                next();
                ops.add("in");
            } else if (t.isName("not") && tokens.get(p + 1).isName("in")) {
                p += 2;
                ops.add("not in");
            } else {
                break;
            }
            rest.add(math1());
        }
        return ops.isEmpty() ? first : new Node.Compare(first, ops, rest);
    }

    private Expr math1() {
        Expr e = concat();
        while (peek().isOp("+") || peek().isOp("-")) {
            String op = next().text();
            e = new Node.Binary(op, e, concat());
        }
        return e;
    }

    private Expr concat() {
        Expr e = math2();
        while (peek().isOp("~")) {
            next();
            e = new Node.Binary("~", e, math2());
        }
        return e;
    }

    private Expr math2() {
        Expr e = pow();
        while (peek().isOp("*") || peek().isOp("/") || peek().isOp("//") || peek().isOp("%")) {
            String op = next().text();
            e = new Node.Binary(op, e, pow());
        }
        return e;
    }

    private Expr pow() {
        Expr e = unary();
        while (peek().isOp("**")) {
            next();
            e = new Node.Binary("**", e, unary());
        }
        return e;
    }

    private Expr unary() {
        return unary(true);
    }

    /** As Jinja2: filters after a negation apply to the negated value, {@code -x|abs} = {@code (-x)|abs}. */
    private Expr unary(boolean withFilters) {
        Expr e;
        if (peek().isOp("-") || peek().isOp("+")) {
            String op = next().text();
            e = new Node.Unary(op, unary(false));
        } else {
            e = postfix(primary());
        }
        return withFilters ? filterChain(e) : e;
    }

    private Expr primary() {
        Token t = next();
        switch (t.kind()) {
            case NAME -> {
                return switch (t.text()) {
                    case "true", "True" -> new Node.Const(Boolean.TRUE);
                    case "false", "False" -> new Node.Const(Boolean.FALSE);
                    case "none", "None" -> new Node.Const(null);
                    default -> new Node.Name(t.text(), t.line());
                };
            }
            case STRING -> {
                StringBuilder b = new StringBuilder(t.text());
                while (peek().kind() == Kind.STRING) { // adjacent literals concatenate
                    b.append(next().text());
                }
                return new Node.Const(b.toString());
            }
            case INTEGER -> {
                return new Node.Const(Long.parseLong(t.text()));
            }
            case FLOAT -> {
                return new Node.Const(Double.parseDouble(t.text()));
            }
            case OP -> {
                switch (t.text()) {
                    case "(" -> {
                        if (peek().isOp(")")) {
                            next();
                            return new Node.TupleLit(List.of());
                        }
                        Expr e = expression();
                        if (peek().isOp(",")) {
                            List<Expr> items = new ArrayList<>(List.of(e));
                            while (peek().isOp(",")) {
                                next();
                                if (peek().isOp(")")) {
                                    break;
                                }
                                items.add(expression());
                            }
                            e = new Node.TupleLit(items);
                        }
                        expect(Kind.OP, ")");
                        return e;
                    }
                    case "[" -> {
                        List<Expr> items = new ArrayList<>();
                        while (!peek().isOp("]")) {
                            items.add(expression());
                            if (!peek().isOp("]")) {
                                expect(Kind.OP, ",");
                            }
                        }
                        next();
                        return new Node.ListLit(items);
                    }
                    case "{" -> {
                        List<Expr> keys = new ArrayList<>();
                        List<Expr> values = new ArrayList<>();
                        while (!peek().isOp("}")) {
                            keys.add(expression());
                            expect(Kind.OP, ":");
                            values.add(expression());
                            if (!peek().isOp("}")) {
                                expect(Kind.OP, ",");
                            }
                        }
                        next();
                        return new Node.DictLit(keys, values);
                    }
                    default -> {
                    }
                }
            }
            default -> {
            }
        }
        p--;
        throw error("unexpected '" + t.text() + "'");
    }

    private Expr postfix(Expr e) {
        while (true) {
            Token t = peek();
            if (t.isOp(".")) {
                next();
                Token n = next();
                if (n.kind() == Kind.INTEGER) {
                    e = new Node.Item(e, new Node.Const(Long.parseLong(n.text())));
                } else if (n.kind() == Kind.NAME) {
                    e = new Node.Attr(e, n.text());
                } else {
                    p--;
                    throw error("expected an attribute name after '.'");
                }
            } else if (t.isOp("[")) {
                next();
                e = subscript(e);
            } else if (t.isOp("(")) {
                next();
                e = call(e);
            } else {
                return e;
            }
        }
    }

    private Expr subscript(Expr target) {
        Expr start = null, stop = null, step = null;
        boolean slice = false;
        if (!peek().isOp(":")) {
            start = expression();
        }
        if (peek().isOp(":")) {
            slice = true;
            next();
            if (!peek().isOp(":") && !peek().isOp("]")) {
                stop = expression();
            }
            if (peek().isOp(":")) {
                next();
                if (!peek().isOp("]")) {
                    step = expression();
                }
            }
        }
        expect(Kind.OP, "]");
        return slice ? new Node.Slice(target, start, stop, step) : new Node.Item(target, start);
    }

    private Node.Call call(Expr target) {
        List<Expr> args = new ArrayList<>();
        List<String> kwNames = new ArrayList<>();
        List<Expr> kwValues = new ArrayList<>();
        arguments(args, kwNames, kwValues);
        return new Node.Call(target, args, kwNames, kwValues);
    }

    /** After '(' : positional and keyword arguments up to and including ')'. */
    private void arguments(List<Expr> args, List<String> kwNames, List<Expr> kwValues) {
        while (!peek().isOp(")")) {
            if (peek().kind() == Kind.NAME && tokens.get(p + 1).isOp("=")) {
                kwNames.add(next().text());
                next();
                kwValues.add(expression());
            } else {
                args.add(expression());
            }
            if (!peek().isOp(")")) {
                expect(Kind.OP, ",");
            }
        }
        next();
    }

    /** Filters ({@code | f(args)}) and tests ({@code is [not] t args}) following {@code e}. */
    private Expr filterChain(Expr e) {
        while (true) {
            Token t = peek();
            if (t.isOp("|") || (e == null && t.kind() == Kind.NAME)) {
                if (t.isOp("|")) {
                    next();
                }
                Token name = expect(Kind.NAME, null);
                List<Expr> args = new ArrayList<>();
                List<String> kwNames = new ArrayList<>();
                List<Expr> kwValues = new ArrayList<>();
                if (peek().isOp("(")) {
                    next();
                    arguments(args, kwNames, kwValues);
                }
                e = new Node.Filter(e, name.text(), args, kwNames, kwValues, name.line());
            } else if (t.isName("is") && e != null) {
                next();
                boolean negated = false;
                if (peek().isName("not")) {
                    next();
                    negated = true;
                }
                Token name = next();
                if (name.kind() != Kind.NAME) {
                    p--;
                    throw error("expected a test name after 'is'");
                }
                List<Expr> args = new ArrayList<>();
                if (peek().isOp("(")) {
                    next();
                    List<String> kn = new ArrayList<>();
                    List<Expr> kv = new ArrayList<>();
                    arguments(args, kn, kv);
                } else if (startsTestArgument(peek())) {
                    args.add(postfix(primary()));
                }
                e = new Node.Test(e, name.text(), args, negated, name.line());
            } else {
                return e;
            }
        }
    }

    /** Jinja allows one bare argument after a test name: {@code x is divisibleby 3}, {@code x is sameas none}. */
    private static boolean startsTestArgument(Token t) {
        return switch (t.kind()) {
            case STRING, INTEGER, FLOAT -> true;
            case NAME -> !Set.of("and", "or", "else", "if", "is", "in", "not").contains(t.text());
            case OP -> t.text().equals("[") || t.text().equals("{");
            default -> false;
        };
    }
}
