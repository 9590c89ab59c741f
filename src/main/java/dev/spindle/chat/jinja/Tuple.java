package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.Collection;

/** A Python tuple: a list that prints as {@code (a, b)}; made by tuple literals, items() and dictsort. */
final class Tuple extends ArrayList<Object> {
    Tuple(Collection<?> items) {
        super(items);
    }
}
