package dev.spindle.wiring;

import dev.spindle.backend.cpu.CpuDraftHead;
import dev.spindle.backend.cpu.CpuForwardPass;
import dev.spindle.backend.cuda.CudaDraftHead;
import dev.spindle.backend.cuda.CudaForwardPass;
import dev.spindle.engine.speculative.DFlashProposer;
import dev.spindle.engine.speculative.DraftModelProposer;
import dev.spindle.engine.speculative.NgramProposer;
import dev.spindle.engine.speculative.Speculation;
import dev.spindle.engine.speculative.SpeculativeConfig;
import dev.spindle.model.AffineQuantizer;
import dev.spindle.model.ConfigParser;
import dev.spindle.model.DraftHeadConfig;
import dev.spindle.model.DraftHeadLoader;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.LoadListener;
import dev.spindle.model.ModelConfig;
import dev.spindle.model.Tensor;
import dev.spindle.step.DraftHead;
import dev.spindle.step.KvCapacity;
import dev.spindle.tokenizer.VocabularyAgreement;

import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.Map;

/** Opens the configured proposer for a target that is already open: prompt lookup, or a draft model on the target's backend. */
public final class Proposers {
    private Proposers() {
    }

    /**
     * The target's settings, leaving device memory for the draft model when one is configured: its
     * weights, its buffers (logits of up to a step's rows, 1 GiB at most, and working space) and its KV
     * bytes for as many tokens as the target's pool will hold. Unchanged otherwise (and on the CPU,
     * where the KV size is given in tokens).
     */
    public static Backends.Settings targetSettings(SpeculativeConfig cfg, Backends.Settings s) {
        if (cfg.method() != SpeculativeConfig.Method.DRAFT) {
            return s;
        }
        ModelConfig dc = ConfigParser.read(cfg.draftModel().resolve("config.json"));
        long weights = 2 * dc.parameterCount();
        long kvPerToken = (long) dc.executedLayers() * 2 * dc.kvDim() * 2;
        long buffers = (2L << 30) + (long) s.maxStepRows() * (dc.hiddenSize() * 12L + dc.intermediateSize() * 6L);
        return s.withReserve(weights + buffers, kvPerToken);
    }

    /**
     * @param targetDir the target's model directory (its tokenizer.json is compared with the drafter's)
     * @param target    the opened target
     * @param settings  the target's backend settings; the drafter gets as many KV tokens as the target holds
     */
    public static Speculation open(SpeculativeConfig cfg, Path targetDir, Backends.Opened target, LoadFormat format, Backends.Settings settings,
                                   LoadListener listener) {
        return switch (cfg.method()) {
            case NONE -> Speculation.NONE;
            case NGRAM -> new Speculation(new NgramProposer(cfg.ngramMin(), cfg.ngramMax(), 0), cfg.numTokens(), cfg.maxBatch());
            case DRAFT -> new Speculation(draftModel(cfg, targetDir, target, format, settings, listener), cfg.numTokens(), cfg.maxBatch());
            case DFLASH -> new Speculation(new DFlashProposer(draftHead(cfg, target, settings, listener), cfg.sampledDrafts()), cfg.numTokens(), cfg.maxBatch());
        };
    }

    /**
     * A DFlash / DFlash2 head beside the target, sharing its embedding and output head, on the target's backend:
     * the CPU reference beside a CPU target, the CUDA head (its weights on the target's device) beside a CUDA one.
     */
    /** Columns a group shares one scale and bias in a head packed to affine-4 (MLX's default; 32 where 64 does not divide a row). */
    static final int AFFINE_GROUP = 64;

    static DraftHead draftHead(SpeculativeConfig cfg, Backends.Opened target, Backends.Settings settings, LoadListener listener) {
        Path dir = cfg.draftModel();
        // a directory without config.json is reported as such by read(), not as the wrong kind of model
        if (java.nio.file.Files.isRegularFile(dir.resolve("config.json")) && !DraftHeadConfig.isDraftHead(dir)) {
            throw new IllegalArgumentException(dir.resolve("config.json") + ": --speculative-method dflash needs a DFlash head (architectures "
                    + "DFlashDraftModel or DFlash2DraftModel); for a draft model use --speculative-method draft");
        }
        DraftHeadConfig hc = DraftHeadConfig.read(dir);
        if (cfg.blockSize() > 0) {
            hc = hc.withBlockSize(cfg.blockSize());
        }
        hc.checkTarget(target.config(), cfg.tapOffset());
        DraftHeadConfig head = hc;
        Arena arena = Arena.ofShared();
        try {
            Map<String, Tensor> weights = DraftHeadLoader.load(dir, head, arena, listener);
            boolean affine = cfg.headWeights() == SpeculativeConfig.HeadWeights.AFFINE4;
            if (target.pass() instanceof CudaForwardPass gpu) {
                if (affine) {
                    throw new IllegalArgumentException("--dflash-head-quantization affine4 runs on the CPU backend for now: the CUDA draft head has no"
                            + " affine kernels yet (use none, or --backend cpu)");
                }
                // the host copies (the selector's codebooks) live as long as the head
                return new CudaDraftHead(head, weights, gpu, head.tapLayers(cfg.tapOffset())).owning(arena);
            }
            CpuForwardPass cpu = (CpuForwardPass) target.pass();
            return new CpuDraftHead(head, weights, cpu.weights().embedding().data(), cpu.weights().lmHead(), target.config().vocabSize(),
                    head.tapLayers(cfg.tapOffset()), settings.threads(), arena,
                    m -> affine ? AffineQuantizer.quantize(m, 4, m.cols() % AFFINE_GROUP == 0 ? AFFINE_GROUP : AFFINE_GROUP / 2, arena) : m);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    private static DraftModelProposer draftModel(SpeculativeConfig cfg, Path targetDir, Backends.Opened target, LoadFormat format,
                                                 Backends.Settings settings, LoadListener listener) {
        Path dir = cfg.draftModel();
        ModelConfig tc = target.config();
        ModelConfig dc = ConfigParser.read(dir.resolve("config.json"));
        if (dc.vocabSize() > tc.vocabSize()) {
            throw new IllegalArgumentException("the draft model " + dir + " has vocab_size " + dc.vocabSize() + ", more than the target " + targetDir
                    + "'s " + tc.vocabSize() + ": they cannot share a tokenizer");
        }
        if (format != LoadFormat.DUMMY) {
            VocabularyAgreement.check(targetDir, dir);
        }
        KvCapacity cap = target.pass().kvCapacity();
        // as many KV tokens as the target holds: on CUDA the memory was left free by targetSettings, so the drafter may take it all
        Backends.Settings drafterSettings = new Backends.Settings(settings.threads(), cap.blockSize(), cap.blocks() * cap.blockSize(),
                settings.maxStepRows(), 1.0, settings.cudaGraphs(), settings.gemmCache());
        Backends.Kind kind = target.pass() instanceof CudaForwardPass ? Backends.Kind.CUDA : Backends.Kind.CPU;
        Backends.Opened drafter = Backends.open(dir, format, kind, drafterSettings, listener);
        try {
            return new DraftModelProposer(drafter.pass(), tc.vocabSize(), settings.maxStepRows(), drafter);
        } catch (RuntimeException e) {
            drafter.close();
            throw e;
        }
    }
}
