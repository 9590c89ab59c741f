package dev.spindle.grammar;

import org.junit.jupiter.api.Test;

import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Lark grammars without recursion read as one regular expression of the same language: a patch-style
 * grammar (rules, literals with escapes, regex terminals, repetition, optional parts, aliases, an imported
 * common terminal) accepts exactly its sentences; what cannot be enforced is refused by name.
 */
class LarkGrammarTest {
    /** A patch language of our own: files added, deleted or updated between begin and end lines. */
    static final String PATCH = """
            // a small patch language
            start: begin_patch hunk+ end_patch
            begin_patch: "*** Begin Patch" LF
            end_patch: "*** End Patch" LF?
            ?hunk: add_hunk | delete_hunk
                 | update_hunk
            add_hunk: "*** Add File: " filename LF add_line+
            delete_hunk: "*** Delete File: " filename LF
            update_hunk: "*** Update File: " filename LF change+
            filename: /(.+)/
            add_line: "+" /(.*)/ LF -> line
            change: ("@@" | "@@ " /(.+)/) LF (("+" | "-" | " ") /(.*)/ LF)+
            %import common.LF
            """;

    static boolean accepts(String grammar, String text) {
        return Pattern.compile(LarkGrammar.toRegex(grammar)).matcher(text).matches();
    }

    @Test
    void aPatchGrammarAcceptsExactlyItsSentences() {
        assertTrue(accepts(PATCH, "*** Begin Patch\n*** Add File: a.txt\n+hello\n+\n*** End Patch\n"));
        assertTrue(accepts(PATCH, "*** Begin Patch\n*** Delete File: old.md\n*** Update File: x.py\n@@ def f():\n-    return 1\n+    return 2\n*** End Patch"));
        assertFalse(accepts(PATCH, "*** Begin Patch\n*** End Patch\n"), "at least one hunk");
        assertFalse(accepts(PATCH, "*** Begin Patch\n*** Add File: a.txt\nhello\n*** End Patch\n"), "an added line starts with +");
        assertFalse(accepts(PATCH, "*** Begin Patch\n*** Add File: \n+x\n*** End Patch\n"), "a file name is not empty");
        assertFalse(accepts(PATCH, "*** Begin Patch\n*** Add File: a\nb.txt\n+x\n*** End Patch\n"), ". does not match a newline");
        assertFalse(accepts(PATCH, "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n\n"));
    }

    @Test
    void literalsRepetitionAndCommonTerminals() {
        String g = """
                start: greeting ("," WS_INLINE? NAME)~1..3 "!"?
                greeting: "hello"i
                NAME: /[A-Z][a-z]+/
                %import common (WS_INLINE)
                """;
        assertTrue(accepts(g, "HeLLo,Ann"));
        assertTrue(accepts(g, "hello, Ann, Bob,  Cy!"));
        assertFalse(accepts(g, "hello"), "at least one name");
        assertFalse(accepts(g, "hello,A,B,C,D"), "at most three");
        assertTrue(accepts("start: \"a.b\\n\" [\"(x)\"]\n", "a.b\n(x)"), "regex characters in literals are literal");
        assertFalse(accepts("start: \"a.b\"\n", "axb"));
        assertTrue(accepts("start: INT (\".\" INT)?\n%import common.INT\n", "12.5"));
    }

    @Test
    void whatCannotBeEnforcedIsRefusedByName() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LarkGrammar.toRegex("start: a\na: \"x\" a | \"y\"\n"))
                .getMessage().contains("recursive"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LarkGrammar.toRegex("start: \"x\"\n%ignore \" \"\n"))
                .getMessage().contains("%ignore"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LarkGrammar.toRegex("start: \"x\"\n%import other.X\n"))
                .getMessage().contains("common"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LarkGrammar.toRegex("start: missing\n"))
                .getMessage().contains("'missing' is used but never defined"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LarkGrammar.toRegex("rule: \"x\"\n"))
                .getMessage().contains("no 'start' rule"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> LarkGrammar.toRegex("start: /x/i\n"))
                .getMessage().contains("flags"));
        assertTrue(accepts("start: LF\n%import common.LF\n", "\n"));
    }
}
