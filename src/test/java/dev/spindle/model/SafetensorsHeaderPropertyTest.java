package dev.spindle.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.Trials;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.random.RandomGenerator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A safetensors header, however malformed, is either accepted as the format defines it or refused with a
 * {@link ModelLoadException} naming the file: never another exception, never a misread value. Generated headers
 * (offsets that touch, overlap or hide an overlap behind an empty tensor, shapes and offsets past a long, wrong
 * byte lengths, entries of the wrong JSON type) are judged against a plain reading of the format (every pair of
 * tensors checked for overlap); and real files with random bytes overwritten never fail any other way.
 */
class SafetensorsHeaderPropertyTest {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final Path SOURCE = dev.spindle.Fixture.ROOT.resolve("llama-gqa/model.safetensors");

    /** A tensor entry as generated: its fields as JSON values, well-formed or not. */
    record Entry(String name, JsonNode value) {
    }

    /** A count (a dimension or an offset): mostly small, now and then negative, past a long or not an integer at all. */
    private static JsonNode count(RandomGenerator r) {
        return switch (Trials.frequency(r, 24, 4, 1, 1, 1)) {
            case 0 -> NODES.numberNode(Trials.between(r, 0L, 4L));
            case 1 -> NODES.numberNode(Trials.between(r, 5L, 40L));
            case 2 -> NODES.numberNode(Trials.between(r, -3L, -1L));
            // past a long: 2^64 + k would read as k if narrowed
            case 3 -> NODES.numberNode(BigInteger.ONE.shiftLeft(64).add(BigInteger.valueOf(Trials.between(r, 0L, 40L))));
            default -> Trials.oneOf(r, NODES.numberNode(2.5), NODES.textNode("4"), NODES.nullNode(), NODES.booleanNode(true));
        };
    }

    private static JsonNode shape(RandomGenerator r) {
        return Trials.frequency(r, 12, 1) == 0 ? array(Trials.listOf(r, 0, 3, SafetensorsHeaderPropertyTest::count))
                : Trials.oneOf(r, NODES.textNode("[2]"), NODES.nullNode(), NODES.objectNode());
    }

    private static JsonNode badOffsets(RandomGenerator r) {
        return switch (Trials.frequency(r, 4, 1, 1)) {
            case 0 -> array(Trials.listOf(r, 2, 2, SafetensorsHeaderPropertyTest::count));
            case 1 -> array(Trials.listOf(r, 0, 3, SafetensorsHeaderPropertyTest::count));
            default -> Trials.oneOf(r, NODES.textNode("0,4"), NODES.nullNode());
        };
    }

    private static JsonNode dtype(RandomGenerator r) {
        return Trials.frequency(r, 12, 1) == 0 ? NODES.textNode(Trials.oneOf(r, "BF16", "F16", "F32"))
                : Trials.oneOf(r, NODES.textNode("I8"), NODES.textNode("bf16"), NODES.numberNode(2), NODES.nullNode());
    }

    /**
     * Mostly offsets [begin, begin + the shape's bytes), so that ranges touch, overlap or run past the data section, empty
     * tensors among them; now and then a field left out, or offsets of any kind.
     */
    private static JsonNode entry(RandomGenerator r) {
        if (Trials.frequency(r, 20, 1) == 1) {
            return Trials.oneOf(r, NODES.textNode("tensor"), NODES.arrayNode(), NODES.numberNode(7));
        }
        JsonNode d = dtype(r), s = shape(r), bad = badOffsets(r);
        long begin = Trials.between(r, 0L, 24L);
        int mode = r.nextInt(20); // a selector: uniform, so that 14 in 20 get offsets matching their bytes
        ObjectNode t = NODES.objectNode();
        if (mode != 1) t.set("dtype", d);
        if (mode != 2) t.set("shape", s);
        if (mode == 3) return t;
        long bytes = -1;
        if (d.isTextual() && DType.fromSafetensors(d.asText()).isPresent() && s.isArray()) {
            bytes = DType.fromSafetensors(d.asText()).get().bytes;
            for (JsonNode n : s) {
                bytes = n.isIntegralNumber() && n.canConvertToLong() && n.longValue() >= 0 && bytes >= 0 ? bytes * n.longValue() : -1;
            }
        }
        t.set("data_offsets", mode < 6 || bytes < 0 ? bad : array(List.of(NODES.numberNode(begin), NODES.numberNode(begin + bytes))));
        return t;
    }

    /** Up to five entries named t0, t1, ..., and (19 times in 20) a __metadata__ entry, well-formed or not. */
    static List<Entry> header(RandomGenerator r) {
        List<Entry> out = new ArrayList<>();
        for (JsonNode e : Trials.listOf(r, 0, 5, SafetensorsHeaderPropertyTest::entry)) {
            out.add(new Entry("t" + out.size(), e));
        }
        if (r.nextInt(20) != 0) {
            out.add(new Entry("__metadata__", Trials.oneOf(r, NODES.objectNode().put("format", "pt"), NODES.objectNode().set("nested", NODES.objectNode()),
                    NODES.arrayNode(), NODES.textNode("pt"))));
        }
        return out;
    }

    /** Well-formed entries only (small shapes, empty ones among them, offsets matching their bytes): where ranges overlap. */
    static List<Entry> wellFormedHeader(RandomGenerator r) {
        List<Entry> out = new ArrayList<>();
        for (int n = Trials.between(r, 2, 6); out.size() < n; ) {
            String d = Trials.oneOf(r, "BF16", "F16", "F32");
            List<Long> dims = Trials.listOf(r, 0, 2, g -> Trials.between(g, 0L, 3L));
            long begin = Trials.between(r, 0L, 24L);
            long bytes = DType.fromSafetensors(d).orElseThrow().bytes;
            for (long dim : dims) {
                bytes *= dim;
            }
            ObjectNode t = NODES.objectNode().put("dtype", d);
            t.set("shape", array(dims.stream().map(dim -> (JsonNode) NODES.numberNode(dim)).toList()));
            t.set("data_offsets", array(List.of(NODES.numberNode(begin), NODES.numberNode(begin + bytes))));
            out.add(new Entry("t" + out.size(), t));
        }
        return out;
    }

    @Test
    void wellFormedEntriesAreRefusedExactlyWhereTwoOverlap() {
        Trials.forAll(2000, SafetensorsHeaderPropertyTest::wellFormedHeader, entries -> aGeneratedHeaderIsAcceptedExactlyWhenTheFormatAllowsIt(entries, 64));
    }

    private static ArrayNode array(List<JsonNode> items) {
        ArrayNode a = NODES.arrayNode();
        items.forEach(a::add);
        return a;
    }

    /** Entries, and the bytes of the data section after the header. */
    record Header(List<Entry> entries, int dataBytes) {
    }

    @Test
    void aGeneratedHeaderIsAcceptedExactlyWhenTheFormatAllowsIt() {
        Trials.forAll(2000, r -> new Header(header(r), Trials.between(r, 0, 64)),
                h -> aGeneratedHeaderIsAcceptedExactlyWhenTheFormatAllowsIt(h.entries(), h.dataBytes()));
    }

    static void aGeneratedHeaderIsAcceptedExactlyWhenTheFormatAllowsIt(List<Entry> entries, int dataBytes) {
        ObjectNode header = NODES.objectNode();
        entries.forEach(e -> header.set(e.name(), e.value()));
        Path file = write(header.toString().getBytes(StandardCharsets.UTF_8), dataBytes);
        String why = refusal(entries, dataBytes);
        try (Arena arena = Arena.ofConfined()) {
            SafetensorsFile f = SafetensorsFile.open(file, arena);
            if (why != null) {
                fail("accepted a header the format refuses (" + why + "): " + header);
            }
            assertEquals(entries.stream().filter(e -> !e.name().equals("__metadata__")).count(), f.tensors().size());
            for (Entry e : entries) {
                if (!e.name().equals("__metadata__")) {
                    TensorInfo t = f.tensors().get(e.name());
                    assertEquals(e.value().get("data_offsets").get(0).longValue(), t.begin(), e.name() + "'s begin");
                    assertEquals(e.value().get("data_offsets").get(1).longValue(), t.end(), e.name() + "'s end");
                }
            }
        } catch (ModelLoadException refused) {
            if (why == null) {
                fail("refused a header the format allows: " + refused.getMessage() + "\n" + header);
            }
            assertTrue(refused.getMessage().startsWith(file.toString()), "the refusal names the file: " + refused.getMessage());
        } finally {
            delete(file);
        }
    }

    /** Why the format refuses these entries over a data section of dataBytes, or null where it accepts them. */
    private static String refusal(List<Entry> entries, long dataBytes) {
        List<long[]> ranges = new ArrayList<>();
        for (Entry e : entries) {
            if (e.name().equals("__metadata__")) {
                continue;
            }
            JsonNode t = e.value();
            if (!t.isObject()) {
                return e.name() + " is not an object";
            }
            JsonNode dtype = t.get("dtype"), shape = t.get("shape"), off = t.get("data_offsets");
            if (dtype == null || !dtype.isTextual() || DType.fromSafetensors(dtype.asText()).isEmpty()) {
                return e.name() + ": dtype";
            }
            if (shape == null || !shape.isArray()) {
                return e.name() + ": shape";
            }
            BigInteger elements = BigInteger.ONE;
            for (JsonNode d : shape) {
                if (!d.isIntegralNumber() || d.bigIntegerValue().signum() < 0 || d.bigIntegerValue().bitLength() > 63) {
                    return e.name() + ": shape " + shape;
                }
                elements = elements.multiply(d.bigIntegerValue());
            }
            if (off == null || !off.isArray() || off.size() != 2) {
                return e.name() + ": data_offsets";
            }
            for (JsonNode o : off) {
                if (!o.isIntegralNumber() || o.bigIntegerValue().bitLength() > 63) {
                    return e.name() + ": data_offsets " + off;
                }
            }
            long begin = off.get(0).longValue(), end = off.get(1).longValue();
            if (begin < 0 || end < begin || end > dataBytes) {
                return e.name() + ": outside the data section";
            }
            BigInteger bytes = elements.multiply(BigInteger.valueOf(DType.fromSafetensors(dtype.asText()).orElseThrow().bytes));
            if (!bytes.equals(BigInteger.valueOf(end - begin))) {
                return e.name() + ": byte length";
            }
            if (end > begin) {
                ranges.add(new long[]{begin, end}); // an empty tensor occupies no byte, wherever its offsets point
            }
        }
        for (int i = 0; i < ranges.size(); i++) {
            for (int j = i + 1; j < ranges.size(); j++) {
                long[] a = ranges.get(i), b = ranges.get(j);
                if (a[0] < b[1] && b[0] < a[1]) {
                    return "overlap";
                }
            }
        }
        return null;
    }

    /** The seed of the overwritten bytes' places and values, and how many bytes are overwritten. */
    record Flips(long seed, int flips) {
    }

    @Test
    void aRealFileWithBytesOverwrittenIsReadOrRefusedWithItsName() {
        Trials.forAll(300, r -> new Flips(r.nextLong(), Trials.between(r, 1, 6)),
                f -> aRealFileWithBytesOverwrittenIsReadOrRefusedWithItsName(f.seed(), f.flips()));
    }

    static void aRealFileWithBytesOverwrittenIsReadOrRefusedWithItsName(long seed, int flips) throws IOException {
        byte[] bytes = Files.readAllBytes(SOURCE);
        Random r = new Random(seed);
        int headerEnd = (int) Math.min(bytes.length, 8 + ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).getLong(0));
        for (int i = 0; i < flips; i++) {
            // mostly in the length and the header, where a byte changes the reading
            int at = r.nextInt(4) == 0 ? r.nextInt(bytes.length) : r.nextInt(headerEnd);
            bytes[at] = (byte) r.nextInt(256);
        }
        Path file = Files.createTempFile("fuzzed", ".safetensors");
        try {
            Files.write(file, bytes);
            try (Arena arena = Arena.ofConfined()) {
                SafetensorsFile f = SafetensorsFile.open(file, arena);
                for (TensorInfo t : f.tensors().values()) {
                    assertTrue(t.begin() >= 0 && t.begin() <= t.end() && t.end() <= bytes.length - headerEnd, t.name() + " inside the data section");
                }
            } catch (ModelLoadException refused) {
                assertTrue(refused.getMessage().startsWith(file.toString()), "the refusal names the file: " + refused.getMessage());
            }
        } finally {
            delete(file);
        }
    }

    /** A file of the header (padded to 8 bytes) and dataBytes bytes of data. */
    private static Path write(byte[] header, int dataBytes) {
        try {
            int pad = (8 - header.length % 8) % 8;
            ByteBuffer b = ByteBuffer.allocate(8 + header.length + pad + dataBytes).order(ByteOrder.LITTLE_ENDIAN);
            b.putLong(header.length + pad).put(header);
            for (int i = 0; i < pad; i++) {
                b.put((byte) ' ');
            }
            Path file = Files.createTempFile("header", ".safetensors");
            Files.write(file, b.array());
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void delete(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
