package dev.spindle.wiring;

import dev.spindle.step.DraftHead;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** What Proposers wraps around a head passes every call through, batched ones included (a default would not batch). */
class ProposersTest {
    @Test
    void theClosingHeadForwardsEveryMethodOfADraftHead() throws Exception {
        Class<?> closing = Class.forName("dev.spindle.wiring.Proposers$ClosingHead");
        StringBuilder missing = new StringBuilder();
        for (Method m : DraftHead.class.getMethods()) {
            if (Modifier.isStatic(m.getModifiers())) {
                continue;
            }
            try {
                Method own = closing.getDeclaredMethod(m.getName(), m.getParameterTypes());
                assertTrue(own.getDeclaringClass() == closing);
            } catch (NoSuchMethodException e) {
                missing.append(' ').append(m.getName());
            }
        }
        assertTrue(missing.isEmpty(), "Proposers.ClosingHead leaves these to DraftHead's defaults instead of the head's own:" + missing);
    }

    /** A head directory that is not there is reported as missing, and a draft model's as the wrong kind of model. */
    @Test
    void aMissingOrWrongHeadDirectoryIsNamed(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) throws Exception {
        java.nio.file.Path none = tmp.resolve("no-such-head");
        RuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Proposers.draftHead(
                new dev.spindle.engine.speculative.SpeculativeConfig(dev.spindle.engine.speculative.SpeculativeConfig.Method.DFLASH, none, 4, 1, 4, 16), null, null, null));
        assertTrue(e.getMessage().contains("not found") && e.getMessage().contains("no-such-head"), e.getMessage());
        e = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Proposers.draftHead(
                new dev.spindle.engine.speculative.SpeculativeConfig(dev.spindle.engine.speculative.SpeculativeConfig.Method.DFLASH, java.nio.file.Path.of("models/spindle-chat-drafter"),
                        4, 1, 4, 16), null, null, null));
        assertTrue(e.getMessage().contains("needs a DFlash head"), e.getMessage());
    }
}
