package dev.spindle.backend;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The draft heads' context bookkeeping: spans start where their first rows do, grow only at their end, truncate and release. */
class DraftContextsTest {
    static final class Ctx extends DraftContexts.Span {
    }

    @Test
    void spansGrowAtTheirEndTruncateAndRelease() {
        List<Ctx> released = new ArrayList<>();
        DraftContexts<Ctx> book = new DraftContexts<>(released::add);
        assertEquals(0, book.end(7));
        Ctx c = book.extendAt(7, 12, Ctx::new);
        assertEquals(12, c.start);
        c.rows += 5;
        assertEquals(17, book.end(7));
        assertEquals(12, book.start(7));
        IllegalArgumentException gap = assertThrows(IllegalArgumentException.class, () -> book.extendAt(7, 18, Ctx::new));
        assertTrue(gap.getMessage().contains("ends at 17"), gap.getMessage());
        book.truncate(7, 14);
        assertEquals(14, book.end(7));
        book.truncate(7, 3); // before the span: empty, and the next rows may start anywhere
        assertEquals(0, c.rows);
        assertEquals(40, book.extendAt(7, 40, Ctx::new).start);
        book.extendAt(8, 0, Ctx::new);
        book.release(7);
        assertEquals(List.of(c), released);
        assertEquals(0, book.end(7));
        book.clear();
        assertEquals(2, released.size());
    }
}
