// quickstart: normalize a small batch with normkit::LayerNorm<float>.
//
// A batch of 4 samples ("rows") with 8 features each is stored row-major in one flat array, the
// layout a framework would hand you. LayerNorm normalizes every row by that row's own mean and
// variance, so each row comes out with mean ≈ 0 and variance ≈ 1, whatever scale and offset it
// had. Then it applies the learnable scale γ and shift β, which start at 1 and 0, so an
// untrained LayerNorm is a pure normalization.
//
// The program prints the statistics before and after, checks them, and exits non-zero if any
// result is wrong, so it doubles as a test.

#include <normkit/normkit.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace {

struct Moments {
  double mean, variance;
};

// Mean and population variance (divided by n, as LayerNorm uses) of one row, in double and in
// two passes: slow but obviously right, which is what a check should be.
Moments moments(std::span<const float> row) {
  double sum = 0;
  for (float v : row) sum += v;
  const double mean = sum / static_cast<double>(row.size());
  double squares = 0;
  for (float v : row) squares += (v - mean) * (v - mean);
  return {mean, squares / static_cast<double>(row.size())};
}

}  // namespace

int main() {
  constexpr std::size_t rows = 4, features = 8;

  // Each row gets its own offset and spread, like activations of different tokens: row r is
  // offset + scale * (a fixed zig-zag pattern).
  const float offsets[rows] = {0.0f, 10.0f, -3.5f, 100.0f};
  const float scales[rows] = {1.0f, 0.25f, 4.0f, 30.0f};
  const float pattern[features] = {-1.5f, 0.3f, 2.0f, -0.7f, 1.1f, -2.2f, 0.9f, 0.5f};
  std::vector<float> x(rows * features);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < features; ++j) x[r * features + j] = offsets[r] + scales[r] * pattern[j];
  }

  // One LayerNorm over the last dimension of size 8. Options left at their defaults:
  // eps = 1e-5 (added to the variance so a constant row does not divide by zero), learnable γ
  // and β.
  normkit::LayerNorm<float> norm(features);

  // Inference forward. Spans carry the sizes, so normkit can check them: rows is
  // x.size() / features, and y must have as many values as x. (y could also be x itself: in
  // place is allowed.)
  std::vector<float> y(x.size());
  norm(x, y);

  int failures = 0;
  auto check = [&failures](bool ok, const char* what, std::size_t index) {
    if (!ok) {
      std::printf("  FAILED: %s [%zu]\n", what, index);
      ++failures;
    }
  };

  std::printf("normkit quickstart: LayerNorm<float> over %zu rows x %zu features, ISA %s\n\n", rows,
              features, std::string(normkit::to_string(normkit::active_isa())).c_str());
  std::printf("row      mean before  variance before   ->   mean after  variance after\n");
  for (std::size_t r = 0; r < rows; ++r) {
    const auto in = moments(std::span<const float>(x).subspan(r * features, features));
    const auto out = moments(std::span<const float>(y).subspan(r * features, features));
    std::printf("%3zu  %14.6f %16.6f   ->  %11.2e %15.9f\n", r, in.mean, in.variance, out.mean, out.variance);

    // After normalization the mean is 0 up to float rounding. The variance is
    // var / (var + eps), just below 1: eps is what keeps it from being exactly 1. So compare
    // with that value, with room for float rounding.
    check(std::fabs(out.mean) < 1e-6, "mean after LayerNorm is not ~0, row", r);
    const double expected_variance = in.variance / (in.variance + norm.options().eps);
    check(std::fabs(out.variance - expected_variance) < 1e-5, "variance after LayerNorm is not ~1, row", r);
  }

  // The learnable parameters live in the LayerNorm object, one per feature, in accum_type
  // (float here). An optimizer would update them through these spans.
  std::printf("\ngamma:");
  for (float g : norm.gamma()) std::printf(" %g", static_cast<double>(g));
  std::printf("\nbeta: ");
  for (float b : norm.beta()) std::printf(" %g", static_cast<double>(b));
  std::printf("\n");
  check(norm.gamma().size() == features && norm.beta().size() == features, "gamma/beta sizes", 0);
  for (std::size_t j = 0; j < norm.gamma().size(); ++j) check(norm.gamma()[j] == 1.0f, "gamma[j] != 1, j =", j);
  for (std::size_t j = 0; j < norm.beta().size(); ++j) check(norm.beta()[j] == 0.0f, "beta[j] != 0, j =", j);

  // The same numbers from normkit::reference, the library's plain double-precision
  // implementation, which you can use to check any result of your own.
  const std::vector<double> xd(x.begin(), x.end());
  const auto ref = normkit::reference::layer_norm_forward(xd, features, {}, {}, norm.options().eps);
  double max_error = 0;
  for (std::size_t i = 0; i < y.size(); ++i) max_error = std::fmax(max_error, std::fabs(y[i] - ref.y[i]));
  std::printf("max |y - reference| = %.3g\n", max_error);
  check(max_error < 1e-5, "y differs from normkit::reference", 0);

  if (failures != 0) {
    std::printf("\n%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("\nall checks passed\n");
  return 0;
}
