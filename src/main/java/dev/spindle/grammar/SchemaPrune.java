package dev.spindle.grammar;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Which types of each node some value satisfies, as a least fixed point over the (possibly
 * cyclic) graph: an object part holds when every required key can take a satisfiable value,
 * an array part when its first minItems items can. Unsatisfiable types and alternatives are
 * then removed, so the recognizer never starts a value, key or item it could not finish.
 */
final class SchemaPrune {
    private SchemaPrune() {
    }

    static void prune(Schema root) {
        List<Schema> nodes = reachable(root);
        Map<Schema, Set<Schema.Type>> sat = new IdentityHashMap<>();
        for (Schema n : nodes) {
            sat.put(n, EnumSet.noneOf(Schema.Type.class));
        }
        boolean changed = true;
        while (changed) {
            changed = false;
            for (Schema n : nodes) {
                Set<Schema.Type> now = satisfied(n, sat);
                if (!now.equals(sat.get(n))) {
                    sat.put(n, now);
                    changed = true;
                }
            }
        }
        for (Schema n : nodes) {
            if (!n.anyOf.isEmpty()) {
                n.anyOf = n.anyOf.stream().filter(a -> !sat.get(a).isEmpty()).toList();
            }
            n.types.retainAll(sat.get(n));
        }
    }

    private static List<Schema> reachable(Schema root) {
        Map<Schema, Boolean> seen = new IdentityHashMap<>();
        List<Schema> out = new ArrayList<>();
        ArrayDeque<Schema> work = new ArrayDeque<>(List.of(root));
        while (!work.isEmpty()) {
            Schema s = work.pop();
            if (s == null || seen.put(s, true) != null) {
                continue;
            }
            out.add(s);
            work.addAll(s.properties.values());
            work.addAll(s.prefixItems);
            work.addAll(s.anyOf);
            if (s.additional != null) {
                work.add(s.additional);
            }
            if (s.items != null) {
                work.add(s.items);
            }
        }
        return out;
    }

    private static boolean ok(Schema s, Map<Schema, Set<Schema.Type>> sat) {
        return s == null || !sat.get(s).isEmpty();
    }

    private static Set<Schema.Type> satisfied(Schema n, Map<Schema, Set<Schema.Type>> sat) {
        Set<Schema.Type> out = EnumSet.noneOf(Schema.Type.class);
        if (!n.anyOf.isEmpty()) {
            n.anyOf.forEach(a -> out.addAll(sat.get(a)));
            return out;
        }
        for (Schema.Type t : n.types) {
            boolean holds = switch (t) {
                case NULL, BOOLEAN -> true;
                case STRING -> n.string == null || n.string.satisfiable();
                case NUMBER -> n.number == null || n.number.viable("", false);
                case INTEGER -> n.number == null || n.number.viable("", !n.types.contains(Schema.Type.NUMBER));
                case OBJECT -> objectHolds(n, sat);
                case ARRAY -> {
                    boolean fits = n.minItems <= n.maxItems;
                    for (int i = 0; i < n.minItems && fits; i++) {
                        fits = ok(n.itemAt(i), sat);
                    }
                    yield fits;
                }
            };
            if (holds) {
                out.add(t);
            }
        }
        return out;
    }

    private static boolean objectHolds(Schema n, Map<Schema, Set<Schema.Type>> sat) {
        if (n.required.size() > n.maxProperties || n.minProperties > n.maxProperties) {
            return false;
        }
        boolean open = n.additionalAllowed() && ok(n.additional, sat);
        for (String r : n.required) {
            Schema p = n.properties.get(r);
            if (p == null ? !open : !ok(p, sat)) {
                return false;
            }
        }
        if (!open) {
            long keys = n.properties.values().stream().filter(p -> ok(p, sat)).count();
            return keys >= n.minProperties;
        }
        return true;
    }

    /** Why a node admits nothing, as far as a required key explains it (for the refusal's message). */
    static String why(Schema n, String path) {
        for (Schema alt : n.anyOf.isEmpty() ? List.of(n) : n.anyOf) {
            for (String r : alt.required) {
                if (!alt.properties.containsKey(r) && !alt.additionalAllowed()) {
                    return ": " + path + ".required names '" + r + "', which is not among its properties (and no other property is allowed)";
                }
            }
        }
        return "";
    }
}
