// llama_logits: llama.cpp's logits for a token sequence, teacher-forced (one batch, every position's logits), as the
// reference Spindle's GGUF reading is compared against (scripts/make_llama_cpp_logits.py; LlamaCppLogitsTest).
// Build against a llama.cpp checkout and its build (CPU, or CUDA with -ngl):
//   cc -O2 -I$LLAMA/include -I$LLAMA/ggml/include scripts/llama_logits.c -L$LLAMA/build/bin -lllama -lggml -lggml-base \
//      -Wl,-rpath,$LLAMA/build/bin -o llama_logits
// Usage: llama_logits MODEL.gguf OUT.f32 GPU_LAYERS ID...   (writes n x vocab float32, position-major; prints vocab and n)
#include <stdio.h>
#include <stdlib.h>
#include "llama.h"

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.gguf OUT.f32 GPU_LAYERS ID...\n", argv[0]);
        return 2;
    }
    int n = argc - 4;
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = atoi(argv[3]);
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n < 64 ? 64 : n;
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = atoi(argv[4 + i]);
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) {
        fprintf(stderr, "llama_decode failed\n");
        return 1;
    }
    FILE *out = fopen(argv[2], "wb");
    for (int i = 0; i < n; i++) {
        fwrite(llama_get_logits_ith(ctx, i), sizeof(float), vocab, out);
    }
    fclose(out);
    printf("%d %d\n", vocab, n);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
