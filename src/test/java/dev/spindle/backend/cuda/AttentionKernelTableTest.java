package dev.spindle.backend.cuda;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The host's attention kernels against attention.cu (no GPU needed): every kernel the host loads is
 * instantiated there with the phase the host gives it, launched with the block its launch bounds
 * name, and the prefill kernels' shared memory lets two CTAs share an H100/H200 SM; the prefill
 * kernel the forward pass runs; and the KV block sizes the kernels' addressing allows.
 */
class AttentionKernelTableTest {
    @Test
    void hostKernelsMatchTheKernelFile() throws IOException {
        String source = Files.readString(Path.of("src/main/cuda/attention.cu"));
        Matcher m = Pattern.compile("ATTENTION\\(hd, (\\d), (\\w+), (true|false), (\\d)\\)").matcher(source);
        Map<String, int[]> declared = new HashMap<>();
        while (m.find()) {
            declared.put(m.group(2), new int[]{Integer.parseInt(m.group(1)), Integer.parseInt(m.group(4))});
        }
        assertEquals(CudaKernels.ATTENTION_KERNELS.size(), declared.size(), "attention.cu's ATTENTION(...) kernels: " + declared.keySet());
        for (int phase = 0; phase < CudaKernels.ATTENTION_KERNELS.size(); phase++) {
            String name = CudaKernels.ATTENTION_KERNELS.get(phase);
            int[] d = declared.get(name);
            assertTrue(d != null, "attention.cu has no kernel " + name);
            boolean prefill = CudaKernels.PREFILL_KERNELS.contains(phase);
            assertEquals(prefill ? 0 : phase, d[0], name + ": the kernel's phase");
            // __launch_bounds__(phase == 0 ? 128 * wg : 128): the block the host launches
            assertEquals(d[0] == 0 ? 128 * d[1] : 128, CudaKernels.attentionThreads(phase), name + ": threads a CTA");
            if (prefill) {
                // two CTAs an SM (228 KiB, 1 KiB reserved a block), with up to 9 KiB of static shared memory (p0w's exchange)
                int bytes = CudaKernels.attentionSharedBytes(128, phase);
                assertTrue(2 * (bytes + 9 * 1024 + 1024) <= 228 * 1024, name + " needs " + bytes + " bytes of dynamic shared memory");
            }
        }
    }

    /** Prefill runs half tiles: the kernel that loads on every GPU, including those with 99 KiB of shared memory a block (sm_86, sm_89). */
    @Test
    void prefillRunsHalfTilesWhichLoadEverywhere() {
        assertEquals(CudaKernels.PREFILL_HALF_TILES, CudaForwardPass.PREFILL_KERNEL);
        // the kernels left out there are exactly those over 99 KiB; the ones that must load are under it
        int smallGpu = 99 * 1024;
        for (int hd : new int[]{64, 128}) {
            assertTrue(CudaKernels.attentionSharedBytes(hd, CudaKernels.PREFILL_HALF_TILES) <= smallGpu, "half tiles, head dim " + hd);
            assertTrue(CudaKernels.attentionSharedBytes(hd, CudaKernels.DECODE_SCORES) + 2304 <= smallGpu, "decode scores, head dim " + hd);
            assertTrue(CudaKernels.attentionSharedBytes(hd, CudaKernels.DECODE_VALUES) + 2048 <= smallGpu, "decode values, head dim " + hd);
        }
        assertTrue(CudaKernels.attentionSharedBytes(128, CudaKernels.PREFILL) > smallGpu);
    }

    /** The kernels find a key's KV block by shift and mask: the options refuse other block sizes with a clear message. */
    @Test
    void kvBlockSizeIsAPowerOfTwo() {
        for (int bs : new int[]{1, 8, 16, 32, 256}) {
            assertEquals(bs, new CudaForwardPass.Options(bs, 512, 0.5, 0, true).blockSize());
        }
        for (int bs : new int[]{3, 12, 24, 100}) {
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> new CudaForwardPass.Options(bs, 512, 0.5, 0, true));
            assertTrue(e.getMessage().contains("power of two") && e.getMessage().contains("got " + bs), e.getMessage());
        }
    }
}
