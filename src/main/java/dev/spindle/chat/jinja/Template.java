package dev.spindle.chat.jinja;

import java.util.List;
import java.util.Map;

/**
 * A Jinja2 template compiled once and rendered many times, with the semantics HF's
 * {@code apply_chat_template} environment gives: trim_blocks, lstrip_blocks, loop
 * controls, HF's tojson, raise_exception and strftime_now, Python string and dict
 * methods, no autoescaping, and an immutable sandbox (no mutation of lists or dicts,
 * no underscore attributes). Values passed in must be the JSON-like types Py uses.
 */
public final class Template {
    private final List<Node.Stmt> body;

    private Template(List<Node.Stmt> body) {
        this.body = body;
    }

    /** @throws TemplateException naming the line of a syntax error, or nesting too deep to parse */
    public static Template compile(String source) {
        try {
            return new Template(Parser.parse(source));
        } catch (StackOverflowError e) {
            throw new TemplateException("template nesting too deep to parse");
        }
    }

    /** @throws TemplateException (or {@link RaisedException} for the template's own raise_exception) */
    public String render(Map<String, Object> variables) {
        try {
            return new Interpreter(variables).render(body);
        } catch (StackOverflowError e) {
            throw new TemplateException("template recursion too deep");
        } catch (ClassCastException | IndexOutOfBoundsException | NumberFormatException e) {
            throw new TemplateException("template failed on this input: " + e.getMessage());
        }
    }
}
