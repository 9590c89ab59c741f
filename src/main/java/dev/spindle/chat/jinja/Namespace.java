package dev.spindle.chat.jinja;

import java.util.LinkedHashMap;
import java.util.Map;

/** {@code namespace(...)}: the one object a template may assign attributes on across scopes. */
final class Namespace {
    final Map<String, Object> attrs = new LinkedHashMap<>();
}
