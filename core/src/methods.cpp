// Method registry: names, descriptions and the factory mapping a method_config onto each method.
#include "sparselens/core/methods.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "methods_internal.h"
#include "methods_threshold_internal.h"

namespace sl {

method_config method_default_config() { return {}; }

namespace {

float clamp01(float v) { return std::clamp(v, 0.0f, 1.0f); }

}  // namespace

std::vector<method_entry> basic_method_entries() {
    return {
        {"dense", "No sparsity: every weight is read (the reference)", false,
         [](const method_config&, const model&, const calibration*) -> result<std::unique_ptr<sparsity_method>> {
             return make_dense_method();
         }},
        {"glu", "GLU pruning (oracle): top-k of |GLU(x)| selects down columns; gate and up stay dense", false,
         [](const method_config& c, const model& m, const calibration*) -> result<std::unique_ptr<sparsity_method>> {
             // MLP density = (1 + 1 + keep) / 3
             return make_glu_pruning(m.hp, clamp01(3.0f * c.density - 2.0f));
         }},
        {"gate", "Gate pruning: dense gate; top-k of |silu(W_g x)| selects up rows and down columns", false,
         [](const method_config& c, const model& m, const calibration*) -> result<std::unique_ptr<sparsity_method>> {
             // MLP density = (1 + 2 keep) / 3
             return make_gate_pruning(m.hp, clamp01((3.0f * c.density - 1.0f) / 2.0f), false, m.arch.act);
         }},
        {"up", "Up pruning: dense up; top-k of |W_u x| selects gate rows and down columns", false,
         [](const method_config& c, const model& m, const calibration*) -> result<std::unique_ptr<sparsity_method>> {
             return make_gate_pruning(m.hp, clamp01((3.0f * c.density - 1.0f) / 2.0f), true, m.arch.act);
         }},
        {"dip", "Dynamic Input Pruning: top-k of |x| selects gate/up input columns, top-k of |GLU~| down columns",
         false,
         [](const method_config& c, const model& m, const calibration*) -> result<std::unique_ptr<sparsity_method>> {
             const float d_in = c.d_in >= 0 ? clamp01(c.d_in) : clamp01(c.density);
             const float d_down = c.d_down >= 0 ? clamp01(c.d_down) : clamp01(c.density);
             return make_dip(m.hp, d_in, d_down, 1.0f, false);
         }},
        {"dip-ca", "Cache-aware DIP: scores |x|(c + gamma(1 - c))/||x||inf favour units already in DRAM", false,
         [](const method_config& c, const model& m, const calibration*) -> result<std::unique_ptr<sparsity_method>> {
             if (!(c.gamma >= 0.0f && c.gamma <= 1.0f))
                 return error{"dip-ca: gamma " + std::to_string(c.gamma) + " is outside [0, 1]"};
             const float d_in = c.d_in >= 0 ? clamp01(c.d_in) : clamp01(c.density);
             const float d_down = c.d_down >= 0 ? clamp01(c.d_down) : clamp01(c.density);
             return make_dip(m.hp, d_in, d_down, c.gamma, true);
         }},
    };
}

namespace {

const std::vector<method_entry>& registry() {
    static const std::vector<method_entry> entries = [] {
        std::vector<method_entry> all = basic_method_entries();
        for (auto part : {threshold_method_entries, expert_method_entries}) {
            std::vector<method_entry> more = part();
            all.insert(all.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
        }
        return all;
    }();
    return entries;
}

const method_entry* find_entry(const std::string& name) {
    for (const method_entry& e : registry())
        if (e.name == name) return &e;
    return nullptr;
}

}  // namespace

const std::vector<std::string>& method_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const method_entry& e : registry()) n.push_back(e.name);
        return n;
    }();
    return names;
}

std::string method_description(const std::string& name) {
    const method_entry* e = find_entry(name);
    return e ? e->description : std::string();
}

bool method_needs_calibration(const std::string& name) {
    const method_entry* e = find_entry(name);
    return e && e->needs_calibration;
}

bool method_config_needs_calibration(const method_config& c) {
    return method_needs_calibration(c.name) || c.pin_fraction > 0.0f;
}

method_knob_use method_knobs_read(const std::string& name) {
    method_knob_use u;
    u.d_split = name == "dip" || name == "dip-ca";
    u.gamma = name == "dip-ca";
    u.pin = u.d_split || name == "cats" || name == "chess" || name == "chess-attn";
    u.attn = name == "chess-attn" || name.rfind("teal", 0) == 0;
    u.rank = name == "sparsellm" || name == "ffsplit";
    u.ffsplit = name == "ffsplit";
    return u;
}

method_config method_config_for(const method_config& knobs, const std::string& name) {
    const method_config def = method_default_config();
    const method_knob_use use = method_knobs_read(name);
    method_config c = knobs;
    c.name = name;
    if (!use.d_split) c.d_in = c.d_down = def.d_in;
    if (!use.gamma) c.gamma = def.gamma;
    if (!use.pin) c.pin_fraction = def.pin_fraction;
    if (!use.attn) c.attn_density = def.attn_density;
    if (!use.rank) c.rank = def.rank;
    if (!use.ffsplit) {
        c.ffsplit_mode = def.ffsplit_mode;
        c.ffsplit_heavy = def.ffsplit_heavy;
    }
    if (name == "dense") c.density = 1.0f;
    return c;
}

std::string method_knobs_text(const method_config& config) {
    const method_config def = method_default_config();
    const method_config c = method_config_for(config, config.name);
    std::string out;
    auto add = [&](const std::string& item) { out += (out.empty() ? "" : ", ") + item; };
    auto pct = [](float v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4g%%", 100.0 * static_cast<double>(v));
        return std::string(buf);
    };
    if (c.d_in >= 0.0f) add("d_in " + pct(c.d_in));
    if (c.d_down >= 0.0f) add("d_down " + pct(c.d_down));
    if (c.name == "dip-ca") add("gamma " + pct(c.gamma));
    if (c.pin_fraction != def.pin_fraction) add("pin " + pct(c.pin_fraction));
    if (c.attn_density != def.attn_density) add("attention " + pct(c.attn_density));
    if (c.rank != def.rank) add("rank " + std::to_string(c.rank));
    if (c.name == "ffsplit") add("split " + pct(c.ffsplit_heavy) + ", " + c.ffsplit_mode);
    return out;
}

result<std::unique_ptr<sparsity_method>> make_method(const method_config& cfg, const model& m,
                                                     const calibration* calib, const progress_fn& progress) {
    const method_entry* e = find_entry(cfg.name);
    if (!e) {
        std::string known;
        for (const std::string& n : method_names()) known += (known.empty() ? "" : ", ") + n;
        return error{"unknown sparsity method '" + cfg.name + "' (known: " + known + ")"};
    }
    if (!(cfg.density >= 0.0f && cfg.density <= 1.0f))
        return error{cfg.name + ": density " + std::to_string(cfg.density) + " is outside [0, 1]"};
    if (e->needs_calibration && !calib)
        return error{cfg.name + ": needs a calibration file (run `sparselens calibrate MODEL TEXT` first)"};
    if (!(cfg.pin_fraction >= 0.0f && cfg.pin_fraction <= 1.0f))
        return error{cfg.name + ": pin fraction " + std::to_string(cfg.pin_fraction) + " is outside [0, 1]"};
    // Heavy-hitter pinning wraps the method and takes the pinned neurons out of its budget.
    if (cfg.pin_fraction > 0.0f) return build_pinned(*e, cfg, m, calib);
    if (progress && e->build_with_progress) return e->build_with_progress(cfg, m, calib, progress);
    return e->build(cfg, m, calib);
}

}  // namespace sl
