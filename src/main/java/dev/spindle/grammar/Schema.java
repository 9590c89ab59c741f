package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.Collections;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A JSON schema reduced to what constrained decoding enforces: one node of a grammar, either a
 * union ({@link #anyOf} non-empty: the value is one of the alternatives, and nothing else of the
 * node applies) or a conjunction of per-type constraints. Compiled by {@link SchemaCompiler};
 * what each keyword becomes:
 * <ul>
 * <li>{@code type} (one or a list), {@code nullable}; {@code enum} and {@code const} as JSON
 * values, not spellings (1.0 is 1, an object's keys in any order), intersected with the siblings;
 * {@code properties}, {@code required}, {@code additionalProperties} (boolean or schema),
 * {@code minProperties}, {@code maxProperties}; {@code items}, {@code prefixItems} (and the
 * older array form of {@code items} with {@code additionalItems}), {@code minItems},
 * {@code maxItems}; {@code minLength}, {@code maxLength} (code points of the decoded string),
 * {@code pattern} (ECMA-262, see {@link Regex}), {@code format} date-time, date, time, duration,
 * email, hostname, ipv4, ipv6 and uuid (see {@link Formats}; other formats are annotations);
 * {@code minimum}, {@code maximum}, {@code exclusiveMinimum}, {@code exclusiveMaximum},
 * {@code multipleOf} (see {@link NumberRule}: a bounded number is written without exponent).</li>
 * <li>{@code $ref} to a local JSON pointer ({@code #}, {@code #/$defs/X}, {@code #/definitions/X},
 * any other pointer into the document), recursion included; {@code allOf} and a {@code $ref}'s or
 * {@code anyOf}'s sibling keywords are intersected into one node ({@code anyOf} distributes:
 * each alternative gets the siblings).</li>
 * <li>{@code oneOf}: enforced where its branches are provably disjoint (different types,
 * different const or enum values, a required property whose values differ in each branch, as
 * discriminated unions have); otherwise strict compilation refuses it, and lenient compilation
 * reads it as {@code anyOf} (a value matching two branches is then let through).</li>
 * <li>{@code not}: where the complement is a node again (not a type, not an enum or const of
 * strings, booleans or null, not a pattern or format); otherwise refused in strict, unchecked in lenient.</li>
 * </ul>
 *
 * <p>Implicit closing: as OpenAI's strict structured outputs and xgrammar's strict mode do, an
 * object whose schema lists {@code properties} and where no part of it (after merging allOf,
 * $ref siblings and anyOf siblings) says {@code additionalProperties} takes only the listed
 * properties and the names in {@code required} (those with any value): the model writes the
 * schema's properties, not ones it invents. An object schema without {@code properties} takes
 * any keys. Merging treats an implicitly closed part as open, and the merged node is then closed
 * by the same rule; an explicit {@code additionalProperties} in any part decides instead.
 *
 * <p>A schema is never refused for being contradictory in part: a branch, a property or an item
 * that admits no value is pruned (the key cannot be written, the array cannot grow there); only
 * a schema that admits no value at all is refused, since nothing could be decoded.
 *
 * <p>Not enforced, so refused by name in strict compilation and unchecked in lenient: if / then /
 * else, dependentRequired, dependentSchemas, patternProperties, propertyNames, unevaluatedProperties,
 * unevaluatedItems, contains (minContains, maxContains), uniqueItems true (false is no constraint),
 * $dynamicRef, references outside the document or by anchor, patterns with backreferences, word
 * boundaries or lookaround other than leading lookaheads, oneOf whose branches may overlap, not of
 * what has no complement here (numbers with bounds or values, integers, constrained objects or
 * arrays), minLength past {@value StringRule#MAX_EXACT_LENGTH} together with a pattern, and anything
 * past {@value SchemaAlgebra#MAX_ALTERNATIVES} alternatives once merged or {@value Dfa#MAX_STATES}
 * automaton states.
 *
 * <p>{@link #compile} (response_format, forced tool calls) refuses any other keyword by name, so
 * a client never gets output that silently ignores its schema. {@link #compileLenient} (tools the
 * model may call of its own accord) enforces the same and leaves only the unsupported keywords
 * (and undecidable oneOf / not, and references outside the document) unchecked, each alone.
 *
 * <p>A final class rather than a record: recursive references make the graph cyclic, so a node
 * exists (as the target of a {@code $ref}) before its content; the compiler fills it once, and
 * after compilation nothing changes. Nodes compare by identity: a compiled node is one node of
 * one grammar, and states compare schemas often.
 */
public final class Schema {
    public enum Type { OBJECT, ARRAY, STRING, INTEGER, NUMBER, BOOLEAN, NULL }

    // a number type always comes with INTEGER: types is the set of JSON types the node admits
    Set<Type> types;
    Boolean bool;                      // the one boolean admitted, or null for both
    Map<String, Schema> properties;
    List<String> required;
    Schema additional;                 // schema of other keys when they are allowed, null: any value
    Boolean additionalSaid;            // additionalProperties as given (false, or true for a schema); null: not given
    boolean listed;                    // the schema lists properties (closes the object when additionalProperties is not given)
    int minProperties, maxProperties;
    Schema items;                      // items after prefixItems; null: any
    List<Schema> prefixItems;
    int minItems, maxItems;
    StringRule string;                 // null: any string
    NumberRule number;                 // null: any number
    List<JsonNode> enumValues;         // the values, when the node admits finitely many known ones (enum, const); else null
    List<Schema> anyOf;
    boolean filled;                    // false while a recursive $ref's target is being compiled

    Schema() {
        types = EnumSet.allOf(Type.class);
        properties = Map.of();
        required = List.of();
        prefixItems = List.of();
        anyOf = List.of();
        maxProperties = Integer.MAX_VALUE;
        maxItems = Integer.MAX_VALUE;
        filled = true;
    }

    private static final Schema ANY = new Schema();
    private static final Schema ANY_OBJECT = typed(EnumSet.of(Type.OBJECT));

    static Schema typed(Set<Type> types) {
        Schema s = new Schema();
        s.types = types;
        return s;
    }

    /** Admits no value. */
    static Schema never() {
        return typed(EnumSet.noneOf(Type.class));
    }

    /** Any JSON value. */
    public static Schema any() {
        return ANY;
    }

    /** Any object (json_object mode). */
    public static Schema anyObject() {
        return ANY_OBJECT;
    }

    /** @throws IllegalArgumentException naming an unsupported keyword, or why the schema admits no value (path included) */
    public static Schema compile(JsonNode s) {
        return SchemaCompiler.compile(s, true);
    }

    /** As {@link #compile}, but an unsupported keyword is left unchecked instead of refused (the rest is enforced). */
    public static Schema compileLenient(JsonNode s) {
        return SchemaCompiler.compile(s, false);
    }

    public Set<Type> types() {
        return Collections.unmodifiableSet(types);
    }

    public Map<String, Schema> properties() {
        return Collections.unmodifiableMap(properties);
    }

    public List<String> required() {
        return required;
    }

    /** The schema of keys not among the properties (when {@link #additionalAllowed}); null: any value. */
    public Schema additional() {
        return additional;
    }

    /** Whether keys other than the properties may be written (see the implicit closing above). */
    public boolean additionalAllowed() {
        return additionalSaid == null ? !listed : additionalSaid;
    }

    public Schema items() {
        return items;
    }

    public List<Schema> prefixItems() {
        return prefixItems;
    }

    public List<JsonNode> enumValues() {
        return enumValues;
    }

    public List<Schema> anyOf() {
        return anyOf;
    }

    public int minItems() {
        return minItems;
    }

    public int maxItems() {
        return maxItems;
    }

    public int minProperties() {
        return minProperties;
    }

    public int maxProperties() {
        return maxProperties;
    }

    /** Whether some value satisfies the schema (after compilation, unsatisfiable parts are pruned). */
    public boolean satisfiable() {
        return !types.isEmpty();
    }

    /**
     * Whether every value of this schema is a string and its text is free (a raw-text tool
     * parameter): a plain string, or an enum of strings. A string with a pattern, format or
     * length bounds is not: it is written as a JSON string, where those are enforced.
     */
    public boolean stringOnly() {
        if (enumValues != null) {
            return !enumValues.isEmpty() && enumValues.stream().allMatch(JsonNode::isTextual);
        }
        if (!anyOf.isEmpty()) {
            return false;
        }
        return types.equals(Set.of(Type.STRING)) && string == null;
    }

    /** The schema of item {@code i}; null: any value. */
    Schema itemAt(int i) {
        return i < prefixItems.size() ? prefixItems.get(i) : items;
    }

    /** The schema of key {@code key} when it may be written, else null. */
    public Schema propertySchema(String key) {
        Schema p = properties.get(key);
        if (p != null) {
            return p.satisfiable() ? p : null;
        }
        if (!additionalAllowed()) {
            return null;
        }
        return additional == null ? ANY : additional.satisfiable() ? additional : null;
    }

    /** Whether keys beyond the properties can be written. */
    public boolean takesOtherKeys() {
        return additionalAllowed() && (additional == null || additional.satisfiable());
    }

    /** Whether this node constrains nothing (any value). */
    boolean isAny() {
        return anyOf.isEmpty() && types.size() == Type.values().length && bool == null && properties.isEmpty() && required.isEmpty()
                && additional == null && (additionalSaid == null || additionalSaid) && minProperties == 0 && maxProperties == Integer.MAX_VALUE
                && items == null && prefixItems.isEmpty() && minItems == 0 && maxItems == Integer.MAX_VALUE && string == null && number == null
                && enumValues == null && filled;
    }

    /** A copy to modify (the content of {@code this}, as a new node). */
    Schema copy() {
        Schema s = new Schema();
        s.become(this);
        return s;
    }

    /** Takes {@code o}'s content (a recursive reference's target, once compiled). */
    void become(Schema o) {
        types = EnumSet.noneOf(Type.class);
        types.addAll(o.types);
        bool = o.bool;
        properties = new LinkedHashMap<>(o.properties);
        required = List.copyOf(o.required);
        additional = o.additional;
        additionalSaid = o.additionalSaid;
        listed = o.listed;
        minProperties = o.minProperties;
        maxProperties = o.maxProperties;
        items = o.items;
        prefixItems = List.copyOf(o.prefixItems);
        minItems = o.minItems;
        maxItems = o.maxItems;
        string = o.string;
        number = o.number;
        enumValues = o.enumValues;
        anyOf = List.copyOf(o.anyOf);
        filled = true;
    }

    @Override
    public String toString() {
        if (!anyOf.isEmpty()) {
            return "anyOf" + anyOf.size();
        }
        return "Schema" + types + (enumValues != null ? enumValues : "") + (listed ? properties.keySet() : "");
    }
}
