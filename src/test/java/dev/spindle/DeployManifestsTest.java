package dev.spindle;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * deploy/*.yaml against the Kubernetes, Prometheus-operator and Gateway API schemas
 * (deploy/validate, npm packages that .ci/run installs); skipped with the reason where
 * node or the packages are missing.
 */
class DeployManifestsTest {
    @Test
    void manifestsMatchTheirSchemas() throws Exception {
        Path dir = Path.of("deploy/validate");
        assumeTrue(Files.isDirectory(dir.resolve("node_modules/kubernetes-models")),
                "schema packages not installed: run `npm ci --prefix deploy/validate` (.ci/run does)");
        Process p;
        try {
            p = new ProcessBuilder("node", "validate.mjs", "..").directory(dir.toFile()).redirectErrorStream(true).start();
        } catch (java.io.IOException e) {
            assumeTrue(false, "node is not on the PATH: " + e.getMessage());
            return;
        }
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        System.out.println("[deploy] " + out);
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("\"checked\":6"), out);
    }
}
