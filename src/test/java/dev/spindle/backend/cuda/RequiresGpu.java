package dev.spindle.backend.cuda;

import dev.spindle.wiring.Backends;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a test class that needs the CUDA backend: tagged {@code gpu}, and every test is reported
 * as skipped, with the reason (no driver or GPU, no compiled kernels, no cuBLASLt), where it is missing.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Tag("gpu")
@ExtendWith(RequiresGpu.Condition.class)
public @interface RequiresGpu {
    /**
     * The kernels the GPU tests run: the full set, or with {@code -Dspindle.test.cuda-kernels=portable} on the test JVM
     * (scripts/device-run.sh tests-portable) only the portable ones, so the whole suite checks the path pre-Hopper GPUs run.
     * A property of the test run only: the server and the CLI take {@code --cuda-kernels}.
     */
    KernelSet KERNELS = KernelSet.parse(System.getProperty("spindle.test.cuda-kernels", "full"));

    /** For a marked class's {@code @BeforeAll}. */
    final class Kernels {
        private Kernels() {
        }

        /** The loaded kernels; skips the class, saying why, where they do not load. */
        public static CudaKernels load() {
            java.util.Optional<CudaKernels> kernels = CudaKernels.load(0, 0, KERNELS);
            org.junit.jupiter.api.Assumptions.assumeTrue(kernels.isPresent(), CudaKernels.unavailableReason(KERNELS));
            return kernels.get();
        }

        /**
         * Skips the class, saying why, where its fixtures folder is absent: present in every checkout, moved out only of a
         * device call by scripts/device-slim.sh (whose formats mode keeps the weight formats' fixtures).
         */
        public static void assumeFixtures(java.nio.file.Path dir) {
            org.junit.jupiter.api.Assumptions.assumeTrue(java.nio.file.Files.isDirectory(dir), dir + " was moved out of this device call"
                    + " (scripts/device-slim.sh: run these tests in its formats mode)");
        }

        /** cuBLASLt on the kernels' device; skips the test, saying why, where libcublasLt.so.13 is not on the loader path. */
        public static CublasLt cublasLt(CudaKernels k) {
            java.util.Optional<CublasLt> lt = CublasLt.open(k);
            org.junit.jupiter.api.Assumptions.assumeTrue(lt.isPresent(), "libcublasLt.so.13 is not on the loader path");
            return lt.get();
        }
    }

    final class Condition implements ExecutionCondition {
        @Override
        public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
            String why = Backends.cudaUnavailableReason();
            if (why != null) {
                return ConditionEvaluationResult.disabled("skipped: " + why);
            }
            return ConditionEvaluationResult.enabled("a CUDA device, the kernels and cuBLASLt are here");
        }
    }
}
