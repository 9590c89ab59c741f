package dev.spindle;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The packages form layers: each may use only the packages listed for it, all of them below it, so
 * the import graph has no loop and no arrow going back up. A reference counts whether it is an
 * import line or a fully qualified name inline in the code. The engine core imports the JDK and at
 * most Jackson: frameworks live in server/ (Quarkus) and cli/ (picocli) only.
 */
class ArchitectureTest {
    static final Path MAIN = Path.of("src/main/java/dev/spindle");

    /** Each top-level package and the packages it may use; the order is the layers', bottom first. */
    static final Map<String, Set<String>> MAY_USE = layers();

    private static Map<String, Set<String>> layers() {
        Map<String, Set<String>> m = new LinkedHashMap<>();
        m.put("model", Set.of());
        m.put("tokenizer", Set.of());
        m.put("grammar", Set.of());
        m.put("chat", Set.of("grammar", "model", "tokenizer"));
        m.put("sample", Set.of("grammar"));
        m.put("step", Set.of("model", "sample"));
        m.put("kv", Set.of("step"));
        m.put("backend", Set.of("model", "tokenizer", "sample", "step", "kv"));
        m.put("engine", Set.of("model", "tokenizer", "grammar", "chat", "sample", "step", "kv"));
        m.put("eval", Set.of("model", "tokenizer", "chat", "step", "kv"));
        m.put("wiring", Set.of("model", "tokenizer", "grammar", "chat", "sample", "step", "kv", "backend", "engine"));
        m.put("cli", Set.of("model", "tokenizer", "grammar", "chat", "sample", "step", "kv", "backend", "engine", "eval", "wiring"));
        m.put("server", Set.of("model", "tokenizer", "grammar", "chat", "sample", "step", "kv", "backend", "engine", "eval", "wiring", "cli"));
        return m;
    }

    /**
     * Inside backend: the CPU and CUDA backends share the backend root, never each other. Inside server: the chat
     * pipeline all three APIs share knows none of them.
     */
    static final Map<String, Set<String>> SUBPACKAGE_BANS = Map.of(
            "backend.cpu", Set.of("backend.cuda"),
            "backend.cuda", Set.of("backend.cpu"),
            "server.pipeline", Set.of("server.openai", "server.anthropic"));

    static final List<String> CORE = List.of("model", "tokenizer", "grammar", "chat", "sample", "step", "kv", "backend", "engine", "eval", "wiring");
    static final List<String> FRAMEWORKS = List.of("io.quarkus", "io.smallrye", "jakarta.", "io.micrometer", "io.vertx", "picocli");

    private static final Pattern REFERENCE = Pattern.compile("\\bdev\\.spindle\\.([a-z_]+(?:\\.[a-z_]+)*)\\.[A-Z]");

    @Test
    void everyPackageIsListed() throws IOException {
        List<String> unlisted = new ArrayList<>();
        try (Stream<Path> dirs = Files.list(MAIN)) {
            dirs.filter(Files::isDirectory).map(d -> d.getFileName().toString()).filter(p -> !MAY_USE.containsKey(p)).forEach(unlisted::add);
        }
        assertEquals(List.of(), unlisted, "packages without a layer in ArchitectureTest.MAY_USE");
    }

    @Test
    void packagesUseOnlyTheLayersBelowThem() throws IOException {
        List<String> violations = new ArrayList<>();
        for (Path f : javaFiles()) {
            String pkg = MAIN.relativize(f.getParent()).toString().replace('/', '.');
            String top = pkg.split("\\.")[0];
            Set<String> allowed = MAY_USE.getOrDefault(top, Set.of());
            Matcher m = REFERENCE.matcher(withoutComments(Files.readString(f)));
            while (m.find()) {
                String target = m.group(1);
                String targetTop = target.split("\\.")[0];
                boolean banned = SUBPACKAGE_BANS.getOrDefault(pkg, Set.of()).stream().anyMatch(b -> target.equals(b) || target.startsWith(b + "."));
                if (banned || !targetTop.equals(top) && !allowed.contains(targetTop)) {
                    violations.add(MAIN.relativize(f) + " uses dev.spindle." + target);
                }
            }
        }
        assertEquals(List.of(), violations.stream().distinct().toList());
    }

    @Test
    void coreImportsNoFramework() throws IOException {
        List<String> violations = new ArrayList<>();
        for (Path f : javaFiles()) {
            String top = MAIN.relativize(f).getName(0).toString();
            if (!CORE.contains(top)) {
                continue;
            }
            String code = withoutComments(Files.readString(f));
            for (String fw : FRAMEWORKS) {
                if (code.contains(fw)) {
                    violations.add(MAIN.relativize(f) + " uses " + fw);
                }
            }
        }
        assertEquals(List.of(), violations);
    }

    private static List<Path> javaFiles() throws IOException {
        try (Stream<Path> files = Files.walk(MAIN)) {
            return files.filter(p -> p.toString().endsWith(".java") && !p.getParent().equals(MAIN)).toList();
        }
    }

    /** The code without its comments, string and character literals (a Javadoc may name any class). */
    static String withoutComments(String src) {
        StringBuilder out = new StringBuilder(src.length());
        int i = 0;
        int n = src.length();
        while (i < n) {
            char c = src.charAt(i);
            if (src.startsWith("//", i)) {
                while (i < n && src.charAt(i) != '\n') {
                    i++;
                }
            } else if (src.startsWith("/*", i)) {
                int end = src.indexOf("*/", i + 2);
                i = end < 0 ? n : end + 2;
                out.append(' ');
            } else if (src.startsWith("\"\"\"", i)) {
                int end = src.indexOf("\"\"\"", i + 3);
                i = end < 0 ? n : end + 3;
                out.append("\"\"");
            } else if (c == '"' || c == '\'') {
                i++;
                while (i < n && src.charAt(i) != c) {
                    i += src.charAt(i) == '\\' ? 2 : 1;
                }
                i++;
                out.append("\"\"");
            } else {
                out.append(c);
                i++;
            }
        }
        return out.toString();
    }
}
