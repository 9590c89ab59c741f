package dev.spindle.chat.jinja;

import dev.spindle.Trials;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;
import java.util.Map;
import java.util.random.RandomGenerator;

/**
 * A chat template's source, however broken, compiles or is refused with a TemplateException, and a compiled one
 * renders or is refused the same way: never another exception (a model directory's template is the operator's input,
 * and its refusal must name the problem). Sources are runs of Jinja fragments: statement and expression delimiters,
 * keywords, operators, literals, filters, tests and the template variables, in any order and nesting.
 */
class TemplateSourcePropertyTest {
    private static final List<String> FRAGMENTS = List.of(
            "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "\n", " ", "text", "'s'", "\"q\"", "1", "2.5", "-3", "0",
            "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">=", "=",
            "if", "elif", "else", "endif", "for", "in", "endfor", "set", "endset", "macro", "endmacro", "call", "filter", "not", "and",
            "or", "is", "none", "true", "false", "None", "True", "loop", "loop.index", "loop.previtem", "messages", "message", "tools",
            "x", "ns", "namespace(a=1)", "raise_exception('no')", "range(3)", "tojson", "trim", "length", "items", "string", "safe",
            "defined", "mapping", "iterable", "startswith('a')", "split('/')", "[::-1]", "[1:]", "get('a')", "break", "continue");

    static String source(RandomGenerator r) {
        return String.join(" ", Trials.listOf(r, 0, 40, g -> Trials.oneOf(g, FRAGMENTS)));
    }

    @Test
    void aSourceCompilesAndRendersOrIsRefused() {
        Trials.forAll(3000, TemplateSourcePropertyTest::source, TemplateSourcePropertyTest::aSourceCompilesAndRendersOrIsRefused);
    }

    static void aSourceCompilesAndRendersOrIsRefused(String source) {
        Template t;
        try {
            t = Template.compile(source);
        } catch (TemplateException refused) {
            return;
        }
        try {
            t.render(Map.of("messages", List.of(Map.of("role", "user", "content", "hi")), "x", 2, "tools", List.of()));
        } catch (TemplateException refused) {
            // refused with the template's own words or the interpreter's
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {10, 1_000, 20_000, 200_000})
    void deepNestingIsRefusedNotOverflowed(int depth) {
        String source = "{{ " + "(".repeat(depth) + "1" + ")".repeat(depth) + " }}" + "{% if x %}".repeat(depth / 10) + "{% endif %}".repeat(depth / 10);
        try {
            Template.compile(source).render(Map.of("x", 1));
        } catch (TemplateException refused) {
            // a refusal, not a StackOverflowError
        }
    }

    /** break and continue stand in a for loop's body only (not its else, not a macro defined inside it), as in Jinja2. */
    @Test
    void loopControlsOutsideALoopAreRefusedAtCompile() {
        for (String bad : List.of("{% break %}", "{% if x %}{% continue %}{% endif %}", "{% for i in [1] %}{% else %}{% break %}{% endfor %}",
                "{% for i in [1] %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}")) {
            TemplateException e = org.junit.jupiter.api.Assertions.assertThrows(TemplateException.class, () -> Template.compile(bad), bad);
            org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("outside a for loop") && e.getMessage().contains("line 1"), e.getMessage());
        }
        org.junit.jupiter.api.Assertions.assertEquals("0", Template.compile("{% for i in [0, 1] %}{% if i %}{% break %}{% endif %}{{ i }}{% endfor %}")
                .render(Map.of()));
    }
}
