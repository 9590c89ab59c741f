package dev.spindle.model;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Where a bound tensor's bytes lie in its file (Tensor.source), and the positional reads a device upload takes them with:
 * over two shards, each tensor's range and any part of it read by several threads equal its mapped bytes; a converted
 * tensor has no range; a read past the file's end says which file and where.
 */
class FileReadsTest {
    @TempDir
    Path dir;

    @Test
    void rangesReadTheMappedBytes() throws IOException, InterruptedException {
        Random random = new Random(11);
        Map<String, long[]> expected = new LinkedHashMap<>();
        String[][] shards = {{"a.weight", "b.weight"}, {"c.weight", "d.weight"}};
        Map<String, String> weightMap = new LinkedHashMap<>();
        for (int s = 0; s < shards.length; s++) {
            SafetensorsWriter w = new SafetensorsWriter();
            for (String name : shards[s]) {
                long[] shape = {37 + random.nextInt(90), 64};
                byte[] data = new byte[(int) (shape[0] * shape[1] * 2)];
                random.nextBytes(data);
                boolean f32 = name.equals("d.weight");
                if (f32) { // a converted tensor: no range in the file
                    data = new byte[(int) (shape[0] * shape[1] * 4)];
                    java.nio.ByteBuffer.wrap(data).order(java.nio.ByteOrder.LITTLE_ENDIAN).asFloatBuffer().put(new float[(int) (shape[0] * shape[1])]);
                }
                w.put(name, f32 ? "F32" : "BF16", shape, data);
                expected.put(name, shape);
                weightMap.put(name, "model-0000" + (s + 1) + ".safetensors");
            }
            w.write(dir.resolve("model-0000" + (s + 1) + ".safetensors"));
        }
        StringBuilder index = new StringBuilder("{\"weight_map\": {");
        weightMap.forEach((k, v) -> index.append('"').append(k).append("\": \"").append(v).append("\","));
        index.setLength(index.length() - 1);
        Files.writeString(dir.resolve(Checkpoint.INDEX), index.append("}}").toString());
        try (Arena arena = Arena.ofShared(); FileReads reads = new FileReads()) {
            Map<String, Tensor> bound = WeightBinder.bindAll("test", expected, n -> false, Checkpoint.open(dir, arena), arena, LoadListener.NONE,
                    HostReads.AT_UPLOAD);
            assertNull(bound.get("d.weight").source(), "converted from F32: read from memory, not the file");
            for (String name : new String[]{"a.weight", "b.weight", "c.weight"}) {
                Tensor t = bound.get(name);
                assertEquals(dir.resolve(weightMap.get(name)), t.source().file());
                byte[] mapped = t.data().toArray(ValueLayout.JAVA_BYTE);
                MemorySegment buf = arena.allocate(mapped.length);
                reads.read(t.source(), buf, mapped.length);
                assertArrayEquals(mapped, buf.toArray(ValueLayout.JAVA_BYTE), name);
                // parts of it, read by four threads at once over the shared channels
                Thread[] threads = new Thread[4];
                boolean[] equal = new boolean[4];
                for (int k = 0; k < 4; k++) {
                    int part = k;
                    threads[k] = Thread.ofPlatform().start(() -> {
                        long from = (long) mapped.length * part / 4, to = (long) mapped.length * (part + 1) / 4;
                        MemorySegment p = Arena.global().allocate(to - from);
                        reads.read(t.source().plus(from), p, to - from);
                        equal[part] = java.util.Arrays.equals(p.toArray(ValueLayout.JAVA_BYTE), java.util.Arrays.copyOfRange(mapped, (int) from, (int) to));
                    });
                }
                for (Thread th : threads) {
                    th.join();
                }
                for (boolean e : equal) {
                    assertTrue(e, name + ": a part read by a thread");
                }
            }
            Tensor c = bound.get("c.weight");
            long size = Files.size(c.source().file());
            MemorySegment buf = arena.allocate(64);
            ModelLoadException e = assertThrows(ModelLoadException.class, () -> reads.read(c.source().plus(size - c.source().offset() - 8), buf, 64));
            assertTrue(e.getMessage().contains(c.source().file().toString()) && e.getMessage().contains("ends at"), e.getMessage());
            // a shard replaced after it was mapped and checked (a new file moved over it): its bytes are not the ones checked
            Path shard = b(bound).file(), fresh = dir.resolve("fresh.tmp");
            Files.copy(shard, fresh);
            Files.move(fresh, shard, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            try (FileReads later = new FileReads()) {
                ModelLoadException replaced = assertThrows(ModelLoadException.class, () -> later.read(b(bound), buf, 8));
                assertTrue(replaced.getMessage().contains("replaced since it was mapped"), replaced.getMessage());
            }
        }
    }

    private static FileRange b(Map<String, Tensor> bound) {
        return bound.get("b.weight").source();
    }
}
