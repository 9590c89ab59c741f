package dev.spindle.cli;

import dev.spindle.chat.ChatFormat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.eval.KlCorpus;
import dev.spindle.eval.KlRun;
import dev.spindle.model.LoadListener;
import dev.spindle.model.Quantization;
import dev.spindle.step.KvDtype;
import dev.spindle.tokenizer.Tokenizer;
import dev.spindle.wiring.Backends;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import dev.spindle.wiring.ModelFiles;

/**
 * {@code spindle kl}: how far a lossy configuration's next-token distributions are from the model as published, on the
 * same backend, teacher-forced over a corpus in categories (the disclosure every lossy option carries).
 */
@Command(name = "kl", mixinStandardHelpOptions = true,
        description = "Teacher-forced KL(baseline || candidate) over a corpus in categories: a lossy configuration against the model as published.")
final class KlCommand implements Callable<Integer> {
    @Mixin
    ModelOptions model;

    @Option(names = "--baseline-quantization", defaultValue = "none", paramLabel = "Q",
            description = "The baseline's --quantization (default none: the checkpoint as published).")
    String baselineQuantization;

    @Option(names = "--baseline-model", paramLabel = "DIR",
            description = "The baseline's model directory when --model is another file of the same model (a GGUF of it): the baseline is that"
                    + " release as published, the candidate --model as its file stores it; the tokenizer and chat template come from DIR.")
    Path baselineModel;

    @Option(names = "--corpus", paramLabel = "FILE", description = "JSONL corpus (category, id, messages or text); default: the corpus shipped with Spindle.")
    Path corpus;

    @Option(names = "--categories", split = ",", paramLabel = "NAME,...", description = "Only these categories (default: all).")
    List<String> categories;

    @Option(names = "--per-category", defaultValue = "0", paramLabel = "N", description = "At most N sequences of each category (default 0: all).")
    int perCategory;

    @Option(names = "--max-tokens", defaultValue = "2048", paramLabel = "N", description = "Tokens scored of a sequence at most (default 2048).")
    int maxTokens;

    @Option(names = "--chunk", defaultValue = "512", paramLabel = "TOKENS", description = "Tokens a window (default 512).")
    int chunk;

    @Option(names = "--hf-reference", paramLabel = "DIR",
            description = "A folder with reference.json (teacher_forced ids) and reference.safetensors (logits_f32_N): HF's fp32 logits, "
                    + "whose distance to both sides is reported too.")
    Path hfReference;

    @Option(names = "--json", paramLabel = "FILE", description = "Write the JSON report here (default: standard output).")
    Path json;

    @Option(names = "--backend", defaultValue = "cpu", paramLabel = "cpu|cuda", description = "Backend (default cpu).")
    String backend;

    @Override
    public Integer call() throws IOException {
        Quantization base = Quantization.parse(baselineQuantization), cand = model.quantization();
        KvDtype kv = model.kvDtype();
        Path baseDir = baselineModel != null ? baselineModel : model.dir();
        if (baselineModel == null && base == cand && kv == KvDtype.BF16) {
            throw new IllegalArgumentException("--quantization and --baseline-quantization are both " + cand.label
                    + " and the KV cache is bf16: nothing to compare (give --quantization or --kv-cache-dtype)");
        }
        List<KlCorpus.Entry> entries;
        KlRun.ThinkTokens think;
        try (Tokenizer tok = ModelFiles.tokenizer(baseDir); InputStream in = corpus != null ? Files.newInputStream(corpus)
                : KlCommand.class.getResourceAsStream(KlCorpus.SHIPPED)) {
            entries = select(KlCorpus.read(in, corpus != null ? corpus.toString() : "the shipped corpus", ModelFiles.chatTemplate(baseDir), tok));
            think = new KlRun.ThinkTokens(tok.addedTokenId(ChatFormat.THINK_OPEN), tok.addedTokenId(ChatFormat.THINK_CLOSE));
        }
        int longest = entries.stream().mapToInt(e -> Math.min(maxTokens, e.ids().length)).max().orElse(1);
        Backends.Settings settings = new Backends.Settings(model.threadCount(), model.blockSize, model.blocksFor(longest) * model.blockSize,
                Math.max(1, chunk), 0.9, true, model.gemmCacheDir()).withCudaKernels(model.cudaKernels()).withGpuMemoryLimit(model.gpuMemoryLimit());
        Backends.Kind kind = Backends.Kind.parse(backend);
        ObjectNode report = new ObjectMapper().createObjectNode();
        try (Backends.Opened b = Backends.open(baseDir, model.format(), kind, settings.withQuantization(base), LoadListener.NONE);
             Backends.Opened c = Backends.open(model.dir(), model.format(), kind, settings.withQuantization(cand).withKvDtype(kv), LoadListener.NONE)) {
            System.err.println("baseline: " + b.description());
            System.err.println("candidate: " + c.description());
            if (!b.config().equals(c.config())) {
                throw new IllegalArgumentException("--model " + model.dir() + " is not the model of --baseline-model " + baseDir + ": their configs differ ("
                        + c.config() + " against " + b.config() + ")");
            }
            String weights = baselineModel != null ? c.weights() : cand.label;
            String candidate = weights + (kv == KvDtype.BF16 ? "" : "+kv-" + kv.label);
            KlRun run = new KlRun(b.pass(), c.pass(), chunk);
            Map<String, KlRun.Summary> summary = run.run(entries, maxTokens, think, line -> System.err.println("  " + line));
            report.put("model", model.dir().toString()).put("baseline", baselineModel != null ? baseDir.toString() : base.label).put("candidate", candidate)
                    .put("weights", weights)
                    .put("kv_cache", kv.label)
                    .put("backend", backend).put("corpus", corpus != null ? corpus.toString() : KlCorpus.SHIPPED).put("max_tokens", maxTokens);
            ObjectNode cats = report.putObject("categories");
            summary.forEach((name, s) -> cats.set(name, new ObjectMapper().valueToTree(s)));
            System.err.println(table(candidate, summary));
            if (hfReference != null) {
                KlRun.HfDistance hf = run.hf(HfReferences.read(hfReference));
                report.set("hf_fp32", new ObjectMapper().valueToTree(hf));
                System.err.printf(Locale.ROOT, "HF fp32 over %d positions: KL(fp32 || %s) %.6f, top-1 %.4f; KL(fp32 || %s) %.6f, top-1 %.4f%n",
                        hf.positions(), base.label, hf.baselineKl(), hf.baselineTop1(), candidate, hf.candidateKl(), hf.candidateTop1());
            }
        }
        String text = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(report);
        if (json != null) {
            Files.writeString(json, text + "\n");
        } else {
            System.out.println(text);
        }
        return 0;
    }

    private List<KlCorpus.Entry> select(List<KlCorpus.Entry> all) {
        Set<String> known = new java.util.LinkedHashSet<>();
        all.forEach(e -> known.add(e.category()));
        if (categories != null) {
            for (String c : categories) {
                if (!known.contains(c)) {
                    throw new IllegalArgumentException("--categories: no category \"" + c + "\" in the corpus (it has " + String.join(", ", known) + ")");
                }
            }
        }
        Map<String, Integer> taken = new LinkedHashMap<>();
        List<KlCorpus.Entry> out = new ArrayList<>();
        for (KlCorpus.Entry e : all) {
            if (categories != null && !categories.contains(e.category())) {
                continue;
            }
            if (perCategory > 0 && taken.merge(e.category(), 1, Integer::sum) > perCategory) {
                continue;
            }
            out.add(e);
        }
        return out;
    }

    /**
     * exllamav3's style: one row a category, KL mean (the disclosed figure), p99, max, top-1 agreement, each side's NLL, and the
     * thinking-stop mass ratio (candidate over baseline; blank where the category has no think block).
     */
    static String table(String candidate, Map<String, KlRun.Summary> summary) {
        StringBuilder t = new StringBuilder(String.format(Locale.ROOT, "%-14s | %-12s | %4s | %9s | %10s | %10s | %10s | %6s | %8s | %8s | %10s%n",
                "candidate", "category", "seqs", "positions", "KL mean", "KL p99", "KL max", "top-1", "NLL base", "NLL cand", "stop mass"));
        summary.forEach((c, s) -> t.append(String.format(Locale.ROOT, "%-14s | %-12s | %4d | %9d | %10.6f | %10.6f | %10.6f | %6.4f | %8.4f | %8.4f | %10s%n",
                candidate, c, s.sequences(), s.positions(), s.meanKl(), s.p99Kl(), s.maxKl(), s.top1Agreement(), s.baselineNll(), s.candidateNll(),
                Double.isNaN(s.thinkingStopRatio()) ? "" : String.format(Locale.ROOT, "%.4f", s.thinkingStopRatio()))));
        return t.toString();
    }
}
