package dev.spindle.chat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * System messages after the first turn, for templates that allow a system message only at the start
 * (Nanbeige's raises "System message must be at the beginning"). Agents send them anyway: Claude Code
 * an environment block after its first user turn, Codex its instructions and skills as developer items.
 * Such a conversation is rendered with every system message's text merged, in order and separated by a
 * blank line, into one system message at the front; the other turns keep their order.
 */
public final class SystemMessages {
    private SystemMessages() {
    }

    /** Whether a system message stands anywhere but first. */
    public static boolean anyAfterFirst(List<?> messages) {
        for (int i = 1; i < messages.size(); i++) {
            if (isSystem(messages.get(i))) {
                return true;
            }
        }
        return false;
    }

    /** The conversation with every system message merged into one at the front (the messages are maps, as the template reads them). */
    public static List<Object> mergedToFront(List<?> messages) {
        StringBuilder text = new StringBuilder();
        List<Object> rest = new ArrayList<>();
        for (Object m : messages) {
            if (isSystem(m)) {
                String t = textOf(((Map<?, ?>) m).get("content"));
                if (!t.isEmpty()) {
                    if (!text.isEmpty()) {
                        text.append("\n\n");
                    }
                    text.append(t);
                }
            } else {
                rest.add(m);
            }
        }
        Map<String, Object> system = new LinkedHashMap<>();
        system.put("role", "system");
        system.put("content", text.toString());
        List<Object> out = new ArrayList<>(rest.size() + 1);
        out.add(system);
        out.addAll(rest);
        return out;
    }

    private static boolean isSystem(Object m) {
        return m instanceof Map<?, ?> map && "system".equals(map.get("role"));
    }

    /** A message's text as the template sees it: a string, or its text parts joined. */
    public static String textOf(Object content) {
        if (content instanceof String s) {
            return s;
        }
        StringBuilder b = new StringBuilder();
        if (content instanceof List<?> parts) {
            for (Object part : parts) {
                if (part instanceof String s) {
                    b.append(s);
                } else if (part instanceof Map<?, ?> p && p.get("text") instanceof String t) {
                    b.append(t);
                }
            }
        }
        return b.toString();
    }
}
