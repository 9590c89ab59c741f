package dev.spindle.backend.cuda;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The cuBLASLt algorithms {@link CublasLt} pinned per weight shape, kept in a file so that a restart
 * on the same GPU and cuBLASLt skips the search (about 15 s for the 33B model) and, as important,
 * pins the same algorithms again: a request gives the same bits before and after a restart.
 * <p>
 * One text file per device and library ({@link #fileName}); a line per shape:
 * {@code K N HEX HEX ...}, one 64-byte {@code cublasLtMatmulAlgo_t} in hex per row bucket. The file
 * is a cache: one that cannot be read or parsed is reported (which file, which line, what was
 * expected) and ignored, and the algorithms are searched for again; one that cannot be written is
 * reported and the server goes on without it. {@link CublasLt} checks every cached algorithm with
 * cuBLASLt and on the device before using it.
 */
public final class GemmAlgorithmCache {
    /** Bytes of one cublasLtMatmulAlgo_t. */
    static final int ALGO_BYTES = 64;

    private final Path file;
    private final Map<Long, List<byte[]>> shapes = new LinkedHashMap<>();
    private final List<String> problems = new ArrayList<>();

    private GemmAlgorithmCache(Path file) {
        this.file = file;
    }

    /** The folder a setting names ({@code spindle.gemm-cache}, {@code --gemm-cache}), or null for {@code none} or blank. */
    public static Path folder(String setting) {
        return setting == null || setting.isBlank() || setting.strip().equals("none") ? null : Path.of(setting.strip());
    }

    /** The file name for a device and library: only letters, digits, '-', '_' and '.'. */
    static String fileName(String device, int computeMajor, int computeMinor, long cublasLtVersion) {
        String d = device.replaceAll("[^A-Za-z0-9._-]+", "_");
        return "cublaslt-" + d + "-sm" + computeMajor + computeMinor + "-lt" + cublasLtVersion + ".txt";
    }

    /**
     * The cache in {@code dir} for this device and library, read if the file exists (problems are
     * kept in {@link #problems()}, the file's unreadable part ignored).
     */
    public static GemmAlgorithmCache open(Path dir, String device, int computeMajor, int computeMinor, long cublasLtVersion) {
        GemmAlgorithmCache c = new GemmAlgorithmCache(dir.resolve(fileName(device, computeMajor, computeMinor, cublasLtVersion)));
        if (Files.isRegularFile(c.file)) {
            try {
                c.parse(Files.readAllLines(c.file, StandardCharsets.UTF_8));
            } catch (IOException | java.io.UncheckedIOException e) {
                c.problems.add("cannot read " + c.file + ": " + e.getMessage());
                c.shapes.clear();
            }
        }
        return c;
    }

    private void parse(List<String> lines) {
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i).strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] f = line.split("\\s+");
            try {
                if (f.length < 3) {
                    throw new IllegalArgumentException("expected K N and at least one algorithm, found " + f.length + " fields");
                }
                int k = Integer.parseInt(f[0]), n = Integer.parseInt(f[1]);
                if (k <= 0 || n <= 0) {
                    throw new IllegalArgumentException("K and N must be positive, found " + k + " " + n);
                }
                List<byte[]> algos = new ArrayList<>();
                for (int j = 2; j < f.length; j++) {
                    if (f[j].length() != 2 * ALGO_BYTES) {
                        throw new IllegalArgumentException("algorithm " + (j - 1) + " has " + f[j].length() + " hex digits, expected " + 2 * ALGO_BYTES);
                    }
                    algos.add(HexFormat.of().parseHex(f[j]));
                }
                shapes.put(key(k, n), algos);
            } catch (IllegalArgumentException e) {
                problems.add(file + " line " + (i + 1) + ": " + e.getMessage() + "; the line is ignored");
            }
        }
    }

    private static long key(int k, int n) {
        return ((long) k << 32) | n;
    }

    /** The algorithms stored for a k x nOut weight (one per row bucket), if any. */
    public Optional<List<byte[]>> get(int k, int nOut) {
        return Optional.ofNullable(shapes.get(key(k, nOut)));
    }

    /** Drops a shape whose stored algorithms did not pass the checks (stale or foreign). */
    public void forget(int k, int nOut) {
        shapes.remove(key(k, nOut));
    }

    /** Stores a shape's algorithms and rewrites the file (written aside, then moved in place). */
    public void put(int k, int nOut, List<byte[]> algos) {
        shapes.put(key(k, nOut), List.copyOf(algos));
        StringBuilder sb = new StringBuilder("# cuBLASLt algorithms pinned by Spindle per weight shape (K N, then one per row bucket);"
                + " a cache: delete it to search again\n");
        shapes.forEach((key, list) -> {
            sb.append(key >>> 32).append(' ').append(key & 0xFFFFFFFFL);
            for (byte[] a : list) {
                sb.append(' ').append(HexFormat.of().formatHex(a));
            }
            sb.append('\n');
        });
        try {
            Files.createDirectories(file.getParent());
            Path tmp = Files.createTempFile(file.getParent(), file.getFileName().toString(), ".tmp");
            Files.writeString(tmp, sb, StandardCharsets.UTF_8);
            try {
                Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException e) {
            problems.add("cannot write " + file + ": " + e + "; going on without the cache");
        }
    }

    /** What went wrong reading or writing the file (each names the file), for the log. */
    public List<String> problems() {
        return List.copyOf(problems);
    }

    public Path file() {
        return file;
    }
}
