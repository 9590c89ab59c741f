package dev.spindle.backend.cuda;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Without a GPU (CI): every kernel the CUDA backend looks up by a literal name (CudaKernels, Fp8Kernels) is defined, extern "C", in
 * src/main/cuda, so that a kernel lost in an edit fails here rather than at the first start on a GPU.
 */
class KernelNamesTest {
    @Test
    void everyLiteralKernelNameIsDefined() throws Exception {
        StringBuilder java = new StringBuilder(); // every kernel table: CudaKernels and its Fp8, Exl3, Expand and DraftHead kernels
        try (Stream<Path> files = Files.list(Path.of("src/main/java/dev/spindle/backend/cuda"))) {
            for (Path f : files.filter(p -> p.getFileName().toString().endsWith("Kernels.java")).sorted().toList()) {
                java.append(Files.readString(f));
            }
        }
        StringBuilder cuda = new StringBuilder();
        try (Stream<Path> files = Files.list(Path.of("src/main/cuda"))) {
            for (Path f : files.filter(p -> p.toString().endsWith(".cu")).toList()) {
                cuda.append(Files.readString(f));
            }
        }
        Matcher m = Pattern.compile("function\\(module, \"([a-z_0-9]+)\"\\)").matcher(java);
        List<String> names = new ArrayList<>(), missing = new ArrayList<>();
        while (m.find()) {
            names.add(m.group(1));
            if (!Pattern.compile("extern \"C\" __global__ void (__launch_bounds__\\([^)]*\\) )?" + m.group(1) + "\\(").matcher(cuda).find()) {
                missing.add(m.group(1));
            }
        }
        assertFalse(names.isEmpty(), "CudaKernels looks its kernels up by name");
        assertTrue(missing.isEmpty(), "kernels CudaKernels loads but src/main/cuda does not define: " + missing);
    }
}
