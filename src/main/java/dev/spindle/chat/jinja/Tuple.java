package dev.spindle.chat.jinja;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;

/** A Python tuple: a list that prints as {@code (a, b)} and never equals a list; made by tuple literals, items() and dictsort. */
final class Tuple extends ArrayList<Object> {
    Tuple(Collection<?> items) {
        super(items);
    }

    static Tuple of(Object... items) {
        return new Tuple(Arrays.asList(items));
    }
}
