// stability: why normkit does not compute the variance as E[x²] − E[x]².
//
// The one-pass formula var = mean(x²) − mean(x)² is the first thing one writes: a single loop
// keeping two sums. In exact arithmetic it is right. In floating point it subtracts two huge,
// nearly equal numbers: for a row of 2000 + N(0, 1), mean(x²) ≈ mean(x)² ≈ 4,000,000, and
// the variance we want, ≈ 1, is below float's resolution at that size (the spacing of floats
// near 4e6 is 0.25, and summing thousands of squares loses far more). The result is mostly
// rounding noise; it can even be negative, and then rstd = 1/sqrt(var + eps) is NaN.
//
// Such rows are not exotic: activations with a large common offset (a "massive activation",
// a bias that has drifted) look exactly like this. normkit uses Welford's update, which works
// with deviations from a running mean and never forms the huge sums, plus a cheap correction
// for rows whose mean is large compared to their spread (see DESIGN.md §2).
//
// This program normalizes such rows two ways and compares each with normkit::reference,
// which computes in double with two passes over the same float inputs:
//   naive   the one-pass E[x²] − E[x]² formula, in float
//   normkit LayerNorm<float>
// It exits non-zero unless normkit's error is at most 1e-5 and the naive one is clearly
// (at least 100 times) worse. The naive numbers themselves vary with compiler and CPU, so
// they are printed, not checked.

#include <normkit/normkit.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <vector>

namespace {

// Deterministic pseudo-random numbers (splitmix64) and standard normals by Box–Muller.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  double uniform01() {  // in (0, 1]
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return static_cast<double>((z >> 11) + 1) * 0x1p-53;
  }
  double normal() {
    return std::sqrt(-2.0 * std::log(uniform01())) * std::cos(2.0 * std::numbers::pi * uniform01());
  }

 private:
  std::uint64_t state_;
};

// What one writes without thinking about rounding: one pass, two float sums.
void naive_layer_norm(std::span<const float> x, std::span<float> y, std::size_t features, float eps,
                      std::span<float> variance) {
  const float n = static_cast<float>(features);
  for (std::size_t r = 0; r < x.size() / features; ++r) {
    const float* row = &x[r * features];
    float sum = 0, sum_sq = 0;
    for (std::size_t j = 0; j < features; ++j) {
      sum += row[j];
      sum_sq += row[j] * row[j];
    }
    const float mean = sum / n;
    const float var = sum_sq / n - mean * mean;  // the catastrophic cancellation
    variance[r] = var;
    const float rstd = 1.0f / std::sqrt(var + eps);
    for (std::size_t j = 0; j < features; ++j) y[r * features + j] = (row[j] - mean) * rstd;
  }
}

// Largest |a − b|. A NaN anywhere counts as an infinite error: NaN compares false to
// everything, so a plain max would silently skip it.
double max_error(std::span<const float> a, std::span<const double> b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    worst = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::fmax(worst, e);
  }
  return worst;
}

}  // namespace

int main() {
  constexpr std::size_t rows = 6, features = 4096;
  constexpr double offset = 2000.0;

  // x = 2000 + N(0, 1), rounded to float: these floats are the input every method sees.
  Rng rng(1);
  std::vector<float> x(rows * features);
  for (float& v : x) v = static_cast<float>(offset + rng.normal());

  // Reference: double precision, two passes, on the very same float values.
  normkit::LayerNorm<float> norm(features, {.eps = 1e-5, .elementwise_affine = false});
  const std::vector<double> xd(x.begin(), x.end());
  const auto ref = normkit::reference::layer_norm_forward(xd, features, {}, {}, norm.options().eps);

  // normkit; the training overload also returns rstd, from which we read its variance.
  std::vector<float> y_normkit(x.size()), mean(rows), rstd(rows);
  norm.forward(x, y_normkit, mean, rstd);

  std::vector<float> y_naive(x.size()), var_naive(rows);
  naive_layer_norm(x, y_naive, features, static_cast<float>(norm.options().eps), var_naive);

  std::printf("LayerNorm<float> of %zu rows of %g + N(0,1), %zu features (normkit ISA %s)\n\n", rows, offset,
              features, std::string(normkit::to_string(normkit::active_isa())).c_str());
  // Per row: the variance each method arrived at, and its largest output error.
  std::printf("        variance                                 max |y - reference|\n");
  std::printf("row     reference   normkit     naive          normkit     naive\n");
  double error_normkit = 0, error_naive = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const double eps = norm.options().eps;
    const double var_ref = 1.0 / (ref.rstd[r] * ref.rstd[r]) - eps;
    const double var_nk = 1.0 / (static_cast<double>(rstd[r]) * rstd[r]) - eps;
    const std::size_t first = r * features;
    const std::span<const double> row_ref = std::span<const double>(ref.y).subspan(first, features);
    const double e_nk = max_error(std::span<const float>(y_normkit).subspan(first, features), row_ref);
    const double e_naive = max_error(std::span<const float>(y_naive).subspan(first, features), row_ref);
    error_normkit = std::fmax(error_normkit, e_nk);
    error_naive = std::fmax(error_naive, e_naive);
    std::printf("%3zu  %12.6f %9.6f %9.3f      %9.2e %9.2e%s\n", r, var_ref, var_nk,
                static_cast<double>(var_naive[r]), e_nk, e_naive,
                std::isinf(e_naive) ? "  (NaN: negative variance)" : "");
  }
  std::printf("\nworst over all rows: normkit %.3g, naive %.3g\n", error_normkit, error_naive);

  int failures = 0;
  if (!(error_normkit <= 1e-5)) {
    std::printf("FAILED: normkit's error %.3g is above 1e-5\n", error_normkit);
    ++failures;
  }
  // "Clearly worse": at least 100 times normkit's error (or the 1e-7 rounding floor of float
  // outputs, should normkit's be even smaller). Only the ratio is checked, not the value.
  if (!(error_naive >= 100 * std::fmax(error_normkit, 1e-7))) {
    std::printf("FAILED: expected the naive formula to be clearly worse than normkit here\n");
    ++failures;
  }
  if (failures != 0) return 1;
  std::printf("\nnormkit matches the double-precision reference; the one-pass formula does not\n");
  return 0;
}
