// Engine jobs: loading a model (tokenizer and calibration discovery as the CLI does), calibration and
// the Tuning panel's evaluation (dense reference cached per text and window count).
#include "engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "cache_recorder.h"
#include "engine_internal.h"
#include "sparselens/core/methods.h"
#include "sparselens/core/model_stats.h"
#include "sparselens/kernels/kernels.h"
#include "sparselens/sim/shape.h"

namespace sl::views::detail {

int32_t engine_threads() {
    const unsigned hw = std::thread::hardware_concurrency();
    return static_cast<int32_t>(std::max(1u, hw > 1 ? hw - 1 : 1u));
}

context_params engine_context_params(int32_t n_ctx) {
    context_params cp = context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = engine_threads();
    return cp;
}

engine::engine() = default;
engine::~engine() = default;

outcome engine::require_model() const {
    if (!m_model) return error{"no model loaded: open a model file first (File > Open model...)"};
    if (!m_tok) return error{m_model->path + ": no tokenizer: open the model again with its tokenizer file"};
    return {};
}

result<std::shared_ptr<model_card>> engine::load(const std::string& path, const std::string& tokenizer_path,
                                                 generation_id gen, const job_hooks& hooks) {
    const std::string file = std::filesystem::path(path).filename().string();
    model_load_params lp = model_default_load_params();
    lp.progress = [&](float f) { return hooks.progress("Loading " + file, f); };
    auto loaded = model_load(path, lp);
    if (!loaded) return loaded.err();
    auto m = std::make_unique<model>(std::move(loaded).value());
    const int32_t vocab = m->hp.vocab_size;

    // Tokenizer: the given file, else the embedded vocabulary, else tokenizer.bin / tok512.bin beside the model.
    std::optional<tokenizer> tok;
    std::string tok_source;
    if (!tokenizer_path.empty()) {
        auto t = tokenizer::from_llama2c_file(tokenizer_path, vocab);
        if (!t) return t.err();
        tok = std::move(t).value();
        tok_source = tokenizer_path;
    } else if (!m->vocab.empty()) {
        auto t = tokenizer::from_embedded_vocab(m->vocab, path);
        if (!t) return t.err();
        tok = std::move(t).value();
        tok_source = "embedded";
    } else {
        const auto dir = std::filesystem::path(path).parent_path();
        for (const char* name : {"tokenizer.bin", "tok512.bin"}) {
            const auto candidate = dir / name;
            std::error_code ec;
            if (!std::filesystem::exists(candidate, ec)) continue;
            auto t = tokenizer::from_llama2c_file(candidate.string(), vocab);
            if (t.ok() && t->vocab_size() == vocab) {
                tok = std::move(t).value();
                tok_source = candidate.string();
                break;
            }
        }
    }
    if (tok && tok->vocab_size() > vocab)
        return error{path + ": tokenizer has " + std::to_string(tok->vocab_size()) + " tokens but the model only " +
                     std::to_string(vocab)};

    // A calibration beside the model (MODEL.calib) is used when it matches; a stale one is ignored.
    std::optional<calibration> cal;
    std::string cal_source;
    std::error_code ec;
    if (std::filesystem::exists(path + ".calib", ec)) {
        auto c = calibration_load(path + ".calib");
        if (c && calibration_matches(c.value(), *m).ok()) {
            cal = std::move(c).value();
            cal_source = path + ".calib";
        }
    }

    auto card = std::make_shared<model_card>();
    card->generation = gen;
    card->path = path;
    card->format = m->format;
    card->name = m->name.empty() ? file : m->name;
    card->file_bytes = m->file_bytes;
    const model_hparams& hp = m->hp;
    card->dim = hp.dim;
    card->hidden_dim = hp.hidden_dim;
    card->n_layers = hp.n_layers;
    card->n_heads = hp.n_heads;
    card->n_kv_heads = hp.n_kv_heads;
    card->head_dim = hp.head_dim();
    card->vocab_size = hp.vocab_size;
    card->seq_len = hp.seq_len;
    if (!m->layers.empty()) card->weight_type = std::string(dtype_name(m->layers[0].w_gate.type));
    const model_bytes b = model_count_bytes(*m);
    card->attention_bytes = b.attention;
    card->mlp_bytes = b.mlp;
    card->embedding_bytes = b.embeddings;
    card->other_bytes = b.norms;
    card->has_tokenizer = tok.has_value();
    card->tokenizer_source = tok_source;
    card->has_calibration = cal.has_value();
    card->calibration_source = cal_source;
    card->tied_embeddings = m->tied_output;
    card->architecture = arch_summary(m->arch);
    card->tokenizer_kind = tokenizer_kind_name(m->vocab);
    card->chat_format = chat_format_kind(m->vocab);
    for (const type_share& s : model_type_mix(*m))
        card->tensor_types.push_back({std::string(dtype_name(s.type)), s.tensors, s.bytes, s.bits_per_weight()});

    // Only now replace the previous model: a failed load leaves it usable.
    m_last.reset();
    m_eval_ctx.reset();
    m_refs.clear();
    m_tokens.clear();
    m_tokens_key = 0;
    m_down_norms.clear();
    m_model = std::move(m);
    m_tok = std::move(tok);
    m_calib = std::move(cal);
    m_calib_source = cal_source;
    m_calib_path = cal_source;
    m_identity.reset();
    m_evaluated.clear();
    return card;
}

result<std::string> engine::calibrate(const eval_text& text, const job_hooks& hooks) {
    if (auto ok = require_model(); !ok) return ok.err();
    const std::vector<int32_t>& tokens = text_tokens(text);
    calibration_params cp = calibration_default_params();
    cp.n_threads = engine_threads();
    cp.n_ctx = std::min(128, m_model->hp.seq_len);
    cp.bos_id = m_tok->bos_id();
    cp.progress = [&](float f) { return hooks.progress("Calibrating on " + text.name, f); };
    if (static_cast<int64_t>(tokens.size()) < cp.n_ctx)
        return error{text.name + ": " + std::to_string(tokens.size()) + " tokens, fewer than one calibration window of " +
                     std::to_string(cp.n_ctx)};
    auto cal = sl::calibrate(*m_model, tokens, cp);
    if (!cal) return cal.err();
    m_calib = std::move(cal).value();
    m_calib_source = text.name;
    m_calib_path.clear();  // in memory only: a run that needs it saves a copy beside the session
    return "calibrated on " + std::to_string(m_calib->n_tokens) + " tokens of " + text.name;
}

outcome engine::ensure_calibration(const method_config& cfg, const std::shared_ptr<const eval_text>& text,
                                   const job_hooks& hooks) {
    if (!method_config_needs_calibration(cfg) || m_calib) return {};
    if (!text) return error{cfg.name + ": needs a calibration and there is no text to calibrate on"};
    auto r = calibrate(*text, hooks);
    if (!r) return r.err();
    return {};
}

const std::vector<int32_t>& engine::text_tokens(const eval_text& text) {
    if (m_tokens_key != text.hash + 1) {
        m_tokens = m_tok->encode(text.bytes, true, false);
        m_tokens_key = text.hash + 1;
    }
    return m_tokens;
}

result<sim::sim_params> engine::sim_params_for(const device_settings& d) const {
    sim::sim_params p = sim::sim_default_params();
    auto dev = sim::device_find(d.device);
    if (!dev) return dev.err();
    p.device = std::move(dev).value();
    if (d.dram_bytes > 0) p.device.dram_bytes = d.dram_bytes;
    if (d.dram_bandwidth > 0) p.device.dram_bandwidth = d.dram_bandwidth;
    if (d.flash_bandwidth > 0) p.device.flash_bandwidth = d.flash_bandwidth;
    if (d.flash_page_bytes > (int64_t{1} << 30))
        return error{"device: a flash read unit of " + std::to_string(d.flash_page_bytes) + " bytes is larger than 1 GiB"};
    if (d.flash_page_bytes >= 0) p.device.flash_page_bytes = static_cast<uint32_t>(d.flash_page_bytes);
    if (auto v = sim::device_validate(p.device, p.device.name); !v) return v.err();
    if (d.bits < 1 || d.bits > 32) return error{"device: " + std::to_string(d.bits) + " bits per weight is out of range"};
    p.quant = sim::quant_default(d.bits);
    if (!sim::cache_policy_parse(d.policy, p.policy) || p.policy == sim::cache_policy::belady)
        return error{"device: cache policy '" + d.policy + "' is not available online (lfu, lru, window, none)"};
    p.context_tokens = static_cast<uint32_t>(std::clamp(m_model ? m_model->hp.seq_len : 1024, 1, 1024));
    p.threads = 1;
    return p;
}

result<engine::eval_setup> engine::prepare_eval(const std::shared_ptr<const eval_text>& text, int32_t n_ctx_wanted,
                                                 int32_t windows, const job_hooks& hooks) {
    const int32_t n_ctx = std::clamp(n_ctx_wanted, 8, m_model->hp.seq_len);
    if (!m_eval_ctx || m_eval_ctx->n_ctx() != n_ctx) {
        m_eval_ctx.reset();
        auto c = context::create(*m_model, engine_context_params(n_ctx));
        if (!c) return c.err();
        m_eval_ctx.emplace(std::move(c).value());
    }
    eval_setup out;
    out.ep = eval_default_params();
    out.ep.n_ctx = n_ctx;
    out.ep.max_windows = std::max(1, windows);
    out.ep.bos_id = m_tok->bos_id();

    // The dense reference depends only on (text, window, windows): computed once, then every slider
    // move costs one method pass.
    const auto key = std::make_pair(text->hash, std::make_pair(n_ctx, out.ep.max_windows));
    auto it = m_refs.find(key);
    if (it == m_refs.end()) {
        eval_params ep = out.ep;
        ep.progress = [&](float f) { return hooks.progress("Dense reference on " + text->name, f); };
        auto ref = eval_dense_reference(*m_eval_ctx, text_tokens(*text), ep);
        if (!ref) return error{text->name + ": " + ref.message(), ref.cancelled()};
        if (m_refs.size() >= 8) m_refs.clear();
        it = m_refs.emplace(key, std::make_shared<const dense_reference>(std::move(ref).value())).first;
    }
    out.ref = it->second;
    return out;
}

result<std::shared_ptr<tuning_result>> engine::evaluate(const evaluate_request& req,
                                                        const std::shared_ptr<const eval_text>& text,
                                                        generation_id gen, const job_hooks& hooks) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    if (auto ok = require_model(); !ok) return ok.err();
    if (!text) return error{"evaluate: no evaluation text"};
    if (auto c = ensure_calibration(req.method, text, hooks); !c) return c.err();
    // FFSplit's SVDs take a while on big models: the job's progress bar and Cancel cover them.
    auto method = make_method(req.method, *m_model, m_calib ? &*m_calib : nullptr,
                              [&](float f) { return hooks.progress("Building " + req.method.name, f); });
    if (!method) return method.err();
    auto sp = sim_params_for(req.device);
    if (!sp) return sp.err();

    auto setup = prepare_eval(text, req.n_ctx, req.windows, hooks);
    if (!setup) return setup.err();
    eval_params ep = setup->ep;
    const dense_reference& ref = *setup->ref;

    auto rec = cache_recorder::create(*m_model, req.method.name, sp.value(), false, method.value().get());
    if (!rec) return rec.err();
    ep.progress = [&](float f) { return hooks.progress("Evaluating " + req.method.name, f); };
    auto r = eval_method(*m_eval_ctx, ref, *method.value(), rec.value().get(), ep);
    if (!r) return r.err();
    if (!rec.value()->last_error().empty()) return error{"simulator: " + rec.value()->last_error()};

    auto out = std::make_shared<tuning_result>();
    out->generation = gen;
    out->config = req.method;
    out->eval = std::move(r).value();
    out->sim_tokens_per_s = rec.value()->tokens_per_s();
    out->sim_hit_rate = rec.value()->hit_rate();
    out->device_name = sp->device.name;
    auto layout = sim::layout_parse("bundle");
    auto dense = sim::analytic(sim::shape_from_model(*m_model), layout.value(), sp.value(), "dense");
    if (dense) out->sim_dense_tokens_per_s = dense->tokens_per_s;
    // Dense is its own baseline: one figure (the analytic dense stream), not a second, cached run of it.
    if (req.method.name == "dense" && dense) out->sim_tokens_per_s = out->sim_dense_tokens_per_s;
    out->partial = req.partial;
    out->seconds = std::chrono::duration<double>(clock::now() - t0).count();
    if (!req.partial) {
        // Kept so "Save run" can record it with the device setting it was simulated on.
        evaluated e;
        e.generation = gen;
        e.result = out;
        e.text = text;
        e.n_ctx = ep.n_ctx;
        e.windows = ep.max_windows;
        e.setting = sessions::sim_setting_of(sp.value(), rec.value()->layout(),
                                             static_cast<uint32_t>(rec.value()->tokens()));
        m_evaluated.push_back(std::move(e));
        if (m_evaluated.size() > 16) m_evaluated.pop_front();
    }
    return out;
}

const std::vector<std::vector<float>>& engine::down_column_norms() {
    if (!m_down_norms.empty()) return m_down_norms;
    const model_hparams& hp = m_model->hp;
    m_down_norms.assign(static_cast<size_t>(hp.n_layers), std::vector<float>(static_cast<size_t>(hp.hidden_dim), 0.0f));
    std::vector<float> row(static_cast<size_t>(hp.hidden_dim));
    for (int32_t l = 0; l < hp.n_layers; ++l) {
        const tensor_view& w = m_model->layers[static_cast<size_t>(l)].w_down;  // [dim, hidden]
        std::vector<double> acc(static_cast<size_t>(hp.hidden_dim), 0.0);
        for (int64_t r = 0; r < w.rows; ++r) {
            kernels::dequantize_row(w.type, w.row(r), row.data(), w.cols);
            for (int64_t j = 0; j < w.cols && j < hp.hidden_dim; ++j) acc[static_cast<size_t>(j)] += double(row[j]) * row[j];
        }
        for (int32_t j = 0; j < hp.hidden_dim; ++j)
            m_down_norms[static_cast<size_t>(l)][static_cast<size_t>(j)] = static_cast<float>(std::sqrt(acc[static_cast<size_t>(j)]));
    }
    return m_down_norms;
}

}  // namespace sl::views::detail
