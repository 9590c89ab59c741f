package dev.spindle.model.gguf;

import dev.spindle.model.ModelLoadException;

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
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A GGUF file (version 2 or 3, little-endian), memory-mapped: its metadata (key to value: Long for the integer types,
 * Double for the float types, Boolean, String, or a List of them) and its tensor infos, every one checked against the file
 * (types Spindle reads, sizes of whole blocks, data inside the file, aligned, no overlaps). Anything else is refused with
 * the file, the key or tensor, and what was expected.
 */
public final class GgufFile implements AutoCloseable {
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final int MAGIC = 0x46554747; // "GGUF"
    /** Metadata keys, strings and arrays longer than this are refused (a corrupt length, not a real file). */
    private static final long MAX_COUNT = 1L << 28;

    /**
     * A tensor: {@code dims} as GGUF gives them, the innermost (a row's elements) first; its data at byte {@code offset} of
     * the file, {@code bytes} long.
     */
    public record TensorInfo(String name, long[] dims, GgmlType type, long offset, long bytes) {
        /** Elements in one row (dims[0]). */
        public long rowElements() {
            return dims[0];
        }

        /** Rows: the product of the outer dims. */
        public long rows() {
            long r = 1;
            for (int i = 1; i < dims.length; i++) {
                r *= dims[i];
            }
            return r;
        }
    }

    private final Path path;
    /** The arena the file owns (null: the caller's keeps the mapping). */
    private final Arena arena;
    private final MemorySegment file;
    private final int version;
    private final Map<String, Object> metadata;
    private final Map<String, TensorInfo> tensors;

    private GgufFile(Path path, Arena arena, MemorySegment file, int version, Map<String, Object> metadata, Map<String, TensorInfo> tensors) {
        this.path = path;
        this.arena = arena;
        this.file = file;
        this.version = version;
        this.metadata = metadata;
        this.tensors = tensors;
    }

    /** Maps and validates {@code path}; closing the file unmaps it. */
    public static GgufFile open(Path path) {
        return open(path, Arena.ofShared(), true);
    }

    /** Maps and validates {@code path} into {@code arena}, which keeps the mapping (closing the file leaves it to the arena). */
    public static GgufFile open(Path path, Arena arena) {
        return open(path, arena, false);
    }

    private static GgufFile open(Path path, Arena arena, boolean owns) {
        try {
            MemorySegment file;
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
                file = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
            }
            Cursor c = new Cursor(path, file);
            if (c.u32("the magic") != MAGIC) {
                throw new ModelLoadException(path + ": not a GGUF file (it does not begin with \"GGUF\")");
            }
            int version = c.u32("the version");
            if (version != 2 && version != 3) {
                throw new ModelLoadException(path + ": GGUF version " + version + "; Spindle reads versions 2 and 3");
            }
            long tensorCount = c.count("the tensor count"), kvCount = c.count("the metadata count");
            Map<String, Object> metadata = new LinkedHashMap<>();
            for (long i = 0; i < kvCount; i++) {
                String key = c.string("metadata key " + i);
                int type = c.u32("the type of " + key);
                if (metadata.put(key, c.value(type, key)) != null) {
                    throw new ModelLoadException(path + ": metadata key " + key + " appears twice");
                }
            }
            long alignment = metadata.get("general.alignment") instanceof Long a ? a : 32;
            if (alignment < 1 || Long.bitCount(alignment) != 1) {
                throw new ModelLoadException(path + ": general.alignment " + alignment + " is not a power of two");
            }
            List<Object[]> raw = new ArrayList<>();
            for (long i = 0; i < tensorCount; i++) {
                String name = c.string("tensor name " + i);
                int nDims = c.u32("the dims of " + name);
                if (nDims < 1 || nDims > 4) {
                    throw new ModelLoadException(path + ": tensor " + name + " has " + nDims + " dimensions (1 to 4 expected)");
                }
                long[] dims = new long[nDims];
                for (int d = 0; d < nDims; d++) {
                    dims[d] = c.count("dimension " + d + " of " + name);
                }
                int typeId = c.u32("the type of " + name);
                long offset = c.u64("the offset of " + name);
                raw.add(new Object[]{name, dims, typeId, offset});
            }
            long data = (c.at + alignment - 1) / alignment * alignment;
            Map<String, TensorInfo> tensors = new LinkedHashMap<>();
            long end = data;
            List<TensorInfo> byOffset = new ArrayList<>();
            for (Object[] r : raw) {
                String name = (String) r[0];
                long[] dims = (long[]) r[1];
                int typeId = (Integer) r[2];
                long offset = (Long) r[3];
                GgmlType type = GgmlType.of(typeId).orElseThrow(() -> new ModelLoadException(path + ": tensor " + name + " has ggml type " + typeId
                        + ", which Spindle does not read (it reads " + java.util.Arrays.toString(GgmlType.values()) + ")"));
                long bytes;
                try {
                    long rows = 1;
                    for (int d = 1; d < dims.length; d++) {
                        rows = Math.multiplyExact(rows, dims[d]);
                    }
                    bytes = Math.multiplyExact(type.rowBytes(dims[0]), rows);
                } catch (IllegalArgumentException | ArithmeticException e) {
                    throw new ModelLoadException(path + ": tensor " + name + " " + java.util.Arrays.toString(dims) + " of " + type + ": " + e.getMessage());
                }
                if (offset % alignment != 0) {
                    throw new ModelLoadException(path + ": tensor " + name + " starts at data offset " + offset + ", not a multiple of the alignment " + alignment);
                }
                if (offset < 0 || data + offset + bytes > file.byteSize() || data + offset + bytes < 0) {
                    throw new ModelLoadException(path + ": tensor " + name + " (" + bytes + " bytes at data offset " + offset + ") lies past the end of the file ("
                            + file.byteSize() + " bytes)");
                }
                TensorInfo t = new TensorInfo(name, dims, type, data + offset, bytes);
                if (tensors.put(name, t) != null) {
                    throw new ModelLoadException(path + ": tensor " + name + " appears twice");
                }
                byOffset.add(t);
                end = Math.max(end, t.offset() + bytes);
            }
            byOffset.sort(java.util.Comparator.comparingLong(TensorInfo::offset));
            for (int i = 1; i < byOffset.size(); i++) {
                TensorInfo a = byOffset.get(i - 1), b = byOffset.get(i);
                if (a.offset() + a.bytes() > b.offset()) {
                    throw new ModelLoadException(path + ": tensors " + a.name() + " and " + b.name() + " overlap");
                }
            }
            return new GgufFile(path, owns ? arena : null, file, version, Collections.unmodifiableMap(metadata), Collections.unmodifiableMap(tensors));
        } catch (IOException e) {
            if (owns) {
                arena.close();
            }
            throw new ModelLoadException(path + ": cannot read: " + e.getMessage(), e);
        } catch (RuntimeException e) {
            if (owns) {
                arena.close();
            }
            throw e;
        }
    }

    /** Reads the header's fields in order, each bounds-checked, naming what it reads when the file ends. */
    private static final class Cursor {
        final Path path;
        final MemorySegment s;
        long at;

        Cursor(Path path, MemorySegment s) {
            this.path = path;
            this.s = s;
        }

        private void need(long bytes, String what) {
            if (at + bytes > s.byteSize()) {
                throw new ModelLoadException(path + ": the file ends inside its header (reading " + what + " at byte " + at + ")");
            }
        }

        int u32(String what) {
            need(4, what);
            int v = s.get(U32, at);
            at += 4;
            return v;
        }

        long u64(String what) {
            need(8, what);
            long v = s.get(U64, at);
            at += 8;
            return v;
        }

        long count(String what) {
            long v = u64(what);
            if (v < 0 || v > MAX_COUNT * 16) {
                throw new ModelLoadException(path + ": " + what + " is " + Long.toUnsignedString(v) + ", not a plausible count");
            }
            return v;
        }

        String string(String what) {
            long n = u64("the length of " + what);
            if (n < 0 || n > MAX_COUNT) {
                throw new ModelLoadException(path + ": " + what + " has length " + Long.toUnsignedString(n));
            }
            need(n, what);
            String v = new String(s.asSlice(at, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
            at += n;
            return v;
        }

        Object value(int type, String key) {
            return switch (type) {
                case 0 -> { need(1, key); yield (long) (s.get(ValueLayout.JAVA_BYTE, at++) & 0xFF); }
                case 1 -> { need(1, key); yield (long) s.get(ValueLayout.JAVA_BYTE, at++); }
                case 2 -> { need(2, key); long v = s.get(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), at) & 0xFFFF; at += 2; yield v; }
                case 3 -> { need(2, key); long v = s.get(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), at); at += 2; yield v; }
                case 4 -> Integer.toUnsignedLong(u32(key));
                case 5 -> (long) u32(key);
                case 6 -> (double) Float.intBitsToFloat(u32(key));
                case 7 -> {
                    need(1, key);
                    int b = s.get(ValueLayout.JAVA_BYTE, at++);
                    if (b != 0 && b != 1) {
                        throw new ModelLoadException(path + ": metadata " + key + " is a bool of value " + b);
                    }
                    yield b == 1;
                }
                case 8 -> string(key);
                case 9 -> {
                    int elem = u32("the element type of " + key);
                    long n = u64("the length of " + key);
                    if (n < 0 || n > MAX_COUNT) {
                        throw new ModelLoadException(path + ": metadata " + key + " is an array of " + Long.toUnsignedString(n) + " elements");
                    }
                    List<Object> list = new ArrayList<>((int) Math.min(n, 1 << 20));
                    for (long i = 0; i < n; i++) {
                        list.add(value(elem, key + "[" + i + "]"));
                    }
                    yield Collections.unmodifiableList(list);
                }
                case 10, 11 -> u64(key);
                case 12 -> Double.longBitsToDouble(u64(key));
                default -> throw new ModelLoadException(path + ": metadata " + key + " has value type " + type + " (0 to 12 expected)");
            };
        }
    }

    public Path path() {
        return path;
    }

    public int version() {
        return version;
    }

    public Map<String, Object> metadata() {
        return metadata;
    }

    public Map<String, TensorInfo> tensors() {
        return tensors;
    }

    /** The whole mapped file. */
    public MemorySegment data() {
        return file;
    }

    /** A tensor's bytes in the mapping. */
    public MemorySegment bytes(TensorInfo t) {
        return file.asSlice(t.offset(), t.bytes());
    }

    /** Metadata {@code key} as a string, if present. */
    public Optional<String> string(String key) {
        Object v = metadata.get(key);
        if (v == null) {
            return Optional.empty();
        }
        if (!(v instanceof String s)) {
            throw new ModelLoadException(path + ": metadata " + key + " is " + typeName(v) + ", a string was expected");
        }
        return Optional.of(s);
    }

    /** Metadata {@code key} as an integer, if present. */
    public Optional<Long> integer(String key) {
        Object v = metadata.get(key);
        if (v == null) {
            return Optional.empty();
        }
        if (!(v instanceof Long l)) {
            throw new ModelLoadException(path + ": metadata " + key + " is " + typeName(v) + ", an integer was expected");
        }
        return Optional.of(l);
    }

    /** Metadata {@code key} as a number (integer or float), if present. */
    public Optional<Double> number(String key) {
        Object v = metadata.get(key);
        if (v == null) {
            return Optional.empty();
        }
        if (v instanceof Long l) {
            return Optional.of((double) l);
        }
        if (!(v instanceof Double d)) {
            throw new ModelLoadException(path + ": metadata " + key + " is " + typeName(v) + ", a number was expected");
        }
        return Optional.of(d);
    }

    /** Metadata {@code key} as a list, if present. */
    public Optional<List<?>> list(String key) {
        Object v = metadata.get(key);
        if (v == null) {
            return Optional.empty();
        }
        if (!(v instanceof List<?> l)) {
            throw new ModelLoadException(path + ": metadata " + key + " is " + typeName(v) + ", an array was expected");
        }
        return Optional.of(l);
    }

    /** Metadata {@code key}, which must be present, as an integer. */
    public long requireInteger(String key) {
        return integer(key).orElseThrow(() -> new ModelLoadException(path + ": metadata " + key + " is missing"));
    }

    private static String typeName(Object v) {
        return switch (v) {
            case Long l -> "an integer";
            case Double d -> "a float";
            case Boolean b -> "a bool";
            case String s -> "a string";
            case List<?> l -> "an array";
            default -> v.getClass().getSimpleName();
        };
    }

    @Override
    public void close() {
        if (arena != null) {
            arena.close();
        }
    }
}
