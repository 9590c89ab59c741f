package dev.spindle.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Drives a recognizer character by character, as the mask walk does, for the schema tests. */
final class SchemaTesting {
    static final ObjectMapper JSON = new ObjectMapper();

    private SchemaTesting() {
    }

    static JsonNode tree(String json) {
        try {
            return JSON.readTree(json);
        } catch (Exception e) {
            throw new IllegalArgumentException(e);
        }
    }

    static Schema strict(String schema) {
        return Schema.compile(tree(schema));
    }

    static Schema lenient(String schema) {
        return Schema.compileLenient(tree(schema));
    }

    /** The number of characters of {@code doc} the recognizer takes before refusing one (doc.length() if it takes all). */
    static int taken(Schema s, String doc) {
        Recognizer r = JsonRecognizer.start(s);
        for (int i = 0; i < doc.length(); i++) {
            r = r.step(doc.charAt(i));
            if (r == null) {
                return i;
            }
        }
        return doc.length();
    }

    static boolean accepts(Schema s, String doc) {
        Recognizer r = JsonRecognizer.start(s).feed(doc);
        return r != null && r.accepting();
    }

    static void accepted(Schema s, String... docs) {
        for (String d : docs) {
            assertTrue(accepts(s, d), "should accept " + d);
        }
    }

    static void refused(Schema s, String... docs) {
        for (String d : docs) {
            assertTrue(!accepts(s, d), "should refuse " + d);
        }
    }

    /** {@code doc} is refused at its character {@code at} (not before, and not later). */
    static void refusedAt(Schema s, String doc, int at) {
        assertEquals(at, taken(s, doc), "refused at character " + at + " of " + doc);
    }

    /** {@code doc} is refused at its last character. */
    static void refusedAtEnd(Schema s, String doc) {
        refusedAt(s, doc, doc.length() - 1);
    }
}
