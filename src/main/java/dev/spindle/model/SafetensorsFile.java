package dev.spindle.model;

import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One safetensors file, memory-mapped through FFM and validated before use.
 *
 * <p>Layout: u64 little-endian header length N, N bytes of JSON
 * {@code {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}},
 * then the data section that the offsets index. Every entry is checked against the
 * file: known dtype, non-negative shape, offsets inside the data section, byte length
 * equal to elements x dtype size, and no two tensors overlapping.
 */
public final class SafetensorsFile {
    /** Headers above this are refused as corrupt (real ones are a few hundred KiB). */
    static final long MAX_HEADER_BYTES = 100L << 20;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path path;
    private final MemorySegment data;
    private final Map<String, TensorInfo> tensors;
    private final Map<String, String> metadata;

    private SafetensorsFile(Path path, MemorySegment data, Map<String, TensorInfo> tensors, Map<String, String> metadata) {
        this.path = path;
        this.data = data;
        this.tensors = tensors;
        this.metadata = metadata;
    }

    /** Maps and validates {@code path}; the mapping lives as long as {@code arena}. */
    public static SafetensorsFile open(Path path, Arena arena) {
        MemorySegment file;
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            file = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
        } catch (IOException e) {
            throw new ModelLoadException(path + ": cannot read safetensors file: " + e.getMessage(), e);
        }
        long size = file.byteSize();
        if (size < 8) {
            throw fail(path, "file is " + size + " bytes, too short for the 8-byte header length (truncated?)");
        }
        long headerLen = file.get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
        if (headerLen < 2 || headerLen > MAX_HEADER_BYTES || headerLen > size - 8) {
            throw fail(path, "header length " + Long.toUnsignedString(headerLen) + " does not fit a file of " + size
                    + " bytes (expected 2.." + Math.min(MAX_HEADER_BYTES, size - 8) + "; truncated or not a safetensors file?)");
        }
        byte[] header = file.asSlice(8, headerLen).toArray(ValueLayout.JAVA_BYTE);
        MemorySegment data = file.asSlice(8 + headerLen);
        Map<String, String> metadata = new LinkedHashMap<>();
        Map<String, TensorInfo> tensors = parseHeader(path, header, data.byteSize(), metadata);
        return new SafetensorsFile(path, data, tensors, metadata);
    }

    private static Map<String, TensorInfo> parseHeader(Path path, byte[] header, long dataSize, Map<String, String> metadata) {
        JsonNode root;
        try {
            root = JSON.readTree(new String(header, StandardCharsets.UTF_8).stripTrailing());
        } catch (JsonParseException e) {
            String why = e.getOriginalMessage().replaceAll("\\s*\\(start marker at .*", "");
            throw fail(path, "header is not well-formed JSON: " + why + " at header byte " + e.getLocation().getCharOffset());
        } catch (IOException e) {
            throw fail(path, "header cannot be read as JSON: " + e.getMessage());
        }
        if (!(root instanceof ObjectNode obj)) {
            throw fail(path, "header must be a JSON object of tensors, found " + (root == null ? "nothing" : root.getNodeType()));
        }
        Map<String, TensorInfo> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = obj.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            String name = e.getKey();
            JsonNode t = e.getValue();
            if (name.equals("__metadata__")) {
                t.fields().forEachRemaining(m -> metadata.put(m.getKey(), m.getValue().asText()));
                continue;
            }
            out.put(name, parseEntry(path, name, t, dataSize));
        }
        checkNoOverlap(path, out.values());
        return out;
    }

    private static TensorInfo parseEntry(Path path, String name, JsonNode t, long dataSize) {
        if (!t.isObject()) {
            throw fail(path, "tensor '" + name + "': entry must be an object with dtype, shape and data_offsets");
        }
        JsonNode dt = t.get("dtype");
        if (dt == null || !dt.isTextual()) {
            throw fail(path, "tensor '" + name + "': missing dtype");
        }
        DType dtype = DType.fromSafetensors(dt.asText()).orElseThrow(() -> fail(path, "tensor '" + name + "': dtype '"
                + dt.asText() + "' is not supported (expected BF16, F16 or F32)"));
        JsonNode sh = t.get("shape");
        if (sh == null || !sh.isArray()) {
            throw fail(path, "tensor '" + name + "': missing shape array");
        }
        long[] shape = new long[sh.size()];
        for (int i = 0; i < shape.length; i++) {
            JsonNode d = sh.get(i);
            // canConvertToLong: a number past a long would be read as its low 64 bits (2^64 as 0)
            if (!d.isIntegralNumber() || !d.canConvertToLong() || d.asLong() < 0) {
                throw fail(path, "tensor '" + name + "': shape " + sh + " must hold non-negative integers of at most 63 bits");
            }
            shape[i] = d.asLong();
        }
        JsonNode off = t.get("data_offsets");
        if (off == null || !off.isArray() || off.size() != 2 || !off.get(0).isIntegralNumber() || !off.get(1).isIntegralNumber()
                || !off.get(0).canConvertToLong() || !off.get(1).canConvertToLong()) {
            throw fail(path, "tensor '" + name + "': data_offsets must be [begin, end], integers of at most 63 bits");
        }
        long begin = off.get(0).asLong();
        long end = off.get(1).asLong();
        if (begin < 0 || end < begin || end > dataSize) {
            throw fail(path, "tensor '" + name + "': data_offsets [" + begin + ", " + end + "] lie outside the data section of "
                    + dataSize + " bytes (truncated file or corrupt header)");
        }
        TensorInfo info = new TensorInfo(name, dtype, shape, begin, end, path);
        long expected;
        try {
            expected = Math.multiplyExact(info.elements(), dtype.bytes);
        } catch (ArithmeticException e) {
            throw fail(path, "tensor '" + name + "': shape " + info.shapeString() + " is too large");
        }
        if (end - begin != expected) {
            throw fail(path, "tensor '" + name + "': " + dtype.safetensorsName + " " + info.shapeString() + " needs "
                    + expected + " bytes but data_offsets [" + begin + ", " + end + "] span " + (end - begin));
        }
        return info;
    }

    /** No two tensors of at least one byte share a byte (empty tensors occupy none, wherever their offsets point). */
    private static void checkNoOverlap(Path path, Iterable<TensorInfo> infos) {
        List<TensorInfo> sorted = new ArrayList<>();
        infos.forEach(t -> {
            if (t.end() > t.begin()) {
                sorted.add(t);
            }
        });
        sorted.sort(Comparator.comparingLong(TensorInfo::begin).thenComparingLong(TensorInfo::end));
        for (int i = 1; i < sorted.size(); i++) {
            TensorInfo a = sorted.get(i - 1);
            TensorInfo b = sorted.get(i);
            if (b.begin() < a.end()) {
                throw fail(path, "tensors '" + a.name() + "' [" + a.begin() + ", " + a.end() + ") and '" + b.name() + "' ["
                        + b.begin() + ", " + b.end() + ") overlap in the data section");
            }
        }
    }

    private static ModelLoadException fail(Path path, String what) {
        return new ModelLoadException(path + ": " + what);
    }

    public Path path() {
        return path;
    }

    public Map<String, TensorInfo> tensors() {
        return tensors;
    }

    public Map<String, String> metadata() {
        return metadata;
    }

    /** The raw bytes of {@code info} (a slice of the mapping, no copy). */
    public MemorySegment bytes(TensorInfo info) {
        return data.asSlice(info.begin(), info.end() - info.begin());
    }
}
