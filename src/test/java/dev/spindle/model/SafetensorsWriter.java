package dev.spindle.model;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/** Writes safetensors files for tests, correct or deliberately broken. */
final class SafetensorsWriter {
    record Entry(String dtype, long[] shape, byte[] data) {
    }

    private final Map<String, Entry> entries = new LinkedHashMap<>();

    SafetensorsWriter put(String name, String dtype, long[] shape, byte[] data) {
        entries.put(name, new Entry(dtype, shape, data));
        return this;
    }

    Map<String, Entry> entries() {
        return entries;
    }

    /** The header as it would be written; tests may edit it before {@link #write(Path, ObjectNode)}. */
    ObjectNode header() {
        ObjectMapper m = new ObjectMapper();
        ObjectNode h = m.createObjectNode();
        long off = 0;
        for (Map.Entry<String, Entry> e : entries.entrySet()) {
            ObjectNode t = h.putObject(e.getKey());
            t.put("dtype", e.getValue().dtype());
            var shape = t.putArray("shape");
            for (long d : e.getValue().shape()) {
                shape.add(d);
            }
            t.putArray("data_offsets").add(off).add(off + e.getValue().data().length);
            off += e.getValue().data().length;
        }
        return h;
    }

    void write(Path file) {
        write(file, header());
    }

    void write(Path file, ObjectNode header) {
        writeRaw(file, header.toString().getBytes(StandardCharsets.UTF_8));
    }

    void writeRaw(Path file, byte[] headerJson) {
        try {
            int pad = (8 - headerJson.length % 8) % 8;
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            out.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(headerJson.length + pad).array());
            out.write(headerJson);
            out.write(" ".repeat(pad).getBytes(StandardCharsets.US_ASCII));
            for (Entry e : entries.values()) {
                out.write(e.data());
            }
            Files.write(file, out.toByteArray());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A copy of every tensor in {@code source} (bf16 as stored). */
    static SafetensorsWriter copyOf(Path source) {
        SafetensorsWriter w = new SafetensorsWriter();
        try (var arena = java.lang.foreign.Arena.ofConfined()) {
            SafetensorsFile f = SafetensorsFile.open(source, arena);
            for (TensorInfo t : f.tensors().values()) {
                w.put(t.name(), t.dtype().safetensorsName, t.shape(), f.bytes(t).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
            }
        }
        return w;
    }
}
