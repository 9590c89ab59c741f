package dev.spindle.backend.cuda;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The host's table of linear_rows variants ({@link LinearRowsVariant#ALL}) against the kernels
 * linear_rows.cu defines (no GPU needed): the same variants in the same order, each within the
 * shared memory an H100/H200 block may have (227 KiB), so none is dropped there unnoticed; their fp8 twins too.
 */
class LinearRowsTableTest {
    @Test
    void hostTableMatchesTheKernelFile() throws IOException {
        String source = Files.readString(Path.of("src/main/cuda/linear_rows.cu"));
        // LINEAR_ROWS(nt, boxes, stages) (64 weight rows a CTA) and LINEAR_ROWS_RB(nt, boxes, stages, rows, _r<rows>)
        Matcher m = Pattern.compile("(?m)^LINEAR_ROWS(?:_RB)?\\((\\d+), (\\d+), (\\d+)(?:, (\\d+), _r(\\d+))?\\)$").matcher(source);
        List<LinearRowsVariant> declared = new ArrayList<>();
        while (m.find()) {
            int rows = m.group(4) == null ? 64 : Integer.parseInt(m.group(4));
            if (m.group(5) != null) {
                assertEquals(m.group(4), m.group(5), "the kernel name's suffix names its weight rows: " + m.group());
            }
            declared.add(new LinearRowsVariant(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3)), rows));
        }
        assertEquals(declared, LinearRowsVariant.ALL, "linear_rows.cu's LINEAR_ROWS(...) lines and LinearRowsVariant.ALL");
        // the paired twins: LINEAR_ROWS_PAIRED(1, boxes, stages) for every 64-row variant of one row tile, none other
        Matcher pm = Pattern.compile("(?m)^LINEAR_ROWS_PAIRED\\((\\d+), (\\d+), (\\d+)\\)$").matcher(source);
        List<LinearRowsVariant> paired = new ArrayList<>();
        while (pm.find()) {
            paired.add(new LinearRowsVariant(Integer.parseInt(pm.group(1)), Integer.parseInt(pm.group(2)), Integer.parseInt(pm.group(3))));
        }
        assertEquals(LinearRowsVariant.ALL.stream().filter(LinearRowsVariant::hasPairedTwin).toList(), paired,
                "linear_rows.cu's LINEAR_ROWS_PAIRED(...) lines and the variants CudaKernels loads a paired twin of");
        assertTrue(source.contains("void __launch_bounds__(128) linear_rows_paired_n##nt##_b##boxes##_s##stages("),
                "the paired twin's name is LinearRowsVariant.pairedKernel()'s");
        // every variant has its fp8 twin (LINEAR_ROWS_RB defines both), named as LinearRowsVariant.fp8Kernel() names it
        assertTrue(source.contains("void __launch_bounds__(128) linear_rows_fp8_n##nt##_b##boxes##_s##stages##suffix("),
                "the fp8 twin's name is LinearRowsVariant.fp8Kernel()'s");
        assertEquals("linear_rows_fp8_n1_b4_s8_r16", new LinearRowsVariant(1, 4, 8, 16).fp8Kernel());
        for (LinearRowsVariant v : LinearRowsVariant.ALL) {
            assertTrue(v.fp8SharedBytes() <= 232_448, v + "'s fp8 twin needs " + v.fp8SharedBytes() + " bytes of shared memory");
            assertTrue(v.sharedBytes() <= 232_448, v + " needs " + v.sharedBytes() + " bytes of shared memory, more than an H100/H200 block may have");
            assertTrue(List.of(1, 2, 4, 8).contains(v.tiles()), v + ": wgmma shapes exist for 8, 16, 32 and 64 rows");
            assertTrue(List.of(16, 32, 64).contains(v.weightRows()), v + ": 16, 32 or 64 weight rows a CTA (within the wgmma's 64, whole 8-row swizzle groups)");
        }
    }

    @Test
    void fp8MmaTableMatchesItsKernelFile() throws IOException {
        String source = Files.readString(Path.of("src/main/cuda/linear_rows_fp8_mma.cu"));
        Matcher m = Pattern.compile("(?m)^LINEAR_ROWS_FP8_MMA\\((\\d+), (\\d+), (\\d+)\\)$").matcher(source);
        List<LinearRowsVariant> declared = new ArrayList<>();
        while (m.find()) {
            declared.add(LinearRowsVariant.fp8Mma(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3))));
        }
        assertEquals(declared, LinearRowsVariant.FP8_MMA, "linear_rows_fp8_mma.cu's LINEAR_ROWS_FP8_MMA(...) lines and LinearRowsVariant.FP8_MMA");
        assertTrue(source.contains("void __launch_bounds__(32) linear_rows_fp8_mma_n##nt##_b##boxes##_s##stages("),
                "the kernel's name is LinearRowsVariant.fp8Kernel()'s, one warp a CTA");
        assertEquals("linear_rows_fp8_mma_n2_b2_s8", LinearRowsVariant.fp8Mma(2, 2, 8).fp8Kernel());
        for (LinearRowsVariant v : LinearRowsVariant.FP8_MMA) {
            assertEquals(32, v.threads());
            assertEquals(16, v.weightRows(), v + ": an m16 tile of weight rows a warp");
            assertTrue(List.of(1, 2, 4).contains(v.tiles()), v + ": 8, 16 or 32 rows of x");
            assertTrue(v.fp8SharedBytes() <= 232_448, v + " needs " + v.fp8SharedBytes() + " bytes of shared memory");
            assertThrows(IllegalStateException.class, v::kernel, "an mma variant has no bf16 kernel");
        }
    }
}
