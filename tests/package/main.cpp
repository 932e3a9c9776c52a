// Checks that a program using normkit as a package builds and runs: a LayerNorm<float> over
// 2 rows of 4 features must give rows with mean ~0 (and, so that an untouched y fails,
// mean square ~1). Exits non-zero otherwise.
#include <normkit/normkit.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <span>
#include <string_view>

int main() {
  constexpr std::size_t rows = 2;
  constexpr std::size_t features = 4;
  const std::array<float, rows * features> x{1.0F, 2.0F, 3.0F, 4.0F, -10.0F, 0.5F, 7.0F, 250.0F};
  std::array<float, rows * features> y{};

  const normkit::LayerNorm<float> ln(features);
  ln.forward(std::span<const float>(x), std::span<float>(y));

  int failures = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    float mean = 0.0F;
    float mean_square = 0.0F;
    for (std::size_t f = 0; f < features; ++f) {
      mean += y[r * features + f];
      mean_square += y[r * features + f] * y[r * features + f];
    }
    mean /= static_cast<float>(features);
    mean_square /= static_cast<float>(features);
    std::printf("row %zu: mean %g, mean square %g\n", r, static_cast<double>(mean),
                static_cast<double>(mean_square));
    if (!(std::fabs(mean) < 1e-5F && std::fabs(mean_square - 1.0F) < 1e-3F)) ++failures;
  }
  const std::string_view isa = normkit::to_string(normkit::active_isa());
  std::printf("normkit %s on ISA %.*s: %s\n", NORMKIT_VERSION_STRING, static_cast<int>(isa.size()),
              isa.data(), failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
