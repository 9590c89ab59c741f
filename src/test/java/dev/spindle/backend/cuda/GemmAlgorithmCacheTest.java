package dev.spindle.backend.cuda;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The pinned-GEMM-algorithm cache file: what is stored comes back, and a bad file is reported and ignored. */
class GemmAlgorithmCacheTest {
    @TempDir
    Path dir;

    static byte[] algo(int seed) {
        byte[] b = new byte[GemmAlgorithmCache.ALGO_BYTES];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (seed * 31 + i * 7);
        }
        return b;
    }

    @Test
    void storedAlgorithmsComeBackForTheSameDeviceAndLibraryOnly() {
        GemmAlgorithmCache c = GemmAlgorithmCache.open(dir, "NVIDIA H200", 9, 0, 130100);
        c.put(7168, 9216, List.of(algo(1), algo(2)));
        c.put(7168, 44032, List.of(algo(3)));
        assertTrue(c.problems().isEmpty(), c.problems().toString());

        GemmAlgorithmCache again = GemmAlgorithmCache.open(dir, "NVIDIA H200", 9, 0, 130100);
        List<byte[]> got = again.get(7168, 9216).orElseThrow();
        assertEquals(2, got.size());
        assertArrayEquals(algo(1), got.get(0));
        assertArrayEquals(algo(2), got.get(1));
        assertArrayEquals(algo(3), again.get(7168, 44032).orElseThrow().getFirst());
        assertFalse(again.get(9216, 7168).isPresent(), "shapes are keyed by K and N in order");

        assertFalse(GemmAlgorithmCache.open(dir, "NVIDIA H200", 9, 0, 130200).get(7168, 9216).isPresent(), "another cuBLASLt");
        assertFalse(GemmAlgorithmCache.open(dir, "NVIDIA H100 80GB HBM3", 9, 0, 130100).get(7168, 9216).isPresent(), "another GPU");
        again.forget(7168, 9216);
        assertFalse(again.get(7168, 9216).isPresent());
    }

    @Test
    void noneOrBlankMeansNoCache() {
        assertEquals(null, GemmAlgorithmCache.folder("none"));
        assertEquals(null, GemmAlgorithmCache.folder(" "));
        assertEquals(null, GemmAlgorithmCache.folder(null));
        assertEquals(Path.of("/var/cache/spindle"), GemmAlgorithmCache.folder("/var/cache/spindle"));
    }

    @Test
    void fileNameKeepsOnlySafeCharacters() {
        String name = GemmAlgorithmCache.fileName("NVIDIA GeForce RTX 5090 / (x)", 12, 0, 130001);
        assertTrue(name.matches("[A-Za-z0-9._-]+"), name);
        assertTrue(name.contains("sm120") && name.contains("lt130001"), name);
    }

    @Test
    void badLinesAreReportedWithFileAndLineAndIgnored() throws Exception {
        GemmAlgorithmCache c = GemmAlgorithmCache.open(dir, "GPU", 9, 0, 1);
        c.put(16, 32, List.of(algo(5)));
        Path f = c.file();
        String good = Files.readString(f);
        Files.writeString(f, good + "16 64\n" + "x 64 00\n" + "16 96 abcd\n");
        GemmAlgorithmCache read = GemmAlgorithmCache.open(dir, "GPU", 9, 0, 1);
        assertArrayEquals(algo(5), read.get(16, 32).orElseThrow().getFirst(), "the good line still counts");
        List<String> problems = read.problems();
        assertEquals(3, problems.size(), problems.toString());
        assertTrue(problems.get(0).contains(f.toString()) && problems.get(0).contains("line 3") && problems.get(0).contains("expected K N"),
                problems.get(0));
        assertTrue(problems.get(1).contains("line 4"), problems.get(1));
        assertTrue(problems.get(2).contains("line 5") && problems.get(2).contains("hex digits, expected 128"), problems.get(2));
    }

    @Test
    void anUnwritableFolderIsReportedNotThrown() throws Exception {
        Path notADir = dir.resolve("file");
        Files.writeString(notADir, "x");
        GemmAlgorithmCache c = GemmAlgorithmCache.open(notADir.resolve("sub"), "GPU", 9, 0, 1);
        c.put(16, 32, List.of(algo(1)));
        assertEquals(1, c.problems().size());
        assertTrue(c.problems().getFirst().contains("cannot write"), c.problems().getFirst());
        assertTrue(c.get(16, 32).isPresent(), "kept in memory for this run");
    }
}
