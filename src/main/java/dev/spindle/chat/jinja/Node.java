package dev.spindle.chat.jinja;

import java.util.List;

/** The template's syntax tree: statements and expressions. */
sealed interface Node {
    sealed interface Stmt extends Node {
    }

    sealed interface Expr extends Node {
    }

    record Text(String text) implements Stmt {
    }

    record Output(Expr expr) implements Stmt {
    }

    record If(List<Expr> conditions, List<List<Stmt>> bodies, List<Stmt> otherwise) implements Stmt {
    }

    record For(List<String> targets, Expr iterable, Expr filter, List<Stmt> body, List<Stmt> otherwise, int line) implements Stmt {
    }

    /** {@code set a = x}, {@code set a, b = x}, {@code set ns.attr = x}; body != null for a block set, whose filter may be null. */
    record Set(List<String> targets, String attribute, Expr value, List<Stmt> body, Expr filter) implements Stmt {
    }

    /**
     * A macro (or a call block's caller: name "caller"); the uses* flags say whether its body
     * names varargs, kwargs or caller, which decides what extra arguments it accepts, as in Jinja.
     */
    record Macro(String name, List<String> params, List<Expr> defaults, List<Stmt> body,
                 boolean usesVarargs, boolean usesKwargs, boolean usesCaller) implements Stmt {
    }

    /** {@code call(params) macro(args)}: calls the macro with {@code caller} bound to the block's body. */
    record CallBlock(Call call, Macro caller) implements Stmt {
    }

    /** {@code with a = x, b = y}: names visible only inside the body. */
    record With(List<String> targets, List<Expr> values, List<Stmt> body) implements Stmt {
    }

    record FilterBlock(Expr filter, List<Stmt> body) implements Stmt {
    }

    /** {@code generation} blocks (HF's assistant-mask marker) render their body unchanged. */
    record Block(List<Stmt> body) implements Stmt {
    }

    record Break() implements Stmt {
    }

    record Continue() implements Stmt {
    }

    record Const(Object value) implements Expr {
    }

    record Name(String name, int line) implements Expr {
    }

    record ListLit(List<Expr> items) implements Expr {
    }

    record TupleLit(List<Expr> items) implements Expr {
    }

    record DictLit(List<Expr> keys, List<Expr> values) implements Expr {
    }

    record Attr(Expr target, String name) implements Expr {
    }

    record Item(Expr target, Expr key) implements Expr {
    }

    record Slice(Expr target, Expr start, Expr stop, Expr step) implements Expr {
    }

    record Call(Expr target, List<Expr> args, List<String> kwNames, List<Expr> kwValues) implements Expr {
    }

    /** {@code target | name(args)}; target null inside a filter block. */
    record Filter(Expr target, String name, List<Expr> args, List<String> kwNames, List<Expr> kwValues, int line) implements Expr {
    }

    record Test(Expr target, String name, List<Expr> args, boolean negated, int line) implements Expr {
    }

    record Binary(String op, Expr left, Expr right) implements Expr {
    }

    record Unary(String op, Expr operand) implements Expr {
    }

    /** A chain {@code a < b <= c}, ops among == != < <= > >= in, "not in". */
    record Compare(Expr first, List<String> ops, List<Expr> rest) implements Expr {
    }

    record And(Expr left, Expr right) implements Expr {
    }

    record Or(Expr left, Expr right) implements Expr {
    }

    record Not(Expr operand) implements Expr {
    }

    record Cond(Expr condition, Expr then, Expr otherwise) implements Expr {
    }
}
