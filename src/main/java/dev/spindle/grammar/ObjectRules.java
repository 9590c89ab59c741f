package dev.spindle.grammar;

/**
 * What an object being written may do next, from its schema and the keys it has: another key (listed,
 * or any where the schema takes other keys), within {@code maxProperties} with the required keys still
 * to come counted; and whether it may close ({@code required} given, {@code minProperties} reached).
 */
final class ObjectRules {
    private ObjectRules() {
    }

    /** Keys not yet given that the object still needs. */
    private static int missingRequired(JsonRecognizer.Obj o) {
        int n = 0;
        for (String r : o.schema().required()) {
            if (!o.seen().contains(r)) {
                n++;
            }
        }
        return n;
    }

    /** Whether listed property {@code p} (not yet given) may be written now: its value can be, and maxProperties leaves room. */
    static boolean listedKeyFits(JsonRecognizer.Obj o, String p) {
        Schema s = o.schema();
        if (s.propertySchema(p) == null) {
            return false;
        }
        int after = o.seen().size() + 1 + missingRequired(o) - (s.required().contains(p) ? 1 : 0);
        return after <= s.maxProperties();
    }

    /** Whether a key not among the properties may be written now. */
    static boolean otherKeyFits(JsonRecognizer.Obj o) {
        Schema s = o.schema();
        return s.takesOtherKeys() && o.seen().size() + 1 + missingRequired(o) <= s.maxProperties();
    }

    /** Whether another property may still be written. */
    static boolean morePropertiesAllowed(JsonRecognizer.Obj o) {
        if (otherKeyFits(o)) {
            return true;
        }
        for (String p : o.schema().properties().keySet()) {
            if (!o.seen().contains(p) && listedKeyFits(o, p)) {
                return true;
            }
        }
        return false;
    }

    /** Whether the object may close here. */
    static boolean closable(JsonRecognizer.Obj o) {
        return o.seen().containsAll(o.schema().required()) && o.seen().size() >= o.schema().minProperties();
    }
}
