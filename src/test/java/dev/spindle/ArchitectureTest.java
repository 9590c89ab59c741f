package dev.spindle;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The engine core (model, engine, backend, tokenizer, chat) imports the JDK and at most
 * Jackson: no framework, no CLI. Frameworks live in server/ and cli/ only.
 */
class ArchitectureTest {
    static final Path MAIN = Path.of("src/main/java/dev/spindle");
    static final List<String> CORE = List.of("model", "engine", "backend", "tokenizer", "chat");
    static final List<String> FORBIDDEN = List.of("io.quarkus", "io.smallrye", "jakarta.", "io.micrometer", "io.vertx",
            "picocli", "dev.spindle.server", "dev.spindle.cli");

    @Test
    void coreImportsNoFrameworkAndNoOuterLayer() throws IOException {
        List<String> violations = new ArrayList<>();
        for (String pkg : CORE) {
            Path dir = MAIN.resolve(pkg);
            if (!Files.isDirectory(dir)) {
                continue;
            }
            try (Stream<Path> files = Files.walk(dir)) {
                for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                    for (String line : Files.readAllLines(f)) {
                        String l = line.trim();
                        if (l.startsWith("import ") && FORBIDDEN.stream().anyMatch(l::contains)) {
                            violations.add(MAIN.relativize(f) + ": " + l);
                        }
                    }
                }
            }
        }
        assertEquals(List.of(), violations);
    }
}
