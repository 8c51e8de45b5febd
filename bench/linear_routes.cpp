// The forward product of a float32 linear layer, y [m, n] = x [m, k] W^T, three ways, alternating, on the
// shapes of a bert-base forward (m = 128 tokens) and of the demo models' training steps:
//   onednn   oneDNN's dnnl_sgemm with every thread (model/linear.cpp's route before the split)
//   split    the output's larger dimension (rows or columns) split in one block per thread, each block a
//            one-thread dnnl_sgemm inside one OpenMP region (model/linear.cpp's route with more than one
//            thread)
//   openblas the system BLAS's cblas_sgemm (OpenBLAS, as LibTorch and Python's torch call it)
// It prints each shape's median GFLOP/s per route and the ratios against OpenBLAS (> 1: faster), then the
// same shapes in bf16 (dnnl_gemm_bf16bf16f32, bf16 operands, float32 result: the fast mode's product)
// with every thread against the split.
// docs/performance.md has the figures.
//   g++ -O2 -fopenmp bench/linear_routes.cpp -o /tmp/linear_routes -ldnnl -lblas
//   OMP_NUM_THREADS=2 /tmp/linear_routes [repeats=31]
#include "timing.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const std::uint16_t* A,
                                               dnnl_dim_t lda, const std::uint16_t* B, dnnl_dim_t ldb,
                                               float beta, float* C, dnnl_dim_t ldc);
extern "C" void cblas_sgemm(int order, int transA, int transB, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using bench::median;
using bench::seconds;

struct Shape
{
    const char* name;
    long m, n, k;
};

void onednn(const Shape& s, const float* x, const float* w, float* y)
{
    dnnl_sgemm('N', 'T', s.m, s.n, s.k, 1.0f, x, s.k, w, s.k, 0.0f, y, s.n);
}

/// This thread's block of the output inside an OpenMP region: rows [r0, r1) and columns [c0, c1), the
/// larger of the two dimensions split in one block per thread, as at::parallel_for does in model/linear.cpp.
struct Block
{
    long r0, r1, c0, c1;
};

Block blockOfThisThread(const Shape& s)
{
    const long threads = omp_get_num_threads(), t = omp_get_thread_num();
    const bool rows = s.m > s.n;
    const long size = rows ? s.m : s.n, per = (size + threads - 1) / threads;
    const long b0 = std::min(size, t * per), b1 = std::min(size, b0 + per);
    return rows ? Block{b0, b1, 0, s.n} : Block{0, s.m, b0, b1};
}

void split(const Shape& s, const float* x, const float* w, float* y)
{
#pragma omp parallel
    {
        const Block b = blockOfThisThread(s);
        if (b.r1 > b.r0 && b.c1 > b.c0)
            dnnl_sgemm('N', 'T', b.r1 - b.r0, b.c1 - b.c0, s.k, 1.0f, x + b.r0 * s.k, s.k, w + b.c0 * s.k,
                       s.k, 0.0f, y + b.r0 * s.n + b.c0, s.n);
    }
}

void onednnBf16(const Shape& s, const std::uint16_t* x, const std::uint16_t* w, float* y)
{
    dnnl_gemm_bf16bf16f32('N', 'T', s.m, s.n, s.k, 1.0f, x, s.k, w, s.k, 0.0f, y, s.n);
}

void splitBf16(const Shape& s, const std::uint16_t* x, const std::uint16_t* w, float* y)
{
#pragma omp parallel
    {
        const Block b = blockOfThisThread(s);
        if (b.r1 > b.r0 && b.c1 > b.c0)
            dnnl_gemm_bf16bf16f32('N', 'T', b.r1 - b.r0, b.c1 - b.c0, s.k, 1.0f, x + b.r0 * s.k, s.k,
                                  w + b.c0 * s.k, s.k, 0.0f, y + b.r0 * s.n + b.c0, s.n);
    }
}

/// Times `routes` alternately on shape s and returns each one's median GFLOP/s.
template<typename T, std::size_t N>
std::vector<double>
rates(const Shape& s, void (*const (&routes)[N])(const Shape&, const T*, const T*, float*),
      const std::vector<T>& x, const std::vector<T>& w, std::vector<float>& y, int repeats)
{
    std::vector<double> times[N];
    for (int r = 0; r < repeats + 3; ++r)
        for (std::size_t i = 0; i < N; ++i) {
            const std::size_t route = (i + std::size_t(r)) % N; // alternate the order
            const double t0 = seconds();
            routes[route](s, x.data(), w.data(), y.data());
            if (r >= 3) times[route].push_back(seconds() - t0);
        }
    std::vector<double> out;
    for (std::size_t i = 0; i < N; ++i)
        out.push_back(2.0 * s.m * s.n * s.k / median(times[i]) / 1e9);
    return out;
}

std::uint16_t bf16(float v)
{
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void openblas(const Shape& s, const float* x, const float* w, float* y)
{
    cblas_sgemm(kRowMajor, kNoTrans, kTrans, int(s.m), int(s.n), int(s.k), 1.0f, x, int(s.k), w, int(s.k),
                0.0f, y, int(s.n));
}

} // namespace

int main(int argc, char** argv)
{
    const int repeats = argc > 1 ? std::atoi(argv[1]) : 31;
    const Shape shapes[] = {
        {"bert-base q/k/v/o 128x768x768", 128, 768, 768},
        {"bert-base ffn up 128x3072x768", 128, 3072, 768},
        {"bert-base ffn down 128x768x3072", 128, 768, 3072},
        {"bert-base batch 4: 512x3072x768", 512, 3072, 768},
        {"demo ViT 64x65 rows: 4160x512x128", 4160, 512, 128},
        {"demo ViT 4160x128x512", 4160, 128, 512},
        {"demo BERT 4096x384x128", 4096, 384, 128},
        {"demo decoder 2048x512x128", 2048, 512, 128},
    };
    std::printf("threads %d, %d repeats, GFLOP/s medians\n", omp_get_max_threads(), repeats);
    std::printf("%-36s %9s %9s %9s %12s %12s %10s %10s %12s\n", "shape m x n x k", "onednn", "split",
                "openblas", "onednn/blas", "split/blas", "bf16", "bf16 split", "split/whole");
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    void (*const f32[])(const Shape&, const float*, const float*, float*) = {onednn, split, openblas};
    void (*const b16[])(const Shape&, const std::uint16_t*, const std::uint16_t*, float*) = {onednnBf16,
                                                                                             splitBf16};
    for (const Shape& s : shapes) {
        std::vector<float> x(std::size_t(s.m * s.k)), w(std::size_t(s.n * s.k)), y(std::size_t(s.m * s.n));
        for (float& v : x)
            v = normal(rng);
        for (float& v : w)
            v = normal(rng);
        std::vector<std::uint16_t> xb(x.size()), wb(w.size());
        std::transform(x.begin(), x.end(), xb.begin(), bf16);
        std::transform(w.begin(), w.end(), wb.begin(), bf16);
        const std::vector<double> r = rates(s, f32, x, w, y, repeats), rb = rates(s, b16, xb, wb, y, repeats);
        std::printf("%-36s %9.1f %9.1f %9.1f %12.2f %12.2f %10.1f %10.1f %12.2f\n", s.name, r[0], r[1], r[2],
                    r[0] / r[2], r[1] / r[2], rb[0], rb[1], rb[1] / rb[0]);
    }
}
