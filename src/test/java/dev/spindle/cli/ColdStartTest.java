package dev.spindle.cli;

import dev.spindle.model.LoadFormat;
import dev.spindle.model.PageCache;
import dev.spindle.model.PageCacheAssumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** bench --cold-page-cache: the checkpoint measured on its disk, then dropped; refused where it cannot leave memory. */
class ColdStartTest {
    @TempDir
    Path dir;

    private static void shards(Path dir, int... sizes) throws IOException {
        StringBuilder map = new StringBuilder();
        for (int i = 0; i < sizes.length; i++) {
            String name = "model-0000" + (i + 1) + "-of-0000" + sizes.length + ".safetensors";
            byte[] data = new byte[sizes[i]];
            new Random(i).nextBytes(data);
            Files.write(dir.resolve(name), data);
            map.append(i == 0 ? "" : ",").append("\"t").append(i).append("\":\"").append(name).append('"');
        }
        Files.writeString(dir.resolve("model.safetensors.index.json"), "{\"weight_map\":{" + map + "}}");
    }

    @Test
    void aCheckpointOnADiskIsMeasuredThenDropped() throws IOException {
        PageCacheAssumptions.assumeDroppableFrom(dir);
        shards(dir, 3 << 20, (2 << 20) + 5);
        Files.readAllBytes(dir.resolve("model-00001-of-00002.safetensors")); // cached now
        ColdStart cold = ColdStart.prepare(dir, LoadFormat.SAFETENSORS);
        assertEquals(2, cold.files().size());
        assertEquals((5 << 20) + 5, cold.bytes());
        assertEquals(0, cold.leftBytes());
        for (Path f : cold.files()) {
            assertEquals(0, PageCache.residentBytes(f), f.toString());
        }
        Map<String, Object> report = cold.report(2.0, 2.5);
        double read = cold.bytes() / 2.0 / 1e9, onDevice = cold.bytes() / 2.5 / 1e9;
        assertEquals(Math.round(read / cold.diskGBs() * 1000) / 1000.0, report.get("load_read_of_disk"));
        assertEquals(Math.round(onDevice / cold.diskGBs() * 1000) / 1000.0, report.get("weights_on_device_of_disk"));
        assertTrue(!cold.report(2.0, 0).containsKey("weights_on_device_of_disk"), "no upload, no device figure");
    }

    @Test
    void aCheckpointKeptInMemoryIsRefused() throws IOException {
        assumeTrue(PageCache.unsupportedReason().isEmpty(), () -> PageCache.unsupportedReason().orElseThrow());
        Path shm = Path.of("/dev/shm");
        assumeTrue(Files.isDirectory(shm) && Files.isWritable(shm) && Files.getFileStore(shm).type().equals("tmpfs"), "no writable tmpfs at /dev/shm");
        Path ckpt = Files.createTempDirectory(shm, "spindle-cold-start-test");
        try {
            shards(ckpt, 1 << 20);
            RuntimeException e = assertThrows(RuntimeException.class, () -> ColdStart.prepare(ckpt, LoadFormat.SAFETENSORS));
            assertTrue(e.getMessage().contains("tmpfs"), e.getMessage());
        } finally {
            try (var files = Files.list(ckpt)) {
                for (Path f : files.toList()) {
                    Files.delete(f);
                }
            }
            Files.delete(ckpt);
        }
    }

    @Test
    void dummyWeightsHaveNoDiskToReadFrom() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ColdStart.prepare(dir, LoadFormat.DUMMY));
        assertTrue(e.getMessage().contains("--load-format safetensors"), e.getMessage());
    }
}
