package dev.spindle.chat.jinja;

import java.util.List;
import java.util.Map;

/** Something a template can call: a global, a bound method, a macro. */
@FunctionalInterface
interface PyCallable {
    Object call(List<Object> args, Map<String, Object> kwargs);
}
