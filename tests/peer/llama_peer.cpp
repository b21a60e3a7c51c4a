// sl-llama-peer: our small harness around llama.cpp's public C API (the pinned node-llama-cpp build),
// used only by tests labelled `peer` and by the --vs-llamacpp benchmarks to get llama.cpp's answer on the
// same file: quantized GGUFs made by ggml's own quantizer, token ids, teacher-forced logits, chat
// formatting and tokens/s. It is never linked into the product.
//
// Binary outputs have no header: token ids are int32 little-endian, logits float32 [n, vocab].
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "sl-llama-peer: %s\n", msg.c_str());
    std::exit(2);
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) die("cannot read " + path);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <typename T>
std::vector<T> read_array(const std::string& path) {
    const std::string s = read_file(path);
    std::vector<T> v(s.size() / sizeof(T));
    std::memcpy(v.data(), s.data(), v.size() * sizeof(T));
    return v;
}

template <typename T>
void write_array(const std::string& path, const T* data, size_t n) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) die("cannot write " + path);
    if (n && std::fwrite(data, sizeof(T), n, f) != n) die("short write to " + path);
    std::fclose(f);
}

// Options after the positional arguments: --name value or --flag.
struct args {
    std::vector<std::string> pos;
    std::map<std::string, std::string> opt;

    args(int argc, char** argv, int first) {
        for (int i = first; i < argc; ++i) {
            std::string a = argv[i];
            if (a.rfind("--", 0) == 0) {
                const std::string key = a.substr(2);
                const bool flag = i + 1 >= argc || std::strncmp(argv[i + 1], "--", 2) == 0;
                opt[key] = flag ? "1" : argv[++i];
            } else {
                pos.push_back(a);
            }
        }
    }
    bool has(const std::string& k) const { return opt.count(k) != 0; }
    int num(const std::string& k, int def) const { return has(k) ? std::atoi(opt.at(k).c_str()) : def; }
    std::string str(const std::string& k, const std::string& def) const { return has(k) ? opt.at(k) : def; }
    const std::string& at(size_t i, const char* what) const {
        if (i >= pos.size()) die(std::string("missing argument: ") + what);
        return pos[i];
    }
};

void quiet_log(ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

void init_backend() {
    llama_log_set(quiet_log, nullptr);
    ggml_log_set(quiet_log, nullptr);
    // The CPU backend variants (haswell, icelake, ...) sit beside libllama; ggml picks the best one.
    if (const char* dir = std::getenv("SL_PEER_LIB_DIR"); dir && *dir)
        ggml_backend_load_all_from_path(dir);
    else
        ggml_backend_load_all_from_path(SL_PEER_LIB_DIR);
    llama_backend_init();
}

// repack: llama.cpp's default "extra buffer types", which repack some quantized weights at load (Q4_0,
// Q4_K, ... rows interleaved 4 or 8 at a time for its CPU kernels); false loads them as the file has them.
llama_model* load_model(const std::string& path, bool vocab_only, bool repack = true) {
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = vocab_only;
    if (!repack) mp.use_extra_bufts = false;
    mp.n_gpu_layers = 0;
    llama_model* m = llama_model_load_from_file(path.c_str(), mp);
    if (!m) die("llama.cpp could not load " + path);
    return m;
}

struct ftype_name {
    const char* name;
    llama_ftype ftype;
};
constexpr ftype_name k_ftypes[] = {
    {"F32", LLAMA_FTYPE_ALL_F32},         {"F16", LLAMA_FTYPE_MOSTLY_F16},       {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
    {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},    {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},     {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},
    {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M}, {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L},
    {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},     {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL},
    {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
};

// quantize IN OUT FTYPE [--threads N] [--pure]: llama.cpp's own file quantizer (llama-quantize).
int cmd_quantize(const args& a) {
    const std::string& in = a.at(0, "input gguf");
    const std::string& out = a.at(1, "output gguf");
    const std::string& type = a.at(2, "ftype");
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    bool found = false;
    for (const ftype_name& f : k_ftypes)
        if (type == f.name) {
            qp.ftype = f.ftype;
            found = true;
        }
    if (!found) die("unknown file type " + type);
    qp.nthread = a.num("threads", 2);
    qp.pure = a.has("pure");
    if (llama_model_quantize(in.c_str(), out.c_str(), &qp) != 0) die("llama_model_quantize failed for " + in);
    return 0;
}

// ggml-quant TYPE IN.f32 N_PER_ROW OUT.bin OUT_DEQ.f32: rows quantized by ggml_quantize_chunk (no
// importance matrix) and dequantized back by ggml's to_float.
int cmd_ggml_quant(const args& a) {
    const std::string& tname = a.at(0, "ggml type name");
    const std::vector<float> x = read_array<float>(a.at(1, "input f32"));
    const int64_t per_row = std::atoll(a.at(2, "elements per row").c_str());
    int type = -1;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const ggml_type_traits* tr = ggml_get_type_traits(static_cast<ggml_type>(t));
        if (tr && tr->type_name && tname == tr->type_name) type = t;
    }
    if (type < 0) die("unknown ggml type " + tname);
    const auto gt = static_cast<ggml_type>(type);
    if (per_row <= 0 || per_row % ggml_blck_size(gt) != 0 || x.size() % static_cast<size_t>(per_row) != 0)
        die("row length must be a positive multiple of the block size and divide the input");
    const int64_t rows = static_cast<int64_t>(x.size()) / per_row;
    const size_t row_bytes = ggml_row_size(gt, per_row);
    std::vector<uint8_t> q(row_bytes * static_cast<size_t>(rows));
    ggml_quantize_chunk(gt, x.data(), q.data(), 0, rows, per_row, nullptr);
    std::vector<float> deq(x.size());
    ggml_get_type_traits(gt)->to_float(q.data(), deq.data(), static_cast<int64_t>(x.size()));
    write_array(a.at(3, "output blocks"), q.data(), q.size());
    write_array(a.at(4, "output dequantized"), deq.data(), deq.size());
    return 0;
}

std::vector<llama_token> tokenize(const llama_vocab* v, const std::string& text, bool add_special, bool parse_special) {
    std::vector<llama_token> ids(text.size() + 16);
    int32_t n = llama_tokenize(v, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                               static_cast<int32_t>(ids.size()), add_special, parse_special);
    if (n < 0) {
        ids.resize(static_cast<size_t>(-n));
        n = llama_tokenize(v, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                           static_cast<int32_t>(ids.size()), add_special, parse_special);
    }
    if (n < 0) die("llama_tokenize failed");
    ids.resize(static_cast<size_t>(n));
    return ids;
}

// tokenize MODEL TEXTFILE OUT.i32 [--no-special-add] [--parse-special] [--lines|--nul]: with --lines every line
// of the file is tokenized on its own and the output is, per line, int32 count then the ids; --nul is the
// same with records separated by NUL bytes (so records may hold newlines).
int cmd_tokenize(const args& a) {
    init_backend();
    llama_model* m = load_model(a.at(0, "model"), true);
    const llama_vocab* v = llama_model_get_vocab(m);
    const std::string text = read_file(a.at(1, "text file"));
    const bool add = !a.has("no-special-add");
    const bool parse = a.has("parse-special");
    std::vector<int32_t> out;
    if (a.has("lines") || a.has("nul")) {
        const char sep = a.has("nul") ? '\0' : '\n';
        size_t start = 0;
        while (start <= text.size()) {
            size_t end = text.find(sep, start);
            if (end == std::string::npos) end = text.size();
            const std::vector<llama_token> ids = tokenize(v, text.substr(start, end - start), add, parse);
            out.push_back(static_cast<int32_t>(ids.size()));
            out.insert(out.end(), ids.begin(), ids.end());
            start = end + 1;
        }
    } else {
        const std::vector<llama_token> ids = tokenize(v, text, add, parse);
        out.assign(ids.begin(), ids.end());
    }
    write_array(a.at(2, "output ids"), out.data(), out.size());
    llama_model_free(m);
    return 0;
}

// detokenize MODEL IDS.i32 OUT.txt [--records]: per token, llama_token_to_piece (special tokens rendered),
// concatenated; with --records the ids come as tokenize --lines/--nul writes them (count, ids per record)
// and the records' texts are written separated by NUL bytes.
int cmd_detokenize(const args& a) {
    init_backend();
    llama_model* m = load_model(a.at(0, "model"), true);
    const llama_vocab* v = llama_model_get_vocab(m);
    const std::vector<int32_t> ids = read_array<int32_t>(a.at(1, "ids"));
    const bool records = a.has("records");
    std::string out;
    std::vector<char> buf(256);
    for (size_t i = 0, left = 0; i < ids.size(); ++i) {
        if (records && left == 0) {
            if (i > 0) out.push_back('\0');
            left = static_cast<size_t>(std::max(ids[i], 0));
            continue;
        }
        --left;
        const int32_t id = ids[i];
        int32_t n = llama_token_to_piece(v, id, buf.data(), static_cast<int32_t>(buf.size()), 0, true);
        if (n < 0) {
            buf.resize(static_cast<size_t>(-n));
            n = llama_token_to_piece(v, id, buf.data(), static_cast<int32_t>(buf.size()), 0, true);
        }
        out.append(buf.data(), static_cast<size_t>(std::max(n, 0)));
    }
    write_array(a.at(2, "output text"), out.data(), out.size());
    llama_model_free(m);
    return 0;
}

llama_context* make_context(llama_model* m, int n_ctx, int threads, int n_batch, bool f32_kv) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(n_ctx);
    cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n_batch);
    cp.n_threads = cp.n_threads_batch = threads;
    cp.no_perf = true;
    if (f32_kv) {
        // Parity runs keep the KV cache in F32 as our engine does, so only the weights differ.
        cp.type_k = cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    llama_context* c = llama_init_from_model(m, cp);
    if (!c) die("llama_init_from_model failed");
    return c;
}

// logits MODEL IDS.i32 OUT.f32 [--threads N]: teacher-forced logits of every position, in one batch.
int cmd_logits(const args& a) {
    init_backend();
    llama_model* m = load_model(a.at(0, "model"), false);
    const std::vector<int32_t> ids = read_array<int32_t>(a.at(1, "ids"));
    if (ids.empty()) die("no tokens");
    const int n = static_cast<int>(ids.size());
    llama_context* c = make_context(m, std::max(n, 64), a.num("threads", 2), n, !a.has("f16-kv"));
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        b.token[i] = ids[static_cast<size_t>(i)];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(c, b) != 0) die("llama_decode failed");
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    std::vector<float> out(static_cast<size_t>(n) * n_vocab);
    for (int i = 0; i < n; ++i)
        std::memcpy(out.data() + static_cast<size_t>(i) * n_vocab, llama_get_logits_ith(c, i), sizeof(float) * n_vocab);
    write_array(a.at(2, "output logits"), out.data(), out.size());
    llama_batch_free(b);
    llama_free(c);
    llama_model_free(m);
    return 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

// bench MODEL [--threads N] [--prompt P] [--gen G] [--reps R] [--no-repack]: prefill of P tokens and decode
// of G tokens with llama.cpp's defaults (F16 KV cache, weight repacking: what a user gets), medians over R
// repetitions, one JSON line. --no-repack keeps the file's weight layout (what repacking buys).
int cmd_bench(const args& a) {
    init_backend();
    llama_model* m = load_model(a.at(0, "model"), false, !a.has("no-repack"));
    const int threads = a.num("threads", 2), n_prompt = a.num("prompt", 128), n_gen = a.num("gen", 64);
    const int reps = a.num("reps", 5);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    llama_context* c = make_context(m, n_prompt + n_gen + 8, threads, std::max(n_prompt, 1), false);
    std::vector<llama_token> prompt(static_cast<size_t>(n_prompt));
    for (int i = 0; i < n_prompt; ++i) prompt[static_cast<size_t>(i)] = (i * 7919 + 13) % n_vocab;
    using clk = std::chrono::steady_clock;
    std::vector<double> pp, tg;
    for (int r = 0; r < reps + 1; ++r) {  // the first repetition warms up and is not counted
        llama_memory_clear(llama_get_memory(c), true);
        const auto t0 = clk::now();
        if (n_prompt > 0 && llama_decode(c, llama_batch_get_one(prompt.data(), n_prompt)) != 0) die("prefill failed");
        const auto t1 = clk::now();
        llama_token tok = 1 % n_vocab;
        for (int g = 0; g < n_gen; ++g) {
            if (llama_decode(c, llama_batch_get_one(&tok, 1)) != 0) die("decode failed");
            tok = (tok * 31 + 7) % n_vocab;
        }
        const auto t2 = clk::now();
        if (r == 0) continue;
        pp.push_back(n_prompt / std::chrono::duration<double>(t1 - t0).count());
        tg.push_back(n_gen / std::chrono::duration<double>(t2 - t1).count());
    }
    std::printf("{\"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"threads\": %d, \"prompt\": %d, \"gen\": %d, \"reps\": %d}\n",
                median(pp), median(tg), threads, n_prompt, n_gen, reps);
    llama_free(c);
    llama_model_free(m);
    return 0;
}

// chat MODEL USER [--system S] [--template T]: the model's chat template applied by llama.cpp to one
// (system,) user turn with the assistant prefix, printed raw on stdout.
int cmd_chat(const args& a) {
    std::string tmpl = a.str("template", "");
    if (tmpl.empty()) {
        init_backend();
        llama_model* m = load_model(a.at(0, "model"), true);
        const char* t = llama_model_chat_template(m, nullptr);
        if (!t) die("model has no chat template");
        tmpl = t;
        llama_model_free(m);
    }
    std::vector<llama_chat_message> msgs;
    const std::string sys = a.str("system", ""), user = a.at(1, "user message");
    if (!sys.empty()) msgs.push_back({"system", sys.c_str()});
    msgs.push_back({"user", user.c_str()});
    std::vector<char> buf(4096 + user.size() * 2);
    int32_t n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), true, buf.data(),
                                          static_cast<int32_t>(buf.size()));
    if (n < 0) die("llama.cpp does not recognise this chat template");
    if (static_cast<size_t>(n) > buf.size()) {
        buf.resize(static_cast<size_t>(n));
        n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), true, buf.data(), n);
    }
    std::fwrite(buf.data(), 1, static_cast<size_t>(n), stdout);
    return 0;
}

// info MODEL: vocabulary facts llama.cpp derived from the file, one JSON line.
int cmd_info(const args& a) {
    init_backend();
    llama_model* m = load_model(a.at(0, "model"), a.has("vocab-only"));
    const llama_vocab* v = llama_model_get_vocab(m);
    char desc[256] = {};
    llama_model_desc(m, desc, sizeof desc);
    std::printf("{\"desc\": \"%s\", \"vocab_type\": %d, \"n_vocab\": %d, \"bos\": %d, \"eos\": %d, \"eot\": %d, "
                "\"add_bos\": %s, \"add_eos\": %s, \"n_params\": %llu}\n",
                desc, static_cast<int>(llama_vocab_type(v)), llama_vocab_n_tokens(v), llama_vocab_bos(v),
                llama_vocab_eos(v), llama_vocab_eot(v), llama_vocab_get_add_bos(v) ? "true" : "false",
                llama_vocab_get_add_eos(v) ? "true" : "false",
                static_cast<unsigned long long>(a.has("vocab-only") ? 0 : llama_model_n_params(m)));
    llama_model_free(m);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: sl-llama-peer quantize|ggml-quant|tokenize|detokenize|logits|bench|chat|info ...\n"
                     "  (llama.cpp, node-llama-cpp@3.21.1 prebuilt CPU libraries; for SparseLens tests only)\n");
        return 2;
    }
    const std::string cmd = argv[1];
    const args a(argc, argv, 2);
    if (cmd == "quantize") return cmd_quantize(a);
    if (cmd == "ggml-quant") return cmd_ggml_quant(a);
    if (cmd == "tokenize") return cmd_tokenize(a);
    if (cmd == "detokenize") return cmd_detokenize(a);
    if (cmd == "logits") return cmd_logits(a);
    if (cmd == "bench") return cmd_bench(a);
    if (cmd == "chat") return cmd_chat(a);
    if (cmd == "info") return cmd_info(a);
    die("unknown command " + cmd);
}
