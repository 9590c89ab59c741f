package dev.spindle.chat.jinja;

import dev.spindle.chat.jinja.Node.Expr;
import dev.spindle.chat.jinja.Node.Stmt;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Renders a parsed template. Scopes follow Jinja: each iteration of a for loop and each
 * macro call opens a new scope (assignments inside do not leak out, nor carry over to the
 * next iteration), if blocks do not; a namespace is the way to carry values out of a loop.
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
            return Undefined.named(name);
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
        root.vars.putAll(Globals.all());
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
            case Node.CallBlock cb -> {
                Object target = eval(cb.call().target(), scope);
                List<Object> args = evalAll(cb.call().args(), scope);
                Map<String, Object> kwargs = evalKeywords(cb.call().kwNames(), cb.call().kwValues(), scope);
                kwargs.put("caller", macro(cb.caller(), scope));
                out.append(Py.str(call(target, args, kwargs)));
            }
            case Node.With w -> {
                Scope inner = new Scope(scope);
                for (int k = 0; k < w.targets().size(); k++) {
                    inner.vars.put(w.targets().get(k), eval(w.values().get(k), scope));
                }
                exec(w.body(), inner, out);
            }
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
                Scope probe = new Scope(loopScope);
                bind(f.targets(), item, probe);
                if (Py.truthy(eval(f.filter(), probe))) {
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
            Scope iteration = new Scope(loopScope);
            bind(f.targets(), items.get(i), iteration);
            try {
                exec(f.body(), iteration, out);
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
            throw new TemplateException((parts.size() < targets.size() ? "not enough" : "too many") + " values to unpack (expected "
                    + targets.size() + ", got " + parts.size() + ")");
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
            value = set.filter() == null ? b.toString() : applyFilters(set.filter(), b.toString(), scope);
        } else {
            value = eval(set.value(), scope);
        }
        if (set.attribute() != null) {
            Object target = scope.lookup(set.targets().getFirst());
            if (!(target instanceof Namespace ns)) {
                throw new TemplateException("cannot assign attribute on non-namespace object");
            }
            ns.attrs.put(set.attribute(), value);
            return;
        }
        bind(set.targets(), value, scope);
    }

    /** A macro as a callable: parameters from positions, then keywords, then defaults; extras go to varargs/kwargs if the body names them. */
    private PyCallable macro(Node.Macro m, Scope definedIn) {
        return (args, kwargs) -> {
            Scope s = new Scope(definedIn);
            Map<String, Object> extraKw = new LinkedHashMap<>(kwargs);
            Object caller = extraKw.remove("caller");
            for (int i = 0; i < m.params().size(); i++) {
                String p = m.params().get(i);
                Object v;
                if (i < args.size()) {
                    if (extraKw.containsKey(p)) {
                        throw new TemplateException("macro '" + m.name() + "' got multiple values for argument '" + p + "'");
                    }
                    v = args.get(i);
                } else if (extraKw.containsKey(p)) {
                    v = extraKw.remove(p);
                } else if (m.defaults().get(i) != null) {
                    v = eval(m.defaults().get(i), s);
                } else {
                    v = new Undefined("parameter '" + p + "' was not provided");
                }
                s.vars.put(p, v);
            }
            List<Object> extra = args.size() > m.params().size() ? args.subList(m.params().size(), args.size()) : List.of();
            if (!extra.isEmpty() && !m.usesVarargs()) {
                throw new TemplateException("macro '" + m.name() + "' takes not more than " + m.params().size() + " argument(s)");
            }
            if (!extraKw.isEmpty() && !m.usesKwargs()) {
                throw new TemplateException("macro '" + m.name() + "' takes no keyword argument '" + extraKw.keySet().iterator().next() + "'");
            }
            if (caller != null && !m.usesCaller()) {
                throw new TemplateException("macro '" + m.name() + "' was invoked with a caller but does not use it");
            }
            s.vars.put("varargs", new Tuple(extra));
            s.vars.put("kwargs", extraKw);
            if (caller != null) {
                s.vars.put("caller", caller);
            } else if (m.usesCaller()) {
                s.vars.put("caller", new Undefined("No caller defined"));
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
                    Object key = eval(d.keys().get(i), scope);
                    out.put(Attributes.storedKey(out, key), eval(d.values().get(i), scope));
                }
                yield out;
            }
            case Node.Attr a -> Attributes.getattr(eval(a.target(), scope), a.name());
            case Node.Item i -> Attributes.getitem(eval(i.target(), scope), eval(i.key(), scope));
            case Node.Slice s -> Py.slice(eval(s.target(), scope), evalOrNull(s.start(), scope), evalOrNull(s.stop(), scope),
                    evalOrNull(s.step(), scope));
            case Node.Call c -> call(eval(c.target(), scope), evalAll(c.args(), scope), evalKeywords(c.kwNames(), c.kwValues(), scope));
            case Node.Filter f -> applyFilters(f, null, scope);
            case Node.Test t -> t.negated() != Tests.apply(t.name(), eval(t.target(), scope), evalAll(t.args(), scope));
            case Node.Binary b -> {
                Object l = eval(b.left(), scope);
                Object r = eval(b.right(), scope);
                yield b.op().equals("~") ? Py.str(l) + Py.str(r) : Py.arithmetic(b.op(), l, r);
            }
            case Node.Unary u -> {
                Object v = eval(u.operand(), scope);
                Py.undefinedCheck(v);
                if (!Py.isNumber(v)) {
                    throw new TemplateException("bad operand type for unary " + u.op() + ": '" + Py.typeName(v) + "'");
                }
                if (u.op().equals("+")) {
                    yield v instanceof Boolean ? (Object) Py.toLong(v) : v;
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
                    : c.otherwise() == null ? new Undefined("the inline if-expression evaluated to false and no else section was defined.")
                    : eval(c.otherwise(), scope);
        };
    }

    private Object evalOrNull(Expr e, Scope scope) {
        return e == null ? null : eval(e, scope);
    }

    private static Object call(Object target, List<Object> args, Map<String, Object> kwargs) {
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
        return Filters.apply(f.name(), value, evalAll(f.args(), scope), evalKeywords(f.kwNames(), f.kwValues(), scope));
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
