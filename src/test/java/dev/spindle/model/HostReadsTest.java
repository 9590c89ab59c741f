package dev.spindle.model;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * When a bound checkpoint is read into memory: at the load (every page of its tensors resident after binding), or by
 * the upload (binding reads the header alone, so that a device backend's upload can overlap its reads with its copies).
 */
class HostReadsTest {
    @TempDir
    Path dir;

    @Test
    void atLoadReadsEveryTensorAndAtUploadLeavesThemOnTheDisk() throws IOException {
        PageCacheAssumptions.assumeDroppableFrom(dir);
        Random random = new Random(5);
        SafetensorsWriter w = new SafetensorsWriter();
        Map<String, long[]> expected = new LinkedHashMap<>();
        for (String name : new String[]{"a.weight", "b.weight"}) {
            // 32 MiB each: far more than the disk's read-ahead (8 MiB on this machine's), which may bring in a small file whole
            long[] shape = {4096, 4096};
            byte[] data = new byte[4096 * 4096 * 2];
            random.nextBytes(data);
            for (int i = 1; i < data.length; i += 2) {
                data[i] &= 0x3F; // small finite bf16 values: no NaN or infinity
            }
            w.put(name, "BF16", shape, data);
            expected.put(name, shape);
        }
        Path file = dir.resolve("model.safetensors");
        w.write(file);
        long size = Files.size(file);
        for (HostReads reads : HostReads.values()) {
            PageCache.evict(file);
            assertEquals(0, PageCache.residentBytes(file));
            try (Arena arena = Arena.ofShared()) {
                Map<String, Tensor> bound = WeightBinder.bindAll("test", expected, n -> false, Checkpoint.open(dir, arena), arena, LoadListener.NONE,
                        reads);
                long resident = PageCache.residentBytes(file);
                if (reads == HostReads.AT_LOAD) {
                    assertEquals(size, resident, "bound with AT_LOAD: every page read");
                } else {
                    // the header's pages and the kernel's read-ahead after them, not the 64 MiB of tensors
                    assertTrue(resident <= size / 4, "bound with AT_UPLOAD: " + resident + " of " + size + " bytes read");
                }
                assertEquals(2, bound.size());
                assertEquals(4096L * 4096 * 2, bound.get("b.weight").data().byteSize());
            }
        }
    }
}
