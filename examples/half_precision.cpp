// half_precision: LayerNorm and RMSNorm on bfloat16 and float16 activations.
//
// Inference engines often keep activations in 16 bits to halve memory traffic. normkit reads
// them as they are, widens each value to float, computes the statistics and the output in
// float, and rounds once on the way out, so the only error is that final rounding: at most
// half a unit in the last place of the 16-bit result (2^-9 relative for bfloat16, 2^-12 for
// float16). γ and β stay in float, as a training framework would keep them.
//
// The program normalizes the same batch in bfloat16, float16 and float, prints how far each
// 16-bit result is from the float one in units of its own rounding, and exits non-zero if any
// is more than one unit away.

#include <normkit/normkit.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kRows = 8, kFeatures = 4096;

// The largest |got − want| over the batch, in units of the 16-bit type's spacing at |want|
// (2^-7 relative for bfloat16, 2^-10 for float16, with float16's subnormal floor).
template <class Half>
double worst_in_units(const std::vector<Half>& got, const std::vector<float>& want, int mantissa_bits) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double w = want[i];
    const double spacing = std::ldexp(1.0, std::max(std::ilogb(std::max(std::abs(w), 1e-30)), -14) - mantissa_bits);
    worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(got[i])) - w) / spacing);
  }
  return worst;
}

template <class Half, class Norm>
bool compare(const char* what, const char* type, const std::vector<float>& x, int mantissa_bits) {
  // The same input values in both types: round x to Half first, then widen that for float.
  std::vector<Half> x_half(x.size()), y_half(x.size());
  std::vector<float> x_float(x.size()), y_float(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x_half[i] = Half(x[i]);
    x_float[i] = static_cast<float>(x_half[i]);
  }

  typename Norm::template rebind<Half> half_norm(kFeatures);
  typename Norm::template rebind<float> float_norm(kFeatures);
  half_norm.apply_parameters();
  float_norm.apply_parameters();
  half_norm.norm(x_half, y_half);
  float_norm.norm(x_float, y_float);

  const double worst = worst_in_units(y_half, y_float, mantissa_bits);
  std::printf("  %-9s %-9s worst difference from float: %.3f units in the last place\n", what, type, worst);
  // One rounding of the float result is at most half a unit; allow the float result's own
  // last-bit differences on top.
  return worst <= 1.0;
}

// LayerNorm or RMSNorm over a given element type, with the same non-trivial γ (and β).
struct LayerNormCase {
  template <class T>
  struct rebind {
    normkit::LayerNorm<T> norm;
    explicit rebind(std::size_t features) : norm(features) {}
    void apply_parameters() {
      for (std::size_t j = 0; j < norm.features(); ++j) {
        norm.gamma()[j] = 1.0f + 0.001f * static_cast<float>(j % 100);
        norm.beta()[j] = 0.01f * static_cast<float>(j % 7);
      }
    }
  };
};

struct RMSNormCase {
  template <class T>
  struct rebind {
    normkit::RMSNorm<T> norm;
    explicit rebind(std::size_t features) : norm(features) {}
    void apply_parameters() {
      for (std::size_t j = 0; j < norm.features(); ++j) norm.gamma()[j] = 0.5f + 0.001f * static_cast<float>(j % 300);
    }
  };
};

}  // namespace

int main() {
  // Activations with a per-row offset and scale, as after a residual add.
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kRows * kFeatures);
  for (std::size_t r = 0; r < kRows; ++r) {
    const float offset = 0.5f * static_cast<float>(r), scale = 1.0f + static_cast<float>(r);
    for (std::size_t j = 0; j < kFeatures; ++j) x[r * kFeatures + j] = offset + scale * normal(rng);
  }

  std::printf("normkit half precision: %zu rows x %zu features, ISA %s\n", kRows, kFeatures,
              std::string(normkit::to_string(normkit::active_isa())).c_str());
  bool ok = true;
  ok &= compare<normkit::bfloat16, LayerNormCase>("LayerNorm", "bfloat16", x, 7);
  ok &= compare<normkit::float16, LayerNormCase>("LayerNorm", "float16", x, 10);
  ok &= compare<normkit::bfloat16, RMSNormCase>("RMSNorm", "bfloat16", x, 7);
  ok &= compare<normkit::float16, RMSNormCase>("RMSNorm", "float16", x, 10);
  std::printf(ok ? "ok: every 16-bit result is the float result rounded once\n" : "FAILED\n");
  return ok ? 0 : 1;
}
