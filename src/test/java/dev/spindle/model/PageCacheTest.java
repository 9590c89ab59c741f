package dev.spindle.model;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The page cache of files on a disk (Linux): what is cached, dropping it, and direct reads that count every byte once. */
class PageCacheTest {
    @TempDir
    Path dir;

    @BeforeEach
    void onLinuxDisk() throws IOException {
        PageCacheAssumptions.assumeDroppableFrom(dir);
    }

    private Path file(String name, int bytes) throws IOException {
        byte[] data = new byte[bytes];
        new Random(bytes).nextBytes(data);
        return Files.write(dir.resolve(name), data);
    }

    @Test
    void aDroppedFileIsNoLongerCachedAndReadsBackWhole() throws IOException {
        Path f = file("a.bin", (5 << 20) + 123);
        byte[] before = Files.readAllBytes(f);
        assertEquals(Files.size(f), PageCache.residentBytes(f), "a file just written and read is cached, to its last byte");
        PageCache.evict(f);
        assertEquals(0, PageCache.residentBytes(f));
        assertTrue(java.util.Arrays.equals(before, Files.readAllBytes(f)), "dropping pages changes no byte");
        assertEquals(Files.size(f), PageCache.residentBytes(f));
    }

    @Test
    void directReadsCountEveryByteOnceAndLeaveTheCacheAlone() throws IOException {
        // chunks of 1 MiB read 256 KiB at a time: files that end inside a read, inside a chunk and on a chunk's end
        List<Path> files = List.of(file("a.bin", (3 << 20) + 4097), file("b.bin", 1 << 20), file("c.bin", 777), file("d.bin", 0));
        files.forEach(PageCache::evict);
        long total = 0;
        for (Path f : files) {
            total += Files.size(f);
        }
        for (int threads : new int[]{1, 3, 8}) {
            PageCache.DiskRead r = PageCache.directRead(files, threads, 1 << 20, 256 << 10);
            assertEquals(total, r.bytes(), threads + " threads");
            assertTrue(r.gbPerSecond() > 0 && Double.isFinite(r.gbPerSecond()));
        }
        for (Path f : files) {
            assertEquals(0, PageCache.residentBytes(f), f + ": direct reads bypass the page cache");
        }
    }

    @Test
    void aMissingFileIsNamed() {
        Path missing = dir.resolve("missing.safetensors");
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> PageCache.evict(missing));
        assertTrue(e.getMessage().startsWith(missing.toString()), e.getMessage());
        e = assertThrows(ModelLoadException.class, () -> PageCache.directRead(List.of(missing), 2));
        assertTrue(e.getMessage().startsWith(missing.toString()), e.getMessage());
    }
}
