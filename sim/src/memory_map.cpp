// Byte accounting of a model at a bit-width, MLP unit kinds and layouts, and the DRAM allocation.
#include "sparselens/sim/memory_map.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sl::sim {

namespace {

// Which of gate (1), up (2), down (4) a unit kind covers.
uint32_t coverage(unit_kind k) {
    switch (k) {
        case unit_kind::neuron_bundle:
            return 1 | 2 | 4;
        case unit_kind::up_down_bundle:
            return 2 | 4;
        case unit_kind::gate_row:
            return 1;
        case unit_kind::up_row:
            return 2;
        case unit_kind::down_column:
            return 4;
        case unit_kind::input_column_pair:
            return 1 | 2;
        case unit_kind::up_column:
            return 2;
        case unit_kind::gate_column:
            return 1;
        case unit_kind::split_heavy:
        case unit_kind::split_light:
            return 0;  // parts of every matrix, by neuron: layout_validate checks split layouts whole
    }
    return 0;
}

bool split_kind(unit_kind k) { return k == unit_kind::split_heavy || k == unit_kind::split_light; }

__extension__ typedef unsigned __int128 u128;  // exact proportional splits of 64-bit byte counts

bool column_kind(unit_kind k) {
    return k == unit_kind::input_column_pair || k == unit_kind::up_column || k == unit_kind::gate_column;
}

std::string gib(uint64_t b) {
    std::ostringstream os;
    os.precision(3);
    os << std::fixed << static_cast<double>(b) / 1e9 << " GB";
    return os.str();
}

}  // namespace

quant_format quant_default(uint32_t bits) {
    quant_format q;
    q.bits = bits;
    q.group_size = bits >= 16 ? 0 : 32;
    q.scale_bits = 16;
    return q;
}

outcome quant_validate(const quant_format& q) {
    if (q.bits < 1 || q.bits > 32) return error{"bits must be in [1, 32] (got " + std::to_string(q.bits) + ")"};
    if (q.embedding_bits > 32) return error{"embedding bits must be in [0, 32]"};
    if (q.group_size > (1u << 20)) return error{"quantization group size must be <= 1048576"};
    if (q.group_size > 0 && (q.scale_bits < 1 || q.scale_bits > 32)) return error{"scale bits must be in [1, 32]"};
    return {};
}

uint64_t weight_bytes(uint64_t n, uint32_t bits, const quant_format& q) {
    uint64_t b = (n * bits + 7) / 8;
    if (q.group_size > 0) {
        const uint64_t groups = (n + q.group_size - 1) / q.group_size;
        b += (groups * q.scale_bits + 7) / 8;
    }
    return b;
}

const char* unit_kind_name(unit_kind k) {
    switch (k) {
        case unit_kind::neuron_bundle:
            return "neuron_bundle";
        case unit_kind::up_down_bundle:
            return "up_down_bundle";
        case unit_kind::gate_row:
            return "gate_row";
        case unit_kind::up_row:
            return "up_row";
        case unit_kind::down_column:
            return "down_column";
        case unit_kind::input_column_pair:
            return "input_column_pair";
        case unit_kind::up_column:
            return "up_column";
        case unit_kind::gate_column:
            return "gate_column";
        case unit_kind::split_heavy:
            return "split_heavy";
        case unit_kind::split_light:
            return "split_light";
    }
    return "?";
}

bool unit_kind_parse(const std::string& name, unit_kind& out) {
    for (uint8_t i = 0; i < unit_kind_count_all; ++i) {
        if (name == unit_kind_name(static_cast<unit_kind>(i))) {
            out = static_cast<unit_kind>(i);
            return true;
        }
    }
    return false;
}

uint32_t unit_kind_pieces(unit_kind k) {
    switch (k) {
        case unit_kind::neuron_bundle:
            return 3;
        case unit_kind::up_down_bundle:
        case unit_kind::input_column_pair:
            return 2;
        default:
            return 1;
    }
}

uint64_t unit_kind_piece_weights(unit_kind k, const model_shape& s) {
    return column_kind(k) ? static_cast<uint64_t>(s.hidden_dim) : static_cast<uint64_t>(s.dim);
}

uint32_t unit_kind_units(unit_kind k, const model_shape& s) {
    return static_cast<uint32_t>(column_kind(k) ? s.dim : s.hidden_dim);
}

uint64_t unit_kind_bytes(unit_kind k, const model_shape& s, const quant_format& q) {
    return unit_kind_pieces(k) * weight_bytes(unit_kind_piece_weights(k, s), q.bits, q);
}

uint32_t group_units(const mlp_layout& l, unit_kind k, const model_shape& s) {
    if (k == unit_kind::split_heavy) return static_cast<uint32_t>(l.split.heavy);
    if (k == unit_kind::split_light) return 1;
    return unit_kind_units(k, s);
}

uint64_t group_unit_bytes(const mlp_layout& l, unit_kind k, const model_shape& s, const quant_format& q) {
    if (k == unit_kind::split_heavy) return unit_kind_bytes(unit_kind::neuron_bundle, s, q);
    if (k != unit_kind::split_light) return unit_kind_bytes(k, s, q);
    const uint64_t dim = static_cast<uint64_t>(s.dim);
    const uint64_t light = static_cast<uint64_t>(std::max(0, s.hidden_dim - l.split.heavy));
    if (l.split.q4) return 3 * light * ((dim + 31) / 32) * 18;
    const uint64_t r = static_cast<uint64_t>(l.split.rank);
    if (r == 0) return 0;
    auto wb = [&](uint64_t n) { return weight_bytes(n, q.bits, q); };
    return 2 * (light * wb(r) + r * wb(dim)) + dim * wb(r) + r * wb(light);
}

mlp_layout split_layout(const mlp_split& split) {
    mlp_layout l;
    l.split = split;
    l.groups = split.heavy > 0 ? std::vector<unit_kind>{unit_kind::split_heavy, unit_kind::split_light}
                               : std::vector<unit_kind>{unit_kind::split_light};
    return l;
}

outcome layout_validate(const mlp_layout& l) {
    if (l.groups.empty() || l.groups.size() > 4) return error{"an MLP layout needs 1 to 4 unit groups"};
    if (std::any_of(l.groups.begin(), l.groups.end(), split_kind)) {
        if (l.split.heavy < 0 || l.split.rank < 0 || (l.split.q4 && l.split.rank != 0))
            return error{"a split MLP layout needs heavy >= 0 and, for svd, rank >= 0 (q4 has no rank)"};
        if (l.groups != split_layout(l.split).groups)
            return error{"a split MLP layout is split_heavy,split_light (split_light alone with no heavy neuron)"};
        return {};
    }
    uint32_t covered = 0;
    for (unit_kind k : l.groups) {
        if (static_cast<uint8_t>(k) >= unit_kind_count) return error{"unknown unit kind in MLP layout"};
        if (covered & coverage(k))
            return error{std::string("MLP layout covers a matrix twice (") + unit_kind_name(k) +
                         " overlaps an earlier group)"};
        covered |= coverage(k);
    }
    return {};
}

// "ffsplit:HEAVY:svd:RANK" or "ffsplit:HEAVY:q4".
result<mlp_layout> split_layout_parse(const std::string& text) {
    const auto bad = [&] {
        return error{"MLP layout '" + text + "': expected ffsplit:HEAVY:svd:RANK or ffsplit:HEAVY:q4"};
    };
    std::vector<std::string> parts;
    std::stringstream ss(text);
    for (std::string part; std::getline(ss, part, ':');) parts.push_back(part);
    const auto count = [](const std::string& t, int32_t& out) {
        if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return false;
        out = std::stoi(t);
        return true;
    };
    mlp_split sp;
    if (parts.size() < 3 || !count(parts[1], sp.heavy)) return bad();
    if (parts.size() == 3 && parts[2] == "q4") {
        sp.q4 = true;
    } else if (parts.size() != 4 || parts[2] != "svd" || !count(parts[3], sp.rank)) {
        return bad();
    }
    return split_layout(sp);
}

result<mlp_layout> layout_parse(const std::string& text) {
    mlp_layout l;
    if (text.rfind("ffsplit:", 0) == 0) return split_layout_parse(text);
    if (text == "bundle" || text == "dense") {
        l.groups = {unit_kind::neuron_bundle};
    } else if (text == "dip") {
        l.groups = {unit_kind::input_column_pair, unit_kind::down_column};
    } else if (text == "cats") {
        l.groups = {unit_kind::up_down_bundle};
    } else {
        l.groups.clear();
        std::stringstream ss(text);
        std::string part;
        while (std::getline(ss, part, ',')) {
            unit_kind k{};
            if (!unit_kind_parse(part, k))
                return error{"unknown MLP layout '" + text + "' (use bundle, dip, cats or unit kinds such as " +
                             "input_column_pair,down_column)"};
            l.groups.push_back(k);
        }
    }
    if (auto o = layout_validate(l); !o) return error{"MLP layout '" + text + "': " + o.message()};
    return l;
}

std::string layout_name(const mlp_layout& l) {
    if (std::any_of(l.groups.begin(), l.groups.end(), split_kind))
        return "ffsplit:" + std::to_string(l.split.heavy) +
               (l.split.q4 ? std::string(":q4") : ":svd:" + std::to_string(l.split.rank));
    std::string s;
    for (unit_kind k : l.groups) s += (s.empty() ? "" : ",") + std::string(unit_kind_name(k));
    return s;
}

uint64_t memory_map::resident_bytes() const {
    return attention_bytes + embedding_bytes + classifier_bytes + norm_bytes + kv_cache_bytes + mlp_static_bytes +
           extra_resident_bytes;
}

uint64_t memory_map::per_token_static_read_bytes() const {
    const uint32_t eb = quant.embedding_bits ? quant.embedding_bits : quant.bits;
    const uint64_t classifier = shape.tied_embeddings ? embedding_bytes : classifier_bytes;
    return attention_bytes + classifier + weight_bytes(static_cast<uint64_t>(shape.dim), eb, quant) + norm_bytes +
           kv_cache_bytes + mlp_static_bytes + extra_resident_bytes;
}

uint64_t memory_map::weight_bytes_total() const {
    return attention_bytes + embedding_bytes + classifier_bytes + norm_bytes + mlp_static_bytes + mlp_dynamic_bytes;
}

result<memory_map> memory_map_build(const model_shape& s, const quant_format& q, const mlp_layout& l,
                                    uint32_t context_tokens, uint64_t extra_resident_bytes) {
    if (auto o = shape_validate(s, s.name.empty() ? "model shape" : s.name); !o) return o.err();
    if (auto o = quant_validate(q); !o) return o.err();
    if (auto o = layout_validate(l); !o) return o.err();
    if (l.split.heavy > s.hidden_dim || l.split.rank > s.dim || l.split.rank > s.hidden_dim)
        return error{"split MLP layout '" + layout_name(l) + "' exceeds the shape (hidden " +
                     std::to_string(s.hidden_dim) + ", dim " + std::to_string(s.dim) + ")"};
    memory_map mm;
    mm.shape = s;
    mm.quant = q;
    mm.layout = l;
    mm.context_tokens = context_tokens;
    mm.extra_resident_bytes = extra_resident_bytes;
    const uint64_t L = static_cast<uint64_t>(s.n_layers);
    const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
    const uint64_t kv = static_cast<uint64_t>(s.kv_dim());
    const uint64_t row_dim = weight_bytes(dim, q.bits, q);
    const uint64_t qd = static_cast<uint64_t>(s.q_dim());
    // wq, wk, wv: rows of `dim` inputs; wo: `dim` rows of q_dim inputs (q_dim = dim unless heads are wider)
    mm.attention_bytes = L * ((qd + kv + kv) * row_dim + dim * weight_bytes(qd, q.bits, q));
    const uint32_t eb = q.embedding_bits ? q.embedding_bits : q.bits;
    mm.embedding_bytes = static_cast<uint64_t>(s.vocab_size) * weight_bytes(dim, eb, q);
    mm.classifier_bytes = s.tied_embeddings ? 0 : mm.embedding_bytes;
    mm.norm_bytes = (2 * L + 1) * dim * 2;
    mm.kv_cache_bytes = 2 * L * kv * context_tokens * 2;

    uint32_t covered = 0;
    if (std::any_of(l.groups.begin(), l.groups.end(), split_kind)) covered = 1 | 2 | 4;  // the split holds it all
    for (unit_kind k : l.groups) {
        covered |= coverage(k);
        unit_group_info g;
        g.kind = k;
        g.units_per_layer = group_units(l, k, s);
        g.unit_bytes = group_unit_bytes(l, k, s, q);
        mm.groups.push_back(g);
        mm.mlp_dynamic_bytes += L * g.layer_bytes();
    }
    const uint64_t gate_or_up = hidden * row_dim;                 // [hidden, dim]
    const uint64_t down = dim * weight_bytes(hidden, q.bits, q);  // [dim, hidden]
    if (!(covered & 1)) mm.mlp_static_bytes += L * gate_or_up;
    if (!(covered & 2)) mm.mlp_static_bytes += L * gate_or_up;
    if (!(covered & 4)) mm.mlp_static_bytes += L * down;
    return mm;
}

outcome memory_map_set_stream_unit_bytes(memory_map& mm, std::vector<uint64_t> bytes) {
    if (!bytes.empty() && bytes.size() != mm.n_streams())
        return error{"unit sizes: " + std::to_string(bytes.size()) + " given for " + std::to_string(mm.n_streams()) +
                     " streams"};
    if (std::any_of(bytes.begin(), bytes.end(), [](uint64_t b) { return b == 0; }))
        return error{"unit sizes must be positive"};
    mm.stream_unit_bytes = std::move(bytes);
    mm.mlp_dynamic_bytes = 0;
    for (uint32_t s = 0; s < mm.n_streams(); ++s) mm.mlp_dynamic_bytes += uint64_t{mm.stream_group(s).units_per_layer} * mm.unit_bytes_of(s);
    return {};
}

result<allocation> allocate(const memory_map& mm, uint64_t dram_bytes, std::span<const double> layer_weights) {
    const uint32_t L = static_cast<uint32_t>(mm.shape.n_layers);
    const uint32_t G = static_cast<uint32_t>(mm.groups.size());
    if (!layer_weights.empty() && layer_weights.size() != L)
        return error{"layer weights: " + std::to_string(layer_weights.size()) + " values for " + std::to_string(L) +
                     " layers"};
    double wmax = 0;
    for (double w : layer_weights) {
        if (!std::isfinite(w) || w < 0) return error{"layer weights must be finite and >= 0"};
        wmax = std::max(wmax, w);
    }
    if (!layer_weights.empty() && wmax <= 0) return error{"layer weights are all zero"};

    allocation a;
    a.dram_bytes = dram_bytes;
    a.resident_bytes = mm.resident_bytes();
    a.layer_cache_bytes.assign(L, 0);
    a.stream_capacity.assign(size_t{L} * G, 0);
    if (a.resident_bytes > dram_bytes) {
        a.fits = false;
        a.static_overflow_bytes = a.resident_bytes - dram_bytes;
        a.message = "the resident part (attention, embeddings, norms, KV cache, static MLP) needs " +
                    gib(a.resident_bytes) + " but only " + gib(dram_bytes) +
                    " of DRAM is available: " + gib(a.static_overflow_bytes) +
                    " stream from flash every token and no MLP cache is left";
        return a;
    }
    a.cache_bytes = dram_bytes - a.resident_bytes;

    // Integer weights so that equal weights split exactly like an integer division.
    std::vector<uint64_t> w(L, 1);
    if (!layer_weights.empty())
        for (uint32_t l = 0; l < L; ++l) w[l] = static_cast<uint64_t>(std::llround(layer_weights[l] / wmax * 1e12));
    // Bytes of all units of stream (l, g), per-layer unit sizes included.
    auto stream_bytes = [&](uint32_t l, uint32_t gi) {
        return uint64_t{mm.groups[gi].units_per_layer} * mm.unit_bytes_of(l * G + gi);
    };
    std::vector<uint64_t> layer_need(L, 0);
    for (uint32_t l = 0; l < L; ++l)
        for (uint32_t gi = 0; gi < G; ++gi) layer_need[l] += stream_bytes(l, gi);

    // Water-filling: proportional shares, capped at what a layer can hold, excess handed on.
    uint64_t remaining = a.cache_bytes;
    std::vector<bool> open(L, true);
    for (uint32_t round = 0; round <= L && remaining > 0; ++round) {
        u128 wsum = 0;
        for (uint32_t l = 0; l < L; ++l)
            if (open[l]) wsum += w[l];
        if (wsum == 0) break;
        uint64_t handed = 0;
        bool capped = false;
        for (uint32_t l = 0; l < L; ++l) {
            if (!open[l]) continue;
            uint64_t share = static_cast<uint64_t>(static_cast<u128>(remaining) * w[l] / wsum);
            if (a.layer_cache_bytes[l] + share >= layer_need[l]) {
                share = layer_need[l] - a.layer_cache_bytes[l];
                open[l] = false;
                capped = true;
            }
            a.layer_cache_bytes[l] += share;
            handed += share;
        }
        remaining -= handed;
        if (!capped) break;
    }

    for (uint32_t l = 0; l < L; ++l) {
        for (uint32_t gi = 0; gi < G; ++gi) {
            const uint64_t ub = mm.unit_bytes_of(l * G + gi);
            const uint64_t bytes =
                static_cast<uint64_t>(static_cast<u128>(a.layer_cache_bytes[l]) * stream_bytes(l, gi) / layer_need[l]);
            const uint64_t units = std::min<uint64_t>(mm.groups[gi].units_per_layer, bytes / ub);
            a.stream_capacity[size_t{l} * G + gi] = static_cast<uint32_t>(units);
            a.used_cache_bytes += units * ub;
        }
    }
    return a;
}

}  // namespace sl::sim
