// Mask helpers shared by every sparsity method and the engine: top-k, thresholds, densities.
#include "sparselens/core/sparsity.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <numeric>

#include "sparselens/kernels/select.h"

namespace sl {

bool index_mask::contains(int32_t i) const { return all || std::binary_search(idx.begin(), idx.end(), i); }

const char* proj_name(proj p) {
    static const char* names[proj_count] = {"q", "k", "v", "o", "gate", "up", "down"};
    return names[static_cast<int>(p)];
}

void layer_masks::reset() {
    for (index_mask* m : {&q_in, &k_in, &v_in, &o_in, &gate_in, &up_in, &neurons_pre, &neurons_post, &down_in})
        m->set_all();
}

int64_t density_to_k(float density, int64_t n) {
    if (!(density > 0.0f)) return 0;  // also NaN
    return std::clamp<int64_t>(static_cast<int64_t>(std::llround(static_cast<double>(density) * n)), 0, n);
}

namespace {

// An unsigned key whose order is the scores' order (larger score, larger key), with -0 equal to +0 and
// every NaN equal and below everything, as top_k_indices ranks them.
inline uint32_t rank_key(float f) {
    const bool nan = std::isnan(f);
    f += 0.0f;  // -0 -> +0
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint32_t key = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return nan ? 0u : key;  // a select, not a branch
}

}  // namespace

// The k best scores (larger first, NaN last, lower index first among equals) as ascending indices. This
// runs for several masks of every layer of every sparse token, between weight streams that have
// evicted its arrays from cache: it was 2.4 ms of a 30 ms llama-1b DIP token (one thread, perf), 2.7x
// its warm-cache time, so it reads the scores once and the keys three times instead of ~7 passes. The
// scores become integer keys of the same order (a loop the compiler vectorizes), counted per 11-bit
// prefix; the bucket holding the k-th best key is found from the top; a pass gathers that bucket's
// keys (a few percent of them for spread scores), which a 256-bucket count of their next 8 bits
// narrows to a handful for nth_element; the last pass takes every key above the k-th and, of the keys
// equal to it, the lowest-index ones that fill k. The gathers are kernels::select_* compresses: as
// scalar loops (store every element, advance the count by the test) they were 31 of 57 thousand TSC
// cycles for 8192 scores, histogram and keys 22. The second level replaced nth_element over the
// whole bucket (~100-300 keys, 20-25 cycles each, mispredicted branches) and let the first level shrink
// from 12 bits in two interleaved copies (32 KiB to clear, cold after every weight stream) to one 8 KiB
// table: 2048 and 5632 scores, cache evicted before each call (as in the engine), 16.5 and 28 thousand
// TSC cycles -> 13 and 21 (/tmp harness, medians of 300).
void top_k_indices(std::span<const float> scores, int64_t k, std::vector<int32_t>& out) {
    const int64_t n = static_cast<int64_t>(scores.size());
    k = std::clamp<int64_t>(k, 0, n);
    out.clear();
    if (k == 0) return;
    if (k == n) {
        out.resize(static_cast<size_t>(n));
        std::iota(out.begin(), out.end(), 0);
        return;
    }
    constexpr int k_bucket_bits = 11, k_shift = 32 - k_bucket_bits;
    constexpr int k_sub_bits = 8, k_sub_shift = k_shift - k_sub_bits;
    constexpr int64_t k_refine_above = 32;  // candidates worth a second count before nth_element
    thread_local std::vector<uint32_t> keys, cand;
    thread_local std::vector<uint32_t> hist;
    keys.resize(static_cast<size_t>(n));
    cand.resize(static_cast<size_t>(n));
    uint32_t* kp = keys.data();
    const float* sp = scores.data();
    for (int64_t i = 0; i < n; ++i) kp[i] = rank_key(sp[i]);
    hist.assign(size_t{1} << k_bucket_bits, 0u);
    uint32_t* h = hist.data();
    for (int64_t i = 0; i < n; ++i) ++h[kp[i] >> k_shift];
    int64_t above = 0;  // keys known to rank above the k-th: in buckets (then sub-buckets) above its own
    uint32_t b = (1u << k_bucket_bits) - 1;
    while (above + static_cast<int64_t>(h[b]) < k) above += h[b--];
    uint32_t* c = cand.data();
    int64_t nc = kernels::select_bucket(kp, n, k_shift, b, c);
    if (nc > k_refine_above) {
        uint32_t sub[1u << k_sub_bits] = {};
        constexpr uint32_t sub_mask = (1u << k_sub_bits) - 1;
        for (int64_t i = 0; i < nc; ++i) ++sub[c[i] >> k_sub_shift & sub_mask];
        uint32_t sb = sub_mask;
        while (above + static_cast<int64_t>(sub[sb]) < k) above += sub[sb--];
        int64_t m = 0;
        for (int64_t i = 0; i < nc; ++i) {  // in place: m <= i
            const uint32_t key = c[i];
            c[m] = key;
            m += (key >> k_sub_shift & sub_mask) == sb ? 1 : 0;
        }
        nc = m;
    }
    const int64_t need = k - above;  // 1 .. nc
    std::nth_element(c, c + (need - 1), c + nc, std::greater<>());
    const uint32_t kth = c[need - 1];
    int64_t above_kth = above, equal = 0;  // every key equal to the k-th is among the candidates
    for (int64_t i = 0; i < nc; ++i) {
        above_kth += c[i] > kth ? 1 : 0;
        equal += c[i] == kth ? 1 : 0;
    }
    int64_t ties = k - above_kth;  // how many keys equal to the k-th one are taken, lowest index first
    if (ties == equal) {  // every key equal to the k-th is taken (distinct scores): one compress
        out.resize(static_cast<size_t>(n));
        out.resize(static_cast<size_t>(kernels::select_at_least(kp, n, kth, out.data())));
        return;
    }
    out.resize(static_cast<size_t>(n));
    int32_t* o = out.data();
    for (int64_t i = 0; i < n; ++i) {
        const uint32_t key = kp[i];
        const int64_t tie = key == kth && ties > 0 ? 1 : 0;
        ties -= tie;
        *o = static_cast<int32_t>(i);
        o += (key > kth ? 1 : 0) | tie;
    }
    out.resize(static_cast<size_t>(k));
}

void abs_threshold_indices(std::span<const float> values, float t0, const float* tv, bool strict,
                           std::vector<int32_t>& out) {
    const int64_t n = static_cast<int64_t>(values.size());
    out.resize(static_cast<size_t>(n));
    out.resize(static_cast<size_t>(kernels::select_abs(values.data(), n, t0, tv, strict, out.data())));
}

void threshold_indices(std::span<const float> values, float threshold, std::vector<int32_t>& out) {
    abs_threshold_indices(values, threshold, nullptr, false, out);
}

void top_k_mask(std::span<const float> scores, int64_t k, index_mask& out) {
    if (k >= static_cast<int64_t>(scores.size())) {
        out.set_all();
        return;
    }
    out.all = false;
    top_k_indices(scores, k, out.idx);
}

void threshold_mask(std::span<const float> values, float threshold, index_mask& out) {
    out.all = false;
    threshold_indices(values, threshold, out.idx);
    if (out.idx.size() == values.size()) out.set_all();
}

void intersect_masks(const index_mask& a, const index_mask& b, index_mask& out) {
    if (a.all && b.all) {
        out.set_all();
        return;
    }
    if (a.all || b.all) {
        out = a.all ? b : a;
        return;
    }
    out.all = false;
    out.idx.clear();
    std::set_intersection(a.idx.begin(), a.idx.end(), b.idx.begin(), b.idx.end(), std::back_inserter(out.idx));
}

namespace {

// |a ∩ b ∩ c| for masks over [0, n). The explicit lists are sorted, so one merge walk counts the
// intersection in O(|a| + |b| + |c|); this runs for every layer of every sparse token.
int64_t intersect_count(const index_mask& a, const index_mask& b, const index_mask& c, int64_t n) {
    const std::vector<int32_t>* lists[3];
    int k = 0;
    for (const index_mask* p : {&a, &b, &c})
        if (!p->all) lists[k++] = &p->idx;
    if (k == 0) return n;
    if (k == 1) return static_cast<int64_t>(lists[0]->size());
    const std::vector<int32_t>& x = *lists[0];
    const std::vector<int32_t>& y = *lists[1];
    const std::vector<int32_t>* z = k == 3 ? lists[2] : nullptr;
    size_t i = 0, j = 0, l = 0;
    int64_t count = 0;
    while (i < x.size() && j < y.size()) {
        if (x[i] < y[j]) {
            ++i;
        } else if (y[j] < x[i]) {
            ++j;
        } else {
            if (z) {
                while (l < z->size() && (*z)[l] < x[i]) ++l;
                if (l == z->size()) break;
                count += (*z)[l] == x[i];
            } else {
                ++count;
            }
            ++i;
            ++j;
        }
    }
    return count;
}

}  // namespace

layer_density masks_density(const layer_masks& m, int64_t dim, int64_t hidden, bool up_first, int64_t o_dim) {
    layer_density d;
    d.d[static_cast<int>(proj::q)] = m.q_in.density(dim);
    d.d[static_cast<int>(proj::k)] = m.k_in.density(dim);
    d.d[static_cast<int>(proj::v)] = m.v_in.density(dim);
    d.d[static_cast<int>(proj::o)] = m.o_in.density(o_dim > 0 ? o_dim : dim);
    const index_mask all_mask;
    const float rows_first = m.neurons_pre.density(hidden);
    const float rows_second =
        hidden > 0 ? static_cast<float>(intersect_count(m.neurons_pre, m.neurons_post, all_mask, hidden)) / hidden : 1.0f;
    const float gate_rows = up_first ? rows_second : rows_first;
    const float up_rows = up_first ? rows_first : rows_second;
    d.d[static_cast<int>(proj::gate)] = gate_rows * m.gate_in.density(dim);
    d.d[static_cast<int>(proj::up)] = up_rows * m.up_in.density(dim);
    d.d[static_cast<int>(proj::down)] =
        hidden > 0 ? static_cast<float>(intersect_count(m.neurons_pre, m.neurons_post, m.down_in, hidden)) / hidden
                   : 1.0f;
    return d;
}

float layer_density::mlp() const {
    return (d[static_cast<int>(proj::gate)] + d[static_cast<int>(proj::up)] + d[static_cast<int>(proj::down)]) / 3.0f;
}

float layer_density::attention(int64_t q_dim, int64_t kv_dim) const {
    // q and o are both dim x q_dim, k and v dim x kv_dim.
    const double wq = static_cast<double>(q_dim), wkv = static_cast<double>(kv_dim);
    const double total = 2 * wq + 2 * wkv;
    return static_cast<float>((wq * d[0] + wkv * d[1] + wkv * d[2] + wq * d[3]) / total);
}

}  // namespace sl
