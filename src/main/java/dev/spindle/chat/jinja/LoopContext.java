package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.List;

/** The {@code loop} variable inside a for block. */
final class LoopContext {
    final List<Object> items;
    int index0;
    /** the values last passed to loop.changed(...), null before the first call */
    private List<Object> lastChanged;

    LoopContext(List<Object> items) {
        this.items = items;
    }

    Object attribute(String name) {
        int n = items.size();
        return switch (name) {
            case "index" -> (long) index0 + 1;
            case "index0" -> (long) index0;
            case "revindex" -> (long) (n - index0);
            case "revindex0" -> (long) (n - index0 - 1);
            case "first" -> index0 == 0;
            case "last" -> index0 == n - 1;
            case "length" -> (long) n;
            case "depth" -> 1L; // depth counts recursive loops, which templates cannot declare here
            case "depth0" -> 0L;
            case "previtem" -> index0 > 0 ? items.get(index0 - 1) : new Undefined("there is no previous item");
            case "nextitem" -> index0 < n - 1 ? items.get(index0 + 1) : new Undefined("there is no next item");
            case "cycle" -> (PyCallable) (args, kw) -> {
                if (args.isEmpty()) {
                    throw new TemplateException("no items for cycling given");
                }
                return args.get(index0 % args.size());
            };
            case "changed" -> (PyCallable) (args, kw) -> {
                List<Object> now = new ArrayList<>(args);
                if (lastChanged != null && Py.eq(lastChanged, now)) {
                    return false;
                }
                lastChanged = now;
                return true;
            };
            default -> new Undefined("'LoopContext object' has no attribute '" + name + "'");
        };
    }
}
