package dev.spindle.model.gguf;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Every ggml block type Spindle reads decodes to gguf-py's values bit for bit (random blocks, every field's bits
 * exercised; src/test/resources/fixtures/ggml, made by scripts/make_ggml_vectors.py from llama.cpp's own package).
 */
class GgmlBlocksTest {
    static final Path DIR = Path.of("src/test/resources/fixtures/ggml");

    @ParameterizedTest
    @EnumSource(value = GgmlType.class, mode = EnumSource.Mode.EXCLUDE, names = {"F32", "F16", "BF16"})
    void blocksDecodeToGgufPysValues(GgmlType t) throws IOException {
        byte[] blocks = Files.readAllBytes(DIR.resolve(t.name() + ".blocks"));
        ByteBuffer want = ByteBuffer.wrap(Files.readAllBytes(DIR.resolve(t.name() + ".f32"))).order(ByteOrder.LITTLE_ENDIAN);
        int n = blocks.length / t.blockBytes * t.blockElements;
        assertEquals(n * 4, want.capacity(), t + ": values for every element");
        float[] got = new float[n];
        GgmlBlocks.decode(t, MemorySegment.ofArray(blocks), 0, n, got, 0);
        for (int i = 0; i < n; i++) {
            float w = want.getFloat(4 * i);
            if (Float.floatToRawIntBits(w) != Float.floatToRawIntBits(got[i])) {
                throw new AssertionError(String.format("%s: element %d (block %d, index %d) is %s, gguf-py's %s", t, i, i / t.blockElements,
                        i % t.blockElements, got[i], w));
            }
        }
    }
}
