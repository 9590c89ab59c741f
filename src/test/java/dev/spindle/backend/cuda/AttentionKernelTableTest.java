package dev.spindle.backend.cuda;

import dev.spindle.backend.KeySplits;
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
 * instantiated there with the kind the host gives it (decode or prefill), launched with the block its
 * launch bounds name; the prefill kernels' shared memory lets two CTAs share an H100/H200 SM; one prefill
 * kernel and the decode kernel fit the 99 KiB a block of sm_86/sm_89/sm_120; and the KV block sizes the
 * kernels' addressing allows.
 */
class AttentionKernelTableTest {
    @Test
    void hostKernelsMatchTheKernelFile() throws IOException {
        String source = Files.readString(Path.of("src/main/cuda/attention.cu"));
        Matcher m = Pattern.compile("ATTENTION\\(hd, (true|false), (\\w+), (\\d)\\)").matcher(source);
        Map<String, Object[]> declared = new HashMap<>();
        while (m.find()) {
            declared.put(m.group(2), new Object[]{Boolean.parseBoolean(m.group(1)), Integer.parseInt(m.group(3))});
        }
        // attention_wgmma.cu: one prefill kernel per head dim, WG_GROUPS warpgroups of 64 MMA rows (the host plans 64)
        String wgmma = Files.readString(Path.of("src/main/cuda/attention_wgmma.cu"));
        Matcher groups = Pattern.compile("#define WG_GROUPS (\\d+)").matcher(wgmma);
        assertTrue(groups.find() && wgmma.contains("__launch_bounds__(128 * WG_GROUPS) attention_hd##hd##_prefill_wgmma("), "attention_wgmma.cu declares prefill_wgmma");
        assertEquals(1, Integer.parseInt(groups.group(1)), "the host plans prefill tiles of 64 MMA rows");
        declared.put("prefill_wgmma", new Object[]{false, 1});
        Matcher built = Pattern.compile("(?m)^ATTENTION_WGMMA\\((\\d+)\\)").matcher(wgmma);
        java.util.List<Integer> dims = new java.util.ArrayList<>();
        while (built.find()) {
            dims.add(Integer.parseInt(built.group(1)));
        }
        for (int hd : new int[]{16, 32, 64, 128}) {
            assertEquals(dims.contains(hd), AttentionKernels.hasWgmmaPrefill(hd), "the host loads prefill_wgmma at head dim " + hd + " exactly where it is built");
        }
        // attention_ws.cu: the warp-specialised prefills, three warpgroups (a producer, two consumers of 64 MMA rows: the
        // host plans 128), built at prefill_wgmma's head dims, with the host's count of stages
        String ws = Files.readString(Path.of("src/main/cuda/attention_ws.cu"));
        assertTrue(ws.contains("__launch_bounds__(384, 1) attention_hd##hd##_##name("), "attention_ws.cu declares its kernels for 384 threads");
        assertEquals(AttentionKernels.WS_STAGES, define(ws, "WS_STAGES"), "attention_ws.cu's stages are the host's");
        Matcher wsBuilt = Pattern.compile("(?m)^ATTENTION_WS\\((\\d+), (\\w+), (true|false), (true|false)\\)").matcher(ws);
        while (wsBuilt.find()) {
            assertTrue(AttentionKernels.hasWgmmaPrefill(Integer.parseInt(wsBuilt.group(1))), wsBuilt.group(2) + " is built at head dim " + wsBuilt.group(1));
            declared.put(wsBuilt.group(2), new Object[]{false, 3});
            assertEquals(2 * AttentionKernels.ATTENTION_TILE, AttentionKernels.attentionTileRows(AttentionKernels.ATTENTION_KERNELS.indexOf(wsBuilt.group(2))),
                    wsBuilt.group(2) + ": the host plans two consumer warpgroups' rows a CTA");
        }
        Matcher pairsBuilt = Pattern.compile("(?m)^ATTENTION_WS_PAIRS\\((\\d+), (\\w+), (?:true|false)\\)").matcher(ws);
        while (pairsBuilt.find()) {
            assertTrue(AttentionKernels.hasWgmmaPrefill(Integer.parseInt(pairsBuilt.group(1))), pairsBuilt.group(2) + " is built at head dim " + pairsBuilt.group(1));
            assertTrue(ws.contains("__launch_bounds__(384, 1) attention_hd##hd##_##name(") && !declared.containsKey(pairsBuilt.group(2)), pairsBuilt.group(2));
            declared.put(pairsBuilt.group(2), new Object[]{false, 3});
        }
        assertEquals(AttentionKernels.ATTENTION_KERNELS.size(), declared.size(), "the ATTENTION(...) kernels: " + declared.keySet());
        for (int kind = 0; kind < AttentionKernels.ATTENTION_KERNELS.size(); kind++) {
            String name = AttentionKernels.ATTENTION_KERNELS.get(kind);
            Object[] d = declared.get(name);
            assertTrue(d != null, "attention.cu has no kernel " + name);
            boolean decode = (Boolean) d[0];
            assertEquals(kind == AttentionKernels.DECODE, decode, name + ": decode or prefill");
            assertEquals(!decode, AttentionKernels.PREFILL_KERNELS.contains(kind), name + ": listed as a prefill kernel");
            // __launch_bounds__(decode ? 128 : 128 * wg), (384, 1) for attention_ws.cu's: the block the host launches
            assertEquals(decode ? 128 : 128 * (Integer) d[1], AttentionKernels.attentionThreads(kind), name + ": threads a CTA");
            if (AttentionKernels.warpSpecialized(kind)) {
                // one CTA an SM: at most the 227 KiB of dynamic shared memory a block of an H100/H200 may have
                int bytes = AttentionKernels.attentionSharedBytes(128, kind);
                assertTrue(bytes <= 227 * 1024, name + " needs " + bytes + " bytes of dynamic shared memory");
            } else if (!decode) {
                // two CTAs an SM (228 KiB, 1 KiB reserved a block), with up to 12.5 KiB of static shared memory (prefill_warp_pairs's exchange)
                int bytes = AttentionKernels.attentionSharedBytes(128, kind);
                assertTrue(2 * (bytes + 12_800 + 1024) <= 228 * 1024, name + " needs " + bytes + " bytes of dynamic shared memory");
            }
        }
    }

    /** A decode CTA of the Nanbeige models (7 and 5 query heads a KV head) fits three to an SM of 228 KiB, folding or not. */
    @Test
    void threeDecodeCtasFitAnSm() {
        for (int group : new int[]{5, 7}) {
            int bytes = AttentionKernels.attentionSharedBytes(128, AttentionKernels.DECODE, group);
            assertTrue(3 * (bytes + 3328 + 1024) <= 228 * 1024, bytes + " bytes of dynamic shared memory at " + group + " heads a KV head");
        }
    }

    /** The split rule and tile size the host plans with (KeySplits) are the kernels' (and the CPU twin's: PagedAttentionTest). */
    @Test
    void splitRuleAndTileSizeAreTheKernelFilesOwn() throws IOException {
        String source = Files.readString(Path.of("src/main/cuda/attention.cuh"));
        assertEquals(64, define(source, "KT"));
        assertEquals(KeySplits.MIN, define(source, "SPLIT_MIN"));
        assertEquals(KeySplits.SHIFT, define(source, "SPLIT_SHIFT"));
        assertEquals(KeySplits.FLAT, 1 << define(source, "SPLIT_FLAT_LOG2"));
    }

    private static int define(String source, String name) {
        Matcher m = Pattern.compile("#define " + name + " (\\d+)").matcher(source);
        assertTrue(m.find(), "attention.cuh defines " + name);
        return Integer.parseInt(m.group(1));
    }

    /**
     * Without the wgmma kernel (GPUs other than sm_90a) prefill runs one warp per row group, which (with the decode
     * kernel) loads on GPUs with 99 KiB a block too.
     */
    @Test
    void prefillRunsAKernelThatLoadsEverywhere() {
        assertEquals(AttentionKernels.PREFILL, PrefillKernelChoice.FALLBACK);
        int smallGpu = 99 * 1024;
        for (int hd : new int[]{64, 128}) {
            assertTrue(AttentionKernels.attentionSharedBytes(hd, AttentionKernels.PREFILL) <= smallGpu, "one warp per row group, head dim " + hd);
            assertTrue(AttentionKernels.attentionSharedBytes(hd, AttentionKernels.DECODE) + 3328 <= smallGpu, "decode, head dim " + hd);
        }
        assertTrue(AttentionKernels.attentionSharedBytes(128, AttentionKernels.PREFILL_WARP_PAIRS) + 12_800 > smallGpu);
    }

    /** The kernels find a key's KV block by shift and mask: the options refuse other block sizes with a clear message. */
    @Test
    void kvBlockSizeIsAPowerOfTwo() {
        for (int bs : new int[]{1, 8, 16, 32, 256}) {
            assertEquals(bs, new CudaOptions(bs, 512, 0.5, 0, true).withKernels(RequiresGpu.KERNELS).blockSize());
        }
        for (int bs : new int[]{3, 12, 24, 100}) {
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> new CudaOptions(bs, 512, 0.5, 0, true).withKernels(RequiresGpu.KERNELS));
            assertTrue(e.getMessage().contains("power of two") && e.getMessage().contains("got " + bs), e.getMessage());
        }
    }
}
