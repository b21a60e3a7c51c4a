// Blocked GEMMs for prefill. Block-quantized weights: every token's activations are quantized once,
// each thread decodes its weight rows 16 at a time into an int8 panel (gemm_internal.h) kept in L2
// and runs every token past it, so nibbles and K-quant scales are unpacked once per gemm instead of
// once per (row, token). F16/BF16: a panel of 16 (AVX2) or 32 (AVX-512) rows widened to f32 one column
// chunk at a time, every token of the chunk passing it, so each weight is decoded once per 128 tokens;
// the portable path widens 8 rows against transposed activations.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include <omp.h>

#include "dense_internal.h"
#include "gemm_internal.h"
#include "quant_unpack.h"

namespace sl::kernels::detail {
namespace {

// Types whose scales (and minima) change every 16 columns; the others are constant per 32, and a
// group of 32 halves the per-group float work.
bool scales_per_16(dtype t) {
    return t == dtype::q2_k || t == dtype::q3_k || t == dtype::q6_k;
}

// The int8 panel kernel of the active ISA and the panel format it reads.
struct int8_kernel {
    gemm_panel_fn fn;
    bool maddubs;    // offset / wide panels and group-major tokens (AVX2); otherwise plus_128
    bool amx = false;  // also reads gemm_tokens::qa
};

std::atomic<bool>& amx_switch() {
    static std::atomic<bool> on{true};
    return on;
}

int8_kernel active_int8_kernel() {
    switch (active_isa()) {
        case isa::avx512:
            if (gemm_panel_fn f = amx_switch().load(std::memory_order_relaxed) ? gemm_panel_amx() : nullptr)
                return {f, false, true};
            if (gemm_panel_fn f = gemm_panel_avx512()) return {f, false};
            return {gemm_panel_avx2(), true};
        case isa::avx2:
            return {gemm_panel_avx2(), true};
        case isa::scalar:
            break;
    }
    return {gemm_panel_scalar(), false};
}

// The panel encoding for the AVX2 kernels. Bounds: activations |qs| <= 128 (127 but for denormal
// inputs) and a maddubs pair sum u0 * x0 + u1 * x1 must stay below 2^15 (the instruction
// saturates), so the offset format needs u = q + offset <= 127; `steps16` pair sums of one lane are
// then added in int16 while steps16 * 2 * 128 * u_max < 2^15. Types whose q spans int8 go wide.
struct avx2_encoding {
    panel_format format;
    int offset;
    int steps16;
};

avx2_encoding encoding_for(dtype t, int group) {
    int lo = -128, hi = 127;  // the decoded q range of each type (quant_unpack.cpp)
    switch (t) {
        case dtype::q4_0:
            lo = -8, hi = 7;
            break;
        case dtype::q4_1:
        case dtype::q4_k:
            lo = 0, hi = 15;
            break;
        case dtype::q5_0:
            lo = -16, hi = 15;
            break;
        case dtype::q5_1:
        case dtype::q5_k:
            lo = 0, hi = 31;
            break;
        case dtype::q2_k:
            lo = 0, hi = 3;
            break;
        case dtype::q3_k:
            lo = -4, hi = 3;
            break;
        case dtype::q6_k:
            lo = -32, hi = 31;
            break;
        default:
            break;  // Q8_0, IQ4_NL (-127..113), IQ4_XS
    }
    const int offset = std::max(0, -lo), umax = hi + offset;
    if (umax > 127) return {panel_format::wide, 0, 1};
    int steps = 1;
    while (2 * steps <= group / 4 && 2 * steps * 2 * 128 * umax <= 32767) steps *= 2;
    return {panel_format::offset, offset, steps};
}

// Quantized tokens and their per-group side arrays; grows only. Owned by the calling thread, filled
// by all threads of the gemm. The engine multiplies one x by several matrices (q/k/v, gate/up), so
// the last x quantized is kept: a gemm whose x has the same bits and the same activation kind reuses
// its quantization (comparing 4 bytes per element is far cheaper than quantizing them again).
struct token_scratch {
    std::vector<int8_t> qs;
    std::vector<float> d, s, dx, xm, src;
    std::vector<int32_t> corr;
    std::vector<int16_t> qg;  // AVX2 kernels: group-major copy of qs (int8 or int16 values)
    std::vector<int8_t> qa;   // AMX: gemm_tokens::qa
    std::vector<gemm_group_side> side;
    act_kind kind = act_kind::q8_f32;
    int64_t n_src = -1, cols_src = -1;
    // What the per-token pass last derived from qs (the group sums or the AVX2 kernels' packing, and the
    // AMX tiles), so that a gemm on a reused x which needs the same skips the pass.
    struct derived {
        int group = 0, offset = 0;
        bool maddubs = false, wide = false, amx = false;
        bool operator==(const derived&) const = default;
    };
    derived made;

    void reserve(int64_t n, int64_t cols, int group) {
        auto grow = [](auto& v, int64_t size) {
            if (v.size() < static_cast<size_t>(size)) v.resize(static_cast<size_t>(size));
        };
        grow(qs, n * cols);
        grow(d, n * (cols / 32));
        grow(s, n * (cols / 32));
        grow(dx, n * (cols / group));
        grow(xm, n * (cols / group));
        grow(corr, n * (cols / group));
    }

    void reserve_grouped(int64_t n, int64_t cols, int group) {
        if (qg.size() < static_cast<size_t>(n * cols)) qg.resize(static_cast<size_t>(n * cols));
        if (side.size() < static_cast<size_t>(n * (cols / group))) side.resize(static_cast<size_t>(n * (cols / group)));
    }

    // Token t of n into the AVX2 kernels' group-major arrays.
    void pack(int64_t t, int64_t n, int64_t cols, int group, const avx2_encoding& enc) {
        gemm_pack_token_avx2(qs.data() + t * cols, d.data() + t * (cols / 32), cols, group, enc.offset,
                             enc.format == panel_format::wide, t, n, qg.data(), side.data());
    }

    // Token t (of a whole 16) into the AMX tiles' order.
    void pack_tiles(int64_t t, int64_t cols, int group) {
        const int64_t ng = cols / group;
        int8_t* dst = qa.data() + (t / 16) * ng * 16 * group + (t % 16) * group;
        for (int64_t g = 0; g < ng; ++g) std::memcpy(dst + g * 16 * group, qs.data() + t * cols + g * group, group);
    }

    // True when qs/d/s already hold x quantized as `k`; otherwise remembers x as what they will hold.
    bool reuse(act_kind k, const float* x, int64_t n, int64_t cols) {
        const size_t count = static_cast<size_t>(n * cols);
        if (k == kind && n == n_src && cols == cols_src && std::memcmp(src.data(), x, count * sizeof(float)) == 0)
            return true;
        src.assign(x, x + count);
        made = {};
        kind = k;
        n_src = n;
        cols_src = cols;
        return false;
    }

    // Token t of x quantized as the gemv does.
    void quantize(const kernel_table& kt, dtype wt, const float* x, int64_t t, int64_t cols) {
        const int64_t nb = cols / 32;
        quantize_act_for(wt, kt, x + t * cols, cols, qs.data() + t * cols, d.data() + t * nb, s.data() + t * nb);
    }

    // Token t's group sums (exact) and scales.
    void sums(int64_t t, int64_t cols, int group) {
        const int64_t ng = cols / group;
        const int8_t* q = qs.data() + t * cols;
        const float* dt = d.data() + t * (cols / 32);
        for (int64_t g = 0; g < ng; ++g) {
            int32_t sum = 0;
            for (int i = 0; i < group; ++i) sum += q[g * group + i];
            const float dg = dt[g * group / 32];
            dx[static_cast<size_t>(t * ng + g)] = dg;
            xm[static_cast<size_t>(t * ng + g)] = dg * static_cast<float>(sum);
            corr[static_cast<size_t>(t * ng + g)] = 128 * sum;
        }
    }
};

token_scratch& thread_tokens() {
    thread_local token_scratch s;
    return s;
}

// One thread's decoded panel; grows only.
struct panel_buffer {
    std::vector<uint8_t> q;
    std::vector<int8_t> rows;  // the panel's rows decoded row-major, [16][cols]
    std::vector<float> a, b, ba, bb;

    // Decodes rows [r0, r0 + nr) of w (nr <= 16) into the panel layout: first each row into `rows`
    // (sequential writes), then the interleaved q one 64-byte line at a time (scattering 4-byte words
    // straight into the panel touched every line of it once per row).
    // direct: the AVX-512 kernels (plus_128, enc null) may also use the AVX2 decoder below.
    gemm_panel fill(const tensor_view& w, int64_t r0, int nr, int group, const avx2_encoding* enc,
                    bool direct = false) {
        const quant_traits& qt = quant_info(w.type);
        const int64_t cols = w.cols, be = dtype_block_elems(w.type), bytes = dtype_block_bytes(w.type);
        const int64_t ng = cols / group;
        q.resize(static_cast<size_t>(cols * k_panel_rows * (enc && enc->format == panel_format::wide ? 2 : 1)));
        if (enc) {  // AVX2: the common types decode straight into the panel
            a.resize(static_cast<size_t>(ng * k_panel_rows));
            b.resize(static_cast<size_t>(ng * k_panel_rows));
            float* bp = qt.has_min ? b.data() : nullptr;
            if (gemm_fill_panel_avx2(w, r0, nr, group, q.data(), a.data(), bp))
                return {q.data(), a.data(), bp, cols, group, enc->format, enc->offset, enc->steps16};
        }
        // AVX-512: Q8_0 by gathers (gemm_avx512.cpp); Q4_0, Q4_K and Q6_K through the same direct decoder
        // (offset format: the type's raw bits, q + offset), each byte + (128 - offset) as it is stored,
        // which is q + 128 exactly (the layouts are the same).
        // The unpack and interleave below took a fifth of a Q4_0 prefill on the Xeon VM.
        if (direct && w.type == dtype::q8_0) {
            a.resize(static_cast<size_t>(ng * k_panel_rows));
            gemm_fill_q8_0_avx512(w, r0, nr, q.data(), a.data());
            return {q.data(), a.data(), nullptr, cols, group, panel_format::plus_128, 128, 1};
        }
        if (const avx2_encoding e = encoding_for(w.type, group); direct && e.format == panel_format::offset) {
            a.resize(static_cast<size_t>(ng * k_panel_rows));
            b.resize(static_cast<size_t>(ng * k_panel_rows));
            float* bp = qt.has_min ? b.data() : nullptr;
            if (gemm_fill_panel_avx2(w, r0, nr, group, q.data(), a.data(), bp, static_cast<uint8_t>(128 - e.offset)))
                return {q.data(), a.data(), bp, cols, group, panel_format::plus_128, 128, 1};
        }
        rows.resize(static_cast<size_t>(cols * k_panel_rows));
        // Rows past the matrix: q = 0, a = b = 0; they compute zeros nobody stores.
        if (nr < k_panel_rows) std::fill(rows.begin() + nr * cols, rows.end(), int8_t{0});
        a.assign(static_cast<size_t>(ng * k_panel_rows), 0.0f);
        b.assign(static_cast<size_t>(ng * k_panel_rows), 0.0f);
        ba.resize(static_cast<size_t>(be / 16));
        bb.resize(static_cast<size_t>(be / 16));
        for (int i = 0; i < nr; ++i) {
            const uint8_t* row = w.row(r0 + i);
            for (int64_t blk = 0; blk < cols / be; ++blk) {
                const int64_t c0 = blk * be;
                qt.unpack(row + blk * bytes, rows.data() + i * cols + c0, ba.data(), bb.data());
                for (int64_t j = 0; j < be / group; ++j) {
                    const size_t at = static_cast<size_t>(((c0 / group) + j) * k_panel_rows + i);
                    a[at] = ba[static_cast<size_t>(j * group / 16)];
                    b[at] = bb[static_cast<size_t>(j * group / 16)];
                }
            }
        }
        const float* bp = qt.has_min ? b.data() : nullptr;
        if (enc) {
            gemm_pack_panel_avx2(rows.data(), cols, enc->format, enc->offset, q.data());
            return {q.data(), a.data(), bp, cols, group, enc->format, enc->offset, enc->steps16};
        }
        // q ^ 0x80 per byte is q + 128 as unsigned.
        for (int64_t c4 = 0; c4 < cols / 4; ++c4) {
            uint32_t line[k_panel_rows];
            for (int i = 0; i < k_panel_rows; ++i) {
                std::memcpy(&line[i], rows.data() + i * cols + 4 * c4, 4);
                line[i] ^= 0x80808080u;
            }
            std::memcpy(q.data() + c4 * 64, line, 64);
        }
        return {q.data(), a.data(), bp, cols, group, panel_format::plus_128, 128, 1};
    }
};

panel_buffer& thread_panel() {
    thread_local panel_buffer p;
    return p;
}

// The caller's transposed activations (filled by all threads of a gemm_float) and each thread's
// widened rows; grow only.
std::vector<float>& thread_xt() {
    thread_local std::vector<float> v;
    return v;
}
std::vector<float>& thread_wide_rows() {
    thread_local std::vector<float> v;
    return v;
}
std::vector<float>& thread_packed_x() {
    thread_local std::vector<float> v;
    return v;
}

}  // namespace

namespace {

// Tokens per call of gemm_float_panels (gemm_float).
constexpr int64_t k_float_token_block = 128;

// AVX2 and AVX-512: panels of R rows (16: the AVX2 kernel's two ymm; 32: the AVX-512 kernel's two
// zmm, as two 16-row halves kc * 16 floats apart) widened and transposed one column chunk at a time,
// the chunk of every token's x (n * k_chunk floats) kept in L2 while each thread's panels pass it; y
// holds the accumulators between chunks (stored and reloaded exactly, so each output is still one FMA
// chain in column order). The last panel, when partial, accumulates in a scratch of R rows per token.
void gemm_float_panels(const tensor_view& w, const float* x, int64_t n, float* y, int nt, bool avx512) {
    const int R = avx512 ? k_float_halves * k_panel_rows : k_panel_rows;
    const int64_t k = w.cols, panels = (w.rows + R - 1) / R;
    nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nt, panels)));
    // ~128 KiB of x per chunk, in multiples of 8 columns.
    const int64_t k_chunk = std::clamp<int64_t>(128 * 1024 / 4 / n / 8 * 8, 64, 512);

#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int th = omp_get_thread_num(), nth = omp_get_num_threads();
        const int64_t p0 = panels * th / nth, p1 = panels * (th + 1) / nth;
        std::vector<float>& wt = thread_wide_rows();
        if (wt.size() < static_cast<size_t>(k_chunk * R)) wt.resize(static_cast<size_t>(k_chunk * R));
        std::vector<float>& part = thread_xt();  // the partial panel's rows, [n][R]
        const int last_nr = static_cast<int>(w.rows - (panels - 1) * R);
        if (p1 == panels && last_nr < R && part.size() < static_cast<size_t>(n * R))
            part.resize(static_cast<size_t>(n * R));
        std::vector<float>& xp = thread_packed_x();  // AVX-512: the chunk's x in token tiles
        if (avx512 && xp.size() < static_cast<size_t>(n * k_chunk)) xp.resize(static_cast<size_t>(n * k_chunk));
        for (int64_t c0 = 0; c0 < k; c0 += k_chunk) {
            const int64_t c1 = std::min(k, c0 + k_chunk);
            if (avx512) gemm_float_pack_avx512(x + c0, k, n, c1 - c0, xp.data());
            const auto kernel = [&](float* out, int64_t ys, const gemm_prefetch_rows& next) {
                if (avx512)
                    gemm_float_panel_avx512(wt.data(), c1 - c0, xp.data(), n, out, ys, c0 == 0, next);
                else
                    gemm_float_panel_avx2(wt.data(), c1 - c0, x + c0, k, n, out, ys, c0 == 0, next);
            };
            for (int64_t pi = p0; pi < p1; ++pi) {
                const int64_t r0 = pi * R;
                const int nr = static_cast<int>(std::min<int64_t>(R, w.rows - r0));
                for (int h = 0; h < R / k_panel_rows; ++h)
                    gemm_widen_panel_avx2(w, r0 + h * k_panel_rows, std::clamp(nr - h * k_panel_rows, 0, k_panel_rows),
                                          c0, c1, wt.data() + h * (c1 - c0) * k_panel_rows);
                // What the next widen reads: the next panel's rows of this chunk, or the first
                // panel's rows of the next chunk.
                gemm_prefetch_rows next;
                const int64_t nc0 = pi + 1 < p1 ? c0 : c1, nc1 = pi + 1 < p1 ? c1 : std::min(k, c1 + k_chunk);
                const int64_t nr0 = pi + 1 < p1 ? r0 + R : p0 * R;
                if (nc0 < nc1)
                    next = {w.row(nr0) + 2 * nc0, w.row_bytes(), 2 * (nc1 - nc0),
                            static_cast<int>(std::min<int64_t>(R, w.rows - nr0))};
                if (nr == R)
                    kernel(y + r0, w.rows, next);
                else
                    kernel(part.data(), R, next);
            }
        }
        if (p1 == panels && last_nr < R)
            for (int64_t t = 0; t < n; ++t)
                std::memcpy(y + t * w.rows + (panels - 1) * R, part.data() + t * R,
                            static_cast<size_t>(last_nr) * sizeof(float));
    }
}

}  // namespace

void gemm_float(const tensor_view& w, const float* x, int64_t n, float* y, int nt) {
    if (active_isa() != isa::scalar) {
        // Tokens in blocks of k_float_token_block: the panels keep their accumulators in y between
        // column chunks, so y (rows x tokens) is re-read once per chunk, and past a few hundred tokens
        // it no longer stays in cache. F16 llama-1b prefill of 1000 tokens in one batch, 2 threads:
        // 39 tok/s unblocked, 64 / 67 / 66 / 66 / 66 / 63 / 46 with blocks of 64 / 96 / 128 / 160 / 192 /
        // 256 / 512 (128 tokens: 72 either way). Each output is still one FMA chain in column order.
        constexpr int64_t tb = k_float_token_block;
        for (int64_t t0 = 0; t0 < n; t0 += tb)
            gemm_float_panels(w, x + t0 * w.cols, std::min(tb, n - t0), y + t0 * w.rows, nt,
                              active_isa() == isa::avx512);
        return;
    }
    const dequant_fn widen = active_table().dequant[static_cast<int>(w.type)];
    const gemm_float_fn fn = gemm_float_scalar();
    const int64_t k = w.cols, np = (n + 15) / 16 * 16;
    std::vector<float>& xt = thread_xt();
    if (xt.size() < static_cast<size_t>(k * np)) xt.resize(static_cast<size_t>(k * np));
    const int64_t units = (w.rows + k_float_rows - 1) / k_float_rows;
    nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nt, units)));
    constexpr int64_t k_chunk = 64;  // columns per transpose step: its x reads stay in L1

#pragma omp parallel num_threads(nt) if (nt > 1)
    {
#pragma omp for schedule(static)
        for (int64_t c0 = 0; c0 < k; c0 += k_chunk) {
            const int64_t c1 = std::min(k, c0 + k_chunk);
            for (int64_t t = 0; t < np; ++t)
                for (int64_t c = c0; c < c1; ++c) xt[static_cast<size_t>(c * np + t)] = t < n ? x[t * k + c] : 0.0f;
        }  // implicit barrier: the transposed activations are complete
        const int th = omp_get_thread_num(), nth = omp_get_num_threads();
        std::vector<float>& rows = thread_wide_rows();
        if (rows.size() < static_cast<size_t>(k_float_rows * k)) rows.resize(static_cast<size_t>(k_float_rows * k));
        float out[k_float_rows * 32];
        for (int64_t u = units * th / nth; u < units * (th + 1) / nth; ++u) {
            const int64_t r0 = u * k_float_rows;
            const int nr = static_cast<int>(std::min<int64_t>(k_float_rows, w.rows - r0));
            for (int i = 0; i < k_float_rows; ++i) {
                float* dst = rows.data() + i * k;
                if (i < nr)
                    widen(w.row(r0 + i), dst, k);
                else
                    std::fill(dst, dst + k, 0.0f);
            }
            for (int64_t t0 = 0; t0 < np; t0 += 32) {
                const int tv = np - t0 >= 32 ? 2 : 1;
                fn(rows.data(), k, xt.data() + t0, np, tv, out);
                const int64_t nt_here = std::min<int64_t>(16 * tv, n - t0);
                for (int64_t t = 0; t < nt_here; ++t)
                    for (int i = 0; i < nr; ++i) y[(t0 + t) * w.rows + r0 + i] = out[i * 32 + t];
            }
        }
    }
}

void gemm_int8(const tensor_view& wv, const float* x, int64_t n, float* y, int nt) {
    // Q4_Kx8r / Q4_0x8r / Q8_0x8r: read as their base type (the same bytes per row, so whole groups address alike),
    // each panel's groups copied back to rows before the panel decodes them: the blocks and so the results
    // of the rows.
    const bool x8 = dtype_is_rows_x8(wv.type);
    tensor_view w = wv;
    w.type = dtype_rows_x8_base(wv.type);
    const kernel_table& kt = active_table();
    const int8_kernel kern = active_int8_kernel();
    const bool direct = !kern.maddubs && active_isa() == isa::avx512;  // plus_128 panels, AVX2/AVX-512 decoders
    const int group = scales_per_16(w.type) ? 16 : 32;
    const avx2_encoding enc = encoding_for(w.type, group);
    token_scratch& tok = thread_tokens();
    tok.reserve(n, w.cols, group);
    if (kern.maddubs) tok.reserve_grouped(n, w.cols, group);
    if (kern.amx && tok.qa.size() < static_cast<size_t>(n * w.cols)) tok.qa.resize(static_cast<size_t>(n * w.cols));
    const bool reused = tok.reuse(quant_info(w.type).act, x, n, w.cols);
    const token_scratch::derived need{group, enc.offset, kern.maddubs, enc.format == panel_format::wide, kern.amx};
    const bool ready = reused && tok.made == need;  // q/k/v and gate/up of one type: the second and third
    tok.made = need;                                 // gemms skip the token pass
    const gemm_tokens xs{tok.qs.data(),
                         tok.corr.data(),
                         tok.dx.data(),
                         quant_info(w.type).has_min ? tok.xm.data() : nullptr,
                         tok.qg.data(),
                         tok.side.data(),
                         n,
                         w.cols,
                         tok.qa.data()};
    const int64_t panels = (w.rows + k_panel_rows - 1) / k_panel_rows;
    nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nt, panels)));

#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        if (!ready) {
#pragma omp for schedule(static)
            for (int64_t t = 0; t < n; ++t) {
                if (!reused) tok.quantize(kt, w.type, x, t, w.cols);
                if (kern.maddubs)
                    tok.pack(t, n, w.cols, group, enc);
                else
                    tok.sums(t, w.cols, group);
                if (kern.amx && t < n / 16 * 16) tok.pack_tiles(t, w.cols, group);
            }
        }  // the loop's implicit barrier: every token is ready before any panel uses it
        const int th = omp_get_thread_num(), nth = omp_get_num_threads();
        const int64_t p0 = panels * th / nth, p1 = panels * (th + 1) / nth;
        panel_buffer& buf = thread_panel();
        for (int64_t pi = p0; pi < p1; ++pi) {
            const int64_t r0 = pi * k_panel_rows;
            const int nr = static_cast<int>(std::min<int64_t>(k_panel_rows, w.rows - r0));
            gemm_panel panel;
            if (x8) {
                thread_local std::vector<uint8_t> rows;
                const int64_t rb = w.row_bytes();
                rows.resize(static_cast<size_t>(k_panel_rows * rb));
                for (int g = 0; g < nr; g += k_rows_x8)
                    rows_x8_back(kt, wv.type, w.row(r0 + g), w.cols, rows.data() + g * rb, rb);
                panel = buf.fill({w.type, nr, w.cols, rows.data()}, 0, nr, group, kern.maddubs ? &enc : nullptr,
                                 direct);
            } else {
                panel = buf.fill(w, r0, nr, group, kern.maddubs ? &enc : nullptr, direct);
            }
            if (pi + 1 < p1) {
                panel.next = w.row(r0 + k_panel_rows);
                panel.next_bytes = std::min<int64_t>(k_panel_rows, w.rows - r0 - k_panel_rows) * w.row_bytes();
            }
            kern.fn(panel, xs, y + r0, w.rows, nr);
        }
    }
}

}  // namespace sl::kernels::detail

namespace sl::kernels {

bool amx_available() { return detail::gemm_panel_amx() != nullptr; }

bool amx_enabled() {
    return active_isa() == isa::avx512 && amx_available() && detail::amx_switch().load(std::memory_order_relaxed);
}

bool set_amx_enabled(bool on) {
    detail::amx_switch().store(on, std::memory_order_relaxed);
    return amx_enabled();
}

}  // namespace sl::kernels
