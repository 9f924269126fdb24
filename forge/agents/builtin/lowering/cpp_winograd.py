"""A 3x3 convolution as Winograd's F(2x2, 3x3) in C++: the ``conv_algo`` knob's ``winograd``.

A 3x3, stride-1, padding-1 convolution spends its time in 9 multiply-adds per input channel per
output. F(2x2, 3x3) computes a 2x2 tile of outputs from a 4x4 tile of the input with 16 products
per channel instead of 36 (Lavin and Gray, 2015): the input tile and the filter are transformed
(``V = B^T d B``, ``U = G g G^T``), multiplied elementwise and summed over the channels (16
matrix products, channels x output channels), and transformed back (``Y = A^T M A``).
On the 2-core AMD EPYC (Zen 4) VM, 8x32x32x32 with 32 filters ran in 0.60-0.78 ms against
oneDNN's 0.78-1.49 ms (docs/lowering.md has the sweep over channel counts).

Kept exact where the reference is exact about special values: a tile whose 4x4 input holds a NaN
or an infinity is computed again directly (a transform's ``inf - inf`` would give NaN where the
convolution gives inf), and a filter holding one makes the whole call direct. Finite results
differ from the direct sum by rounding only (the transforms add and subtract, with factors 1/2).

A task is a block of tile rows of one image (as many rows as fill the vectors best), or a part
of its filters when there are few blocks; each thread's scratch is kept between calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from forge.agents.builtin.lowering.code import CodeBuffer
from forge.agents.builtin.lowering.cpp_emit import step_function
from forge.agents.builtin.lowering.ir import dtype_of, shape_of
from forge.agents.builtin.lowering.layout import conv2d_parts
from forge.agents.builtin.lowering.schedule import Schedule, Step, StepKind


@dataclass(frozen=True)
class WinogradConv:
    """A convolution the Winograd step can compute: its buffers' slots and sizes."""

    x: int
    weight: int
    bias: int | None
    out: int
    batch: int
    channels: int
    height: int
    width: int
    filters: int


def winograd_conv(step: Step, sched: Schedule) -> WinogradConv | None:
    """``step`` as a Winograd convolution: a float32 2-D convolution, 3x3, stride 1, padding 1,
    no dilation, one group, whose input, weight (and bias) are row-major buffers; else None."""
    node = step.node
    parts = conv2d_parts(node) if step.kind is StepKind.LIBRARY else None
    if parts is None or len(node.args) < 9:
        return None
    x, weight = parts
    bias, stride, padding, dilation, _, _, groups = node.args[2:9]
    if list(stride) != [1, 1] or list(padding) != [1, 1] or list(dilation) != [1, 1] or groups != 1:  # type: ignore[arg-type]
        return None
    nodes = [x, weight, node] + ([bias] if isinstance(bias, fx.Node) else [])
    if bias is not None and not isinstance(bias, fx.Node):
        return None
    if any(n not in sched.buffers or sched.slot(n) in sched.layouts or dtype_of(n) != torch.float32 for n in nodes):
        return None
    filters, channels, kh, kw = shape_of(weight)
    batch, _, height, width = shape_of(x)
    if (kh, kw) != (3, 3) or tuple(shape_of(node)) != (batch, filters, height, width):
        return None
    bias_slot = sched.slot(bias) if isinstance(bias, fx.Node) else None
    return WinogradConv(
        sched.slot(x), sched.slot(weight), bias_slot, sched.slot(node), batch, channels, height, width, filters
    )


# Winograd is tried first where its transformed filters (16 x channels x filters floats) fit in
# about 1 MiB, a core's L2: every block of tiles reads all of them. Measured on the 2-core Zen 4
# VM (in-process medians, library/eager over Winograd): 32 -> 32 channels at 32x32 1.1-1.9x,
# 64 -> 64 at 16x16 and 56x56 1.12-1.16x, 128 -> 128 at 16x16 0.97-1.33x; 256 -> 256 at 14x14
# 0.45-0.83x and 512 -> 512 at 7x7 0.52x. Larger ones start at the library call (the tuner still
# tries Winograd as a move).
FILTERS_IN_CACHE = 16384  # channels x filters


def favours_winograd(conv: WinogradConv) -> bool:
    """Whether the tuner starts ``conv`` at Winograd (else at the library call)."""
    return conv.channels * conv.filters <= FILTERS_IN_CACHE


def winograd_step(name: str, conv: WinogradConv, sched: Schedule, cfg: dict[str, Any]) -> str:
    """The step's C++ function: the convolution into its buffer (``forge_winograd3x3``)."""
    reads = {conv.x, conv.weight} | ({conv.bias} if conv.bias is not None else set())
    bias = f"b{conv.bias}" if conv.bias is not None else "nullptr"
    sizes = f"{conv.batch}, {conv.channels}, {conv.height}, {conv.width}, {conv.filters}"
    body = CodeBuffer(level=1)
    threads = int(cfg.get("threads") or 0)
    body.line(f"forge_winograd3x3(b{conv.x}, b{conv.weight}, {bias}, b{conv.out}, {sizes}, {threads});")
    return step_function(name, sched, reads, {conv.out: f"b{conv.out}"}, body)


WINOGRAD = (
    r"""
#include <vector>
#include <algorithm>
#if defined(__AVX512F__)
#define FORGE_WG_VL 16
#define FORGE_WG_KB 8
#else
#define FORGE_WG_VL 8
#define FORGE_WG_KB 6
#endif
typedef float forge_wg_v __attribute__((vector_size(FORGE_WG_VL * 4)));
static inline forge_wg_v forge_wg_ld(const float* p) { forge_wg_v r; std::memcpy(&r, p, sizeof r); return r; }
static inline void forge_wg_st(float* p, forge_wg_v v) { std::memcpy(p, &v, sizeof v); }

static float* forge_wg_scratch(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

// Outputs [oy0, oy0 + 2) x [ox0, ox0 + 2) of image n, every filter, summed directly (padding
// skipped, as the library skips it): the tiles whose input holds NaN or inf.
static void forge_wg_direct(const float* x, const float* w, const float* bias, float* out, int64_t n,
                            int64_t oy0, int64_t ox0, int64_t C, int64_t H, int64_t W, int64_t K, int64_t k0,
                            int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
        for (int64_t oy = oy0; oy < std::min(oy0 + 2, H); ++oy)
            for (int64_t ox = ox0; ox < std::min(ox0 + 2, W); ++ox) {
                float acc = 0.f;
                for (int64_t c = 0; c < C; ++c)
                    for (int64_t ky = 0; ky < 3; ++ky)
                        for (int64_t kx = 0; kx < 3; ++kx) {
                            const int64_t iy = oy + ky - 1, ix = ox + kx - 1;
                            if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                acc += x[((n * C + c) * H + iy) * W + ix] * w[((k * C + c) * 3 + ky) * 3 + kx];
                        }
                out[((n * K + k) * H + oy) * W + ox] = bias ? acc + bias[k] : acc;
            }
}

// U[p][c][k] = (G g G^T)[p] for filter k, channel c, in blocks of 16 channels by 16 filters made
// in a local array and written out a row of 16 filters at a time: written directly, U's rows
// for one filter lie a power of two apart and evict one another from the cache (0.05 ms for
// 32 x 32 filters, but 6 ms for 512 x 512 on the 2-core VM).
static void forge_wg_filters(const float* w, float* U, int64_t C, int64_t K) {
    const int64_t CB = (C + 15) / 16, KB = (K + 15) / 16;
    #pragma omp for schedule(static)
    for (int64_t blk = 0; blk < CB * KB; ++blk) {
        const int64_t c0 = (blk / KB) * 16, k0 = (blk % KB) * 16;
        const int64_t nc = std::min<int64_t>(16, C - c0), nk = std::min<int64_t>(16, K - k0);
        float tile[16][16][16];  // [p][c - c0][k - k0]
        for (int64_t kk = 0; kk < nk; ++kk)
            for (int64_t cc = 0; cc < nc; ++cc) {
                const float* g = w + ((k0 + kk) * C + c0 + cc) * 9;
                float t[4][3];
                for (int j = 0; j < 3; ++j) {
                    const float g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
                    t[0][j] = g0; t[1][j] = 0.5f * (g0 + g1 + g2); t[2][j] = 0.5f * (g0 - g1 + g2); t[3][j] = g2;
                }
                for (int i = 0; i < 4; ++i) {
                    const float a = t[i][0], b = t[i][1], d = t[i][2];
                    const float r[4] = {a, 0.5f * (a + b + d), 0.5f * (a - b + d), d};
                    for (int j = 0; j < 4; ++j) tile[i * 4 + j][cc][kk] = r[j];
                }
            }
        for (int p = 0; p < 16; ++p)
            for (int64_t cc = 0; cc < nc; ++cc)
                std::memcpy(U + (p * C + c0 + cc) * K + k0, tile[p][cc], sizeof(float) * nk);
    }
}
"""
    + r"""
// V[p][c][t] for the block's tiles (tile rows th0 .. th0 + nr - 1 of image n; lane t is tile
// t % TW of row t / TW); bad[t] is NaN when tile t's input holds NaN or inf. D[i * 4 + j] holds
// each lane's input at row i, column j of its 4x4 window.
static void forge_wg_inputs(const float* x, float* V, float* D, float* row2, float* bad, int64_t n, int64_t th0,
                            int64_t nr,
                            int64_t C, int64_t H, int64_t W, int64_t TW, int64_t TP) {
    for (int64_t t = 0; t < TP; ++t) bad[t] = 0.f;
    for (int64_t c = 0; c < C; ++c) {
        const float* xp = x + (n * C + c) * H * W;
        for (int64_t r = 0; r < nr; ++r)
            for (int i = 0; i < 4; ++i) {
                const int64_t yy = 2 * (th0 + r) - 1 + i;  // the window's row i; padding is zero
                float* e = row2;  // padded columns 0, 2, 4, ... (input column 2q - 1)
                float* o = row2 + TW + 1;  // padded columns 1, 3, 5, ... (input column 2q)
                if (yy < 0 || yy >= H) {
                    std::memset(row2, 0, sizeof(float) * 2 * (TW + 1));
                } else {
                    const float* in = xp + yy * W;
                    int64_t q = 1;
                    e[0] = 0.f;
                    for (; q <= W / 2; ++q) e[q] = in[2 * q - 1];
                    for (; q <= TW; ++q) e[q] = 0.f;
                    for (q = 0; q < TW; ++q) o[q] = in[2 * q];
                    o[TW] = 0.f;
                }
                float* d = D + i * 4 * TP + r * TW;  // window column j of tile tw: padded column 2 tw + j
                for (int64_t tw = 0; tw < TW; ++tw) {  // a loop: memcpy calls of 16 floats cost a fifth of the step
                    d[tw] = e[tw]; d[TP + tw] = o[tw]; d[2 * TP + tw] = e[tw + 1]; d[3 * TP + tw] = o[tw + 1];
                }
            }
        for (int p = 0; p < 16; ++p)
            for (int64_t t = nr * TW; t < TP; ++t) D[p * TP + t] = 0.f;
        for (int64_t t = 0; t < TP; t += FORGE_WG_VL) {
            forge_wg_v s[4][4], z = forge_wg_ld(bad + t);
            for (int j = 0; j < 4; ++j) {
                const forge_wg_v d0 = forge_wg_ld(D + j * TP + t), d1 = forge_wg_ld(D + (4 + j) * TP + t);
                const forge_wg_v d2 = forge_wg_ld(D + (8 + j) * TP + t), d3 = forge_wg_ld(D + (12 + j) * TP + t);
                z += (d0 + d1 + d2 + d3) * 0.f;  // NaN exactly when one of them is NaN or inf
                s[0][j] = d0 - d2; s[1][j] = d1 + d2; s[2][j] = d2 - d1; s[3][j] = d1 - d3;
            }
            forge_wg_st(bad + t, z);
            for (int i = 0; i < 4; ++i) {
                forge_wg_st(V + ((i * 4 + 0) * C + c) * TP + t, s[i][0] - s[i][2]);
                forge_wg_st(V + ((i * 4 + 1) * C + c) * TP + t, s[i][1] + s[i][2]);
                forge_wg_st(V + ((i * 4 + 2) * C + c) * TP + t, s[i][2] - s[i][1]);
                forge_wg_st(V + ((i * 4 + 3) * C + c) * TP + t, s[i][1] - s[i][3]);
            }
        }
    }
}
"""
    + r"""
// M[p][k][t] = sum_c U[p][c][k] V[p][c][t]: FORGE_WG_KB filters by one vector of tiles at a time.
static void forge_wg_products(const float* U, const float* V, float* M, int64_t C, int64_t K, int64_t k0, int64_t k1,
                              int64_t TP) {
    for (int p = 0; p < 16; ++p) {
        const float* Up = U + p * C * K;
        const float* Vp = V + p * C * TP;
        float* Mp = M + p * K * TP;
        for (int64_t t = 0; t < TP; t += FORGE_WG_VL) {
            int64_t k = k0;
            for (; k + FORGE_WG_KB <= k1; k += FORGE_WG_KB) {
                forge_wg_v a[FORGE_WG_KB] = {};
                for (int64_t c = 0; c < C; ++c) {
                    const forge_wg_v v = forge_wg_ld(Vp + c * TP + t);
                    const float* u = Up + c * K + k;
                    for (int q = 0; q < FORGE_WG_KB; ++q) a[q] += u[q] * v;
                }
                for (int q = 0; q < FORGE_WG_KB; ++q) forge_wg_st(Mp + (k + q) * TP + t, a[q]);
            }
            for (; k < k1; ++k) {
                forge_wg_v a = {};
                for (int64_t c = 0; c < C; ++c) a += Up[c * K + k] * forge_wg_ld(Vp + c * TP + t);
                forge_wg_st(Mp + k * TP + t, a);
            }
        }
    }
}

// The block's outputs, Y = A^T M A (+ bias), written into rows 2 th and 2 th + 1 of out for its
// tile rows th.
static void forge_wg_outputs(const float* M, const float* bias, float* out, float* ys, int64_t n, int64_t th0,
                             int64_t nr, int64_t H, int64_t W, int64_t K, int64_t k0, int64_t k1, int64_t TW,
                             int64_t TP) {
    const int64_t S = K * TP;
    for (int64_t k = k0; k < k1; ++k) {
        const float* m = M + k * TP;
        const float add = bias ? bias[k] : 0.f;
        for (int64_t t = 0; t < TP; t += FORGE_WG_VL) {
            forge_wg_v s0[4], s1[4];
            for (int j = 0; j < 4; ++j) {
                const forge_wg_v m0 = forge_wg_ld(m + j * S + t), m1 = forge_wg_ld(m + (4 + j) * S + t);
                const forge_wg_v m2 = forge_wg_ld(m + (8 + j) * S + t), m3 = forge_wg_ld(m + (12 + j) * S + t);
                s0[j] = m0 + m1 + m2; s1[j] = m1 - m2 - m3;
            }
            const forge_wg_v y[4] = {s0[0] + s0[1] + s0[2], s0[1] - s0[2] - s0[3], s1[0] + s1[1] + s1[2],
                                     s1[1] - s1[2] - s1[3]};
            for (int q = 0; q < 4; ++q) forge_wg_st(ys + q * TP + t, bias ? y[q] + add : y[q]);
        }
        for (int64_t r = 0; r < nr; ++r)
            for (int64_t half = 0; half < 2 && 2 * (th0 + r) + half < H; ++half) {
                float* o = out + ((n * K + k) * H + 2 * (th0 + r) + half) * W;
                const float* even = ys + 2 * half * TP + r * TW;
                const float* odd = even + TP;
                for (int64_t t = 0; t < W / 2; ++t) { o[2 * t] = even[t]; o[2 * t + 1] = odd[t]; }
                if (W & 1) o[W - 1] = even[W / 2];
            }
    }
}
"""
    + r"""
static bool forge_wg_finite(const float* w, int64_t n) {
    forge_wg_v z = {};
    int64_t i = 0;
    for (; i + FORGE_WG_VL <= n; i += FORGE_WG_VL) z += forge_wg_ld(w + i) * 0.f;
    float s = 0.f;
    for (int q = 0; q < FORGE_WG_VL; ++q) s += z[q];
    for (; i < n; ++i) s += w[i] * 0.f;
    return s == s;
}

// Tile rows per block: the count up to max(2, 2 VL / TW) whose lanes waste the least of the
// vectors (a 7-tile row alone fills 7 of 16 lanes; two fill 14).
static int64_t forge_wg_rows(int64_t TW, int64_t TH) {
    const int64_t most = std::min<int64_t>(TH, std::max<int64_t>(2, (2 * FORGE_WG_VL + TW - 1) / TW));
    int64_t best = 1;
    double waste = 1e9;
    for (int64_t r = 1; r <= most; ++r) {
        const int64_t used = r * TW, padded = (used + FORGE_WG_VL - 1) / FORGE_WG_VL * FORGE_WG_VL;
        const double w = (double)(padded - used) / (double)used;
        if (w < waste - 1e-9) { waste = w; best = r; }
    }
    return best;
}

static void forge_winograd3x3(const float* x, const float* w, const float* bias, float* out, int64_t N, int64_t C,
                              int64_t H, int64_t W, int64_t K, int threads) {
    const int64_t TH = (H + 1) / 2, TW = (W + 1) / 2, RB = forge_wg_rows(TW, TH), BH = (TH + RB - 1) / RB;
    const int64_t TP = (RB * TW + FORGE_WG_VL - 1) / FORGE_WG_VL * FORGE_WG_VL;
    const int nt = threads > 0 ? threads : omp_get_max_threads();
    // Fewer blocks than two per thread: the filters are split too (each part transforms its
    // block's input again), in multiples of the register block.
    const int64_t KP = std::max<int64_t>(1, std::min<int64_t>((2 * nt + N * BH - 1) / (N * BH), K / FORGE_WG_KB));
    const int64_t KS = ((K + KP - 1) / KP + FORGE_WG_KB - 1) / FORGE_WG_KB * FORGE_WG_KB;
    if (!forge_wg_finite(w, K * C * 9)) {  // a NaN or inf filter: the direct sum, as the library's
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t b = 0; b < N * TH; ++b)
            for (int64_t tw = 0; tw < TW; ++tw)
                forge_wg_direct(x, w, bias, out, b / TH, 2 * (b % TH), 2 * tw, C, H, W, K, 0, K);
        return;
    }
    static thread_local std::vector<float> filters;
    float* U = forge_wg_scratch(filters, (size_t)(16 * C * K));
    #pragma omp parallel num_threads(nt)
    {
        forge_wg_filters(w, U, C, K);  // its omp for ends in a barrier: U is whole after it
        static thread_local std::vector<float> inputs, products, windows, row, ys, bad;
        float* V = forge_wg_scratch(inputs, (size_t)(16 * C * TP));
        float* M = forge_wg_scratch(products, (size_t)(16 * K * TP));
        float* D = forge_wg_scratch(windows, (size_t)(16 * TP));
        float* R2 = forge_wg_scratch(row, (size_t)(2 * (TW + 1)));
        float* Y = forge_wg_scratch(ys, (size_t)(4 * TP));
        float* Z = forge_wg_scratch(bad, (size_t)TP);
        #pragma omp for schedule(static)
        for (int64_t item = 0; item < N * BH * KP; ++item) {
            const int64_t b = item / KP, part = item % KP;
            const int64_t n = b / BH, th0 = (b % BH) * RB, nr = std::min(RB, TH - th0);
            const int64_t k0 = part * KS, k1 = std::min(K, k0 + KS);
            forge_wg_inputs(x, V, D, R2, Z, n, th0, nr, C, H, W, TW, TP);
            forge_wg_products(U, V, M, C, K, k0, k1, TP);
            forge_wg_outputs(M, bias, out, Y, n, th0, nr, H, W, K, k0, k1, TW, TP);
            for (int64_t t = 0; t < nr * TW; ++t)
                if (Z[t] != Z[t])
                    forge_wg_direct(x, w, bias, out, n, 2 * (th0 + t / TW), 2 * (t % TW), C, H, W, K, k0, k1);
        }
    }
}
"""
)

__all__ = ["FILTERS_IN_CACHE", "WINOGRAD", "WinogradConv", "favours_winograd", "winograd_conv", "winograd_step"]
