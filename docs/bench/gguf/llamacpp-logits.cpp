// Teacher-forced logits from llama.cpp for a token sequence: logits.cpp MODEL.gguf IDS.txt OUT.f32 (all positions, fp32)
#include "llama.h"
#include <cstdio>
#include <vector>
int main(int argc, char ** argv) {
    llama_backend_init();
    auto mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * m = llama_model_load_from_file(argv[1], mp);
    if (!m) { fprintf(stderr, "load failed\n"); return 1; }
    std::vector<llama_token> ids;
    FILE * f = fopen(argv[2], "r");
    int t;
    while (fscanf(f, "%d", &t) == 1) ids.push_back(t);
    fclose(f);
    auto cp = llama_context_default_params();
    cp.n_ctx = 2048; cp.n_batch = 2048; cp.n_ubatch = 2048; cp.n_threads = 2; cp.n_threads_batch = 2;
    llama_context * ctx = llama_init_from_model(m, cp);
    llama_batch b = llama_batch_init(ids.size(), 0, 1);
    for (size_t i = 0; i < ids.size(); i++) {
        b.token[i] = ids[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1;
    }
    b.n_tokens = ids.size();
    if (llama_decode(ctx, b) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    FILE * o = fopen(argv[3], "wb");
    for (size_t i = 0; i < ids.size(); i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), nv, o);
    fclose(o);
    fprintf(stderr, "%zu positions x %d\n", ids.size(), nv);
    return 0;
}
