package dev.spindle.backend;

import dev.spindle.engine.spec.DraftHead;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** What Proposers wraps around a head passes every call through, batched ones included (a default would not batch). */
class ProposersTest {
    @Test
    void theClosingHeadForwardsEveryMethodOfADraftHead() throws Exception {
        Class<?> closing = Class.forName("dev.spindle.backend.Proposers$ClosingHead");
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
}
