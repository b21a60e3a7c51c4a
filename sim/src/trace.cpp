// In-memory activation traces: creation, appending a token's masks with validation, heavy hitters.
#include <algorithm>
#include <numeric>

#include "sparselens/sim/trace.h"

namespace sl::sim {

namespace {

// Ascending and in range; the message says which stream and id broke it.
outcome check_ids(std::span<const uint32_t> ids, uint32_t n_units, const std::string& where) {
    for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] >= n_units)
            return error{where + ": unit id " + std::to_string(ids[i]) + " >= " + std::to_string(n_units) + " units"};
        if (i > 0 && ids[i] <= ids[i - 1])
            return error{where + ": unit ids are not strictly ascending at position " + std::to_string(i)};
    }
    return {};
}

}  // namespace

result<trace> trace_create(const model_shape& shape, const mlp_layout& layout, const std::string& label) {
    if (auto o = shape_validate(shape, "trace shape"); !o) return o.err();
    if (auto o = layout_validate(layout); !o) return error{"trace layout: " + o.message()};
    trace t;
    t.shape = shape;
    t.layout = layout;
    t.label = label;
    return t;
}

outcome trace_append_token(trace& t, std::span<const std::span<const uint32_t>> masks) {
    const uint32_t S = t.n_streams();
    if (masks.size() != S)
        return error{"trace: token " + std::to_string(t.n_tokens) + " has " + std::to_string(masks.size()) +
                     " masks, expected one per stream (" + std::to_string(S) + ")"};
    if (t.n_tokens == UINT32_MAX) return error{"trace: too many tokens"};
    size_t total = 0;
    for (uint32_t s = 0; s < S; ++s) {
        const std::string where = "trace: token " + std::to_string(t.n_tokens) + " stream " + std::to_string(s);
        if (auto o = check_ids(masks[s], t.stream_units(s), where); !o) return o;
        total += masks[s].size();
    }
    // Grow geometrically: reserving exactly this token's size reallocated and copied the whole trace on
    // every token (quadratic; ~8% of a GUI tune's engine thread was this memcpy).
    if (t.ids.capacity() < t.ids.size() + total) t.ids.reserve(std::max(2 * t.ids.capacity(), t.ids.size() + total));
    for (uint32_t s = 0; s < S; ++s) {
        t.ids.insert(t.ids.end(), masks[s].begin(), masks[s].end());
        t.offsets.push_back(t.ids.size());
    }
    ++t.n_tokens;
    return {};
}

outcome trace_append_token(trace& t, const std::vector<std::vector<uint32_t>>& masks) {
    std::vector<std::span<const uint32_t>> spans(masks.begin(), masks.end());
    return trace_append_token(t, std::span<const std::span<const uint32_t>>(spans));
}

outcome trace_validate(const trace& t, const std::string& origin) {
    if (auto o = shape_validate(t.shape, origin); !o) return o;
    if (auto o = layout_validate(t.layout); !o) return error{origin + ": " + o.message()};
    const uint32_t S = t.n_streams();
    const size_t rows = size_t{t.n_tokens} * S;
    if (t.offsets.size() != rows + 1 || t.offsets.front() != 0 || t.offsets.back() != t.ids.size())
        return error{origin + ": offsets do not match " + std::to_string(t.n_tokens) + " tokens x " +
                     std::to_string(S) + " streams"};
    for (size_t r = 0; r < rows; ++r) {
        if (t.offsets[r + 1] < t.offsets[r]) return error{origin + ": offsets decrease at row " + std::to_string(r)};
        const uint32_t s = static_cast<uint32_t>(r % S);
        const std::string where = origin + ": token " + std::to_string(r / S) + " stream " + std::to_string(s);
        if (auto o = check_ids(t.active(static_cast<uint32_t>(r / S), s), t.stream_units(s), where); !o) return o;
    }
    return {};
}

std::vector<uint32_t> trace_top_units(const trace& t, uint32_t stream, uint32_t n) {
    const uint32_t units = t.stream_units(stream);
    std::vector<uint32_t> count(units, 0);
    for (uint32_t tok = 0; tok < t.n_tokens; ++tok)
        for (uint32_t id : t.active(tok, stream)) ++count[id];
    std::vector<uint32_t> order(units);
    std::iota(order.begin(), order.end(), 0u);
    n = std::min(n, units);
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](uint32_t a, uint32_t b) { return count[a] != count[b] ? count[a] > count[b] : a < b; });
    order.resize(n);
    std::sort(order.begin(), order.end());
    return order;
}

}  // namespace sl::sim
