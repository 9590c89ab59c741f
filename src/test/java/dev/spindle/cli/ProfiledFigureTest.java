package dev.spindle.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ProfiledFigureTest {
    private static final int[] PREFILL = {512, 8192}, CONTEXTS = {1024, 32768}, STREAMS = {32, 64};

    @Test
    void namesAFigureTheBenchMeasures() {
        ProfiledFigure f = ProfiledFigure.parse("aggregate:32", PREFILL, CONTEXTS, STREAMS);
        assertEquals(new ProfiledFigure(ProfiledFigure.Kind.AGGREGATE, 32), f);
        assertTrue(f.is(ProfiledFigure.Kind.AGGREGATE, 32));
        assertTrue(!f.is(ProfiledFigure.Kind.DECODE, 32) && !f.is(ProfiledFigure.Kind.AGGREGATE, 64));
        assertEquals(new ProfiledFigure(ProfiledFigure.Kind.PREFILL, 8192), ProfiledFigure.parse("prefill:8192", PREFILL, CONTEXTS, STREAMS));
        assertEquals(new ProfiledFigure(ProfiledFigure.Kind.DECODE, 32768), ProfiledFigure.parse("decode:32768", PREFILL, CONTEXTS, STREAMS));
    }

    @Test
    void refusesWhatTheBenchWouldNotMeasureWithAMessageThatSaysWhy() {
        String notMeasured = assertThrows(IllegalArgumentException.class, () -> ProfiledFigure.parse("decode:2048", PREFILL, CONTEXTS, STREAMS)).getMessage();
        assertTrue(notMeasured.contains("decode at [1024, 32768] only"), notMeasured);
        String kind = assertThrows(IllegalArgumentException.class, () -> ProfiledFigure.parse("ttft:1024", PREFILL, CONTEXTS, STREAMS)).getMessage();
        assertTrue(kind.contains("expected prefill:N, decode:CONTEXT or aggregate:STREAMS"), kind);
        String number = assertThrows(IllegalArgumentException.class, () -> ProfiledFigure.parse("prefill:8k", PREFILL, CONTEXTS, STREAMS)).getMessage();
        assertTrue(number.contains("a whole number"), number);
        assertThrows(IllegalArgumentException.class, () -> ProfiledFigure.parse("prefill", PREFILL, CONTEXTS, STREAMS));
    }
}
