// The weight gradient of a linear layer is a sum over the batch's rows, g^T x ([out, in]) or, the same
// numbers transposed, x^T g ([in, out]). model/linear.cpp picks the orientation whose result has the
// smaller of out and in as its rows where that one is at most 256; this program times both orientations
// of oneDNN's sgemm alternately on the demo models' and bert-base's shapes, one thread, and prints the
// medians and their ratio (> 1: the [in, out] orientation is faster). docs/performance.md has the figures.
//   g++ -O2 -fopenmp bench/sgemm_weight_gradient.cpp -o /tmp/sgemm_weight_gradient -ldnnl
//   /tmp/sgemm_weight_gradient [repeats=21]
#include "timing.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

using bench::median;
using bench::seconds;

struct Shape
{
    const char* name;
    long out, in, rows;
};

} // namespace

int main(int argc, char** argv)
{
    const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
    omp_set_num_threads(1);
    const Shape shapes[] = {{"demo ViT qkv", 384, 128, 6400},      {"demo ViT fc1", 512, 128, 6400},
                            {"demo ViT fc2", 128, 512, 6400},      {"demo ViT proj", 128, 128, 6400},
                            {"demo BERT MLM fc1", 512, 128, 4096}, {"demo BERT MLM decoder", 30522, 128, 614},
                            {"demo backcopy fc1", 512, 128, 2048}, {"256 x 1024", 1024, 256, 4096},
                            {"bert-base fc1", 3072, 768, 1024},    {"bert-base fc2", 768, 3072, 1024}};
    std::printf("%-24s %6s %5s %5s  %12s %12s  %s\n", "layer", "out", "in", "rows", "[out,in] ms",
                "[in,out] ms", "ratio");
    for (const Shape& s : shapes) {
        std::vector<float> g(std::size_t(s.rows * s.out)), x(std::size_t(s.rows * s.in)),
            result(std::size_t(s.out * s.in));
        std::mt19937 gen(1);
        std::normal_distribution<float> normal;
        for (float& v : g)
            v = normal(gen);
        for (float& v : x)
            v = normal(gen);
        std::vector<double> outRows, inRows;
        for (int r = 0; r < repeats + 2; ++r) { // two untimed rounds first
            double t = seconds();
            dnnl_sgemm('T', 'N', s.out, s.in, s.rows, 1.0f, g.data(), s.out, x.data(), s.in, 0.0f,
                       result.data(), s.in);
            const double a = seconds() - t;
            t = seconds();
            dnnl_sgemm('T', 'N', s.in, s.out, s.rows, 1.0f, x.data(), s.in, g.data(), s.out, 0.0f,
                       result.data(), s.out);
            const double b = seconds() - t;
            if (r >= 2) {
                outRows.push_back(a);
                inRows.push_back(b);
            }
        }
        const double a = median(outRows), b = median(inRows);
        std::printf("%-24s %6ld %5ld %5ld  %12.2f %12.2f  %.2f\n", s.name, s.out, s.in, s.rows, a * 1e3,
                    b * 1e3, a / b);
    }
    return 0;
}
