package dev.spindle.chat.jinja;

import dev.spindle.chat.jinja.Node.Expr;
import dev.spindle.chat.jinja.Node.Stmt;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Renders a parsed template. Scopes follow Jinja: a for loop and a macro call open a
 * new scope (assignments inside do not leak out), if blocks do not; a namespace is the
 * way to carry values out of a loop.
 */
final class Interpreter {
    private static final int MAX_DEPTH = 200;

    /** One scope of variables, looked up through its parents. */
    static final class Scope {
        final Scope parent;
        final Map<String, Object> vars = new HashMap<>();

        Scope(Scope parent) {
            this.parent = parent;
        }

        Object lookup(String name) {
            for (Scope s = this; s != null; s = s.parent) {
                if (s.vars.containsKey(name)) {
                    return s.vars.get(name);
                }
            }
            return new Undefined("'" + name + "'");
        }
    }

    private static final class LoopSignal extends RuntimeException {
        final boolean isBreak;

        LoopSignal(boolean isBreak) {
            super(null, null, false, false);
            this.isBreak = isBreak;
        }
    }

    private final Scope root;
    private int depth;

    Interpreter(Map<String, Object> variables) {
        root = new Scope(null);
        root.vars.putAll(Builtins.globals());
        root.vars.putAll(variables);
    }

    String render(List<Stmt> body) {
        StringBuilder out = new StringBuilder();
        exec(body, root, out);
        return out.toString();
    }

    private void exec(List<Stmt> body, Scope scope, StringBuilder out) {
        for (Stmt s : body) {
            exec(s, scope, out);
        }
    }

    private void exec(Stmt s, Scope scope, StringBuilder out) {
        switch (s) {
            case Node.Text t -> out.append(t.text());
            case Node.Output o -> out.append(Py.str(eval(o.expr(), scope)));
            case Node.If i -> {
                for (int k = 0; k < i.conditions().size(); k++) {
                    if (Py.truthy(eval(i.conditions().get(k), scope))) {
                        exec(i.bodies().get(k), scope, out);
                        return;
                    }
                }
                exec(i.otherwise(), scope, out);
            }
            case Node.For f -> execFor(f, scope, out);
            case Node.Set set -> execSet(set, scope);
            case Node.Macro m -> scope.vars.put(m.name(), macro(m, scope));
            case Node.FilterBlock fb -> {
                StringBuilder inner = new StringBuilder();
                exec(fb.body(), scope, inner);
                out.append(Py.str(applyFilters(fb.filter(), inner.toString(), scope)));
            }
            case Node.Block b -> exec(b.body(), scope, out);
            case Node.Break b -> throw new LoopSignal(true);
            case Node.Continue c -> throw new LoopSignal(false);
        }
    }

    private void execFor(Node.For f, Scope scope, StringBuilder out) {
        Object iterable = eval(f.iterable(), scope);
        List<Object> items = Py.iterate(iterable);
        Scope loopScope = new Scope(scope);
        if (f.filter() != null) {
            List<Object> kept = new ArrayList<>();
            for (Object item : items) {
                bind(f.targets(), item, loopScope);
                if (Py.truthy(eval(f.filter(), loopScope))) {
                    kept.add(item);
                }
            }
            items = kept;
        }
        if (items.isEmpty()) {
            exec(f.otherwise(), scope, out);
            return;
        }
        LoopContext loop = new LoopContext(items);
        loopScope.vars.put("loop", loop);
        for (int i = 0; i < items.size(); i++) {
            loop.index0 = i;
            bind(f.targets(), items.get(i), loopScope);
            try {
                exec(f.body(), loopScope, out);
            } catch (LoopSignal signal) {
                if (signal.isBreak) {
                    break;
                }
            }
        }
    }

    private static void bind(List<String> targets, Object item, Scope scope) {
        if (targets.size() == 1) {
            scope.vars.put(targets.getFirst(), item);
            return;
        }
        List<Object> parts = Py.iterate(item);
        if (parts.size() != targets.size()) {
            throw new TemplateException("cannot unpack " + parts.size() + " values into " + targets.size() + " names " + targets);
        }
        for (int i = 0; i < targets.size(); i++) {
            scope.vars.put(targets.get(i), parts.get(i));
        }
    }

    private void execSet(Node.Set set, Scope scope) {
        Object value;
        if (set.body() != null) {
            StringBuilder b = new StringBuilder();
            exec(set.body(), scope, b);
            value = b.toString();
        } else {
            value = eval(set.value(), scope);
        }
        if (set.attribute() != null) {
            Object target = scope.lookup(set.targets().getFirst());
            if (!(target instanceof Namespace ns)) {
                throw new TemplateException("cannot assign attribute on non-namespace object '" + set.targets().getFirst() + "'");
            }
            ns.attrs.put(set.attribute(), value);
            return;
        }
        bind(set.targets(), value, scope);
    }

    private PyCallable macro(Node.Macro m, Scope definedIn) {
        return (args, kwargs) -> {
            Scope s = new Scope(definedIn);
            for (int i = 0; i < m.params().size(); i++) {
                String p = m.params().get(i);
                Object v;
                if (i < args.size()) {
                    v = args.get(i);
                } else if (kwargs.containsKey(p)) {
                    v = kwargs.get(p);
                } else if (m.defaults().get(i) != null) {
                    v = eval(m.defaults().get(i), s);
                } else {
                    v = new Undefined("'" + p + "'");
                }
                s.vars.put(p, v);
            }
            StringBuilder out = new StringBuilder();
            if (++depth > MAX_DEPTH) {
                throw new TemplateException("macro '" + m.name() + "' recursed too deeply");
            }
            try {
                exec(m.body(), s, out);
            } finally {
                depth--;
            }
            return out.toString();
        };
    }

    Object eval(Expr e, Scope scope) {
        return switch (e) {
            case Node.Const c -> c.value();
            case Node.Name n -> scope.lookup(n.name());
            case Node.ListLit l -> evalAll(l.items(), scope);
            case Node.TupleLit t -> new Tuple(evalAll(t.items(), scope));
            case Node.DictLit d -> {
                Map<Object, Object> out = new LinkedHashMap<>();
                for (int i = 0; i < d.keys().size(); i++) {
                    out.put(eval(d.keys().get(i), scope), eval(d.values().get(i), scope));
                }
                yield out;
            }
            case Node.Attr a -> Builtins.getattr(eval(a.target(), scope), a.name());
            case Node.Item i -> Builtins.getitem(eval(i.target(), scope), eval(i.key(), scope));
            case Node.Slice s -> Py.slice(eval(s.target(), scope), evalOrNull(s.start(), scope), evalOrNull(s.stop(), scope),
                    evalOrNull(s.step(), scope));
            case Node.Call c -> call(c, scope);
            case Node.Filter f -> applyFilters(f, null, scope);
            case Node.Test t -> t.negated() != Builtins.test(t.name(), eval(t.target(), scope), evalAll(t.args(), scope));
            case Node.Binary b -> {
                Object l = eval(b.left(), scope);
                Object r = eval(b.right(), scope);
                yield b.op().equals("~") ? Py.str(l) + Py.str(r) : Py.arithmetic(b.op(), l, r);
            }
            case Node.Unary u -> {
                Object v = eval(u.operand(), scope);
                if (v instanceof Undefined und) {
                    throw und.error();
                }
                if (u.op().equals("+")) {
                    yield v;
                }
                yield v instanceof Double d ? (Object) (-d) : (Object) (-Py.toLong(v));
            }
            case Node.Compare c -> {
                Object left = eval(c.first(), scope);
                for (int i = 0; i < c.ops().size(); i++) {
                    Object right = eval(c.rest().get(i), scope);
                    boolean ok = switch (c.ops().get(i)) {
                        case "==" -> Py.eq(left, right);
                        case "!=" -> !Py.eq(left, right);
                        case "<" -> Py.compare(left, right) < 0;
                        case "<=" -> Py.compare(left, right) <= 0;
                        case ">" -> Py.compare(left, right) > 0;
                        case ">=" -> Py.compare(left, right) >= 0;
                        case "in" -> Py.contains(right, left);
                        default -> !Py.contains(right, left);
                    };
                    if (!ok) {
                        yield false;
                    }
                    left = right;
                }
                yield true;
            }
            case Node.And a -> {
                Object l = eval(a.left(), scope);
                yield Py.truthy(l) ? eval(a.right(), scope) : l;
            }
            case Node.Or o -> {
                Object l = eval(o.left(), scope);
                yield Py.truthy(l) ? l : eval(o.right(), scope);
            }
            case Node.Not n -> !Py.truthy(eval(n.operand(), scope));
            case Node.Cond c -> Py.truthy(eval(c.condition(), scope)) ? eval(c.then(), scope)
                    : c.otherwise() == null ? new Undefined("the else branch of a conditional expression") : eval(c.otherwise(), scope);
        };
    }

    private Object evalOrNull(Expr e, Scope scope) {
        return e == null ? null : eval(e, scope);
    }

    private Object call(Node.Call c, Scope scope) {
        Object target = eval(c.target(), scope);
        List<Object> args = evalAll(c.args(), scope);
        Map<String, Object> kwargs = evalKeywords(c.kwNames(), c.kwValues(), scope);
        if (target instanceof PyCallable f) {
            return f.call(args, kwargs);
        }
        if (target instanceof Undefined u) {
            throw u.error();
        }
        throw new TemplateException("'" + Py.typeName(target) + "' object is not callable");
    }

    /** A filter node applied to its target (or to {@code input} inside a filter block). */
    private Object applyFilters(Expr e, Object input, Scope scope) {
        if (!(e instanceof Node.Filter f)) {
            return eval(e, scope);
        }
        Object value = f.target() == null ? input : applyFilters(f.target(), input, scope);
        return Builtins.filter(f.name(), value, evalAll(f.args(), scope), evalKeywords(f.kwNames(), f.kwValues(), scope), this);
    }

    private List<Object> evalAll(List<Expr> exprs, Scope scope) {
        List<Object> out = new ArrayList<>();
        for (Expr x : exprs) {
            out.add(eval(x, scope));
        }
        return out;
    }

    private Map<String, Object> evalKeywords(List<String> names, List<Expr> values, Scope scope) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < names.size(); i++) {
            out.put(names.get(i), eval(values.get(i), scope));
        }
        return out;
    }
}
