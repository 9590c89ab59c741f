package dev.spindle.chat.jinja;

import dev.spindle.chat.jinja.Node.Expr;
import dev.spindle.chat.jinja.Token.Kind;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/** The expression half of the parser, over a token cursor, with Jinja2's precedence (statements: {@link Parser}). */
class ExpressionParser {
    final List<Token> tokens;
    int p;
    /** names read while parsing the innermost macro body being parsed (null outside one): whether it uses varargs, kwargs, caller */
    Set<String> namesSeen;

    ExpressionParser(List<Token> tokens) {
        this.tokens = tokens;
    }

    Token peek() {
        return tokens.get(p);
    }

    Token next() {
        return tokens.get(p++);
    }

    TemplateException error(String what) {
        return new TemplateException("template syntax error at line " + peek().line() + ": " + what);
    }

    Token expect(Kind kind, String text) {
        Token t = next();
        if (t.kind() != kind || (text != null && !t.text().equals(text))) {
            p--;
            throw error("expected " + (text != null ? "'" + text + "'" : kind.name().toLowerCase()) + ", found '" + t.text() + "'");
        }
        return t;
    }

    String expectName() {
        return expect(Kind.NAME, null).text();
    }


    /** {@code a, b} (an implicit tuple, as in {@code set x = a, b}) or a single expression. */
    Expr tupleOrExpression() {
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

    Expr condExpr(boolean withCondExpr) {
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

    Expr primary() {
        Token t = next();
        switch (t.kind()) {
            case NAME -> {
                return switch (t.text()) {
                    case "true", "True" -> new Node.Const(Boolean.TRUE);
                    case "false", "False" -> new Node.Const(Boolean.FALSE);
                    case "none", "None" -> new Node.Const(null);
                    default -> {
                        if (namesSeen != null) {
                            namesSeen.add(t.text());
                        }
                        yield new Node.Name(t.text(), t.line());
                    }
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

    Expr postfix(Expr e) {
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
    void arguments(List<Expr> args, List<String> kwNames, List<Expr> kwValues) {
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
    Expr filterChain(Expr e) {
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
