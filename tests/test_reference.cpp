// The double reference: hand-computed values, backward vs finite differences of its forward, argument checks.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support.hpp"

using namespace nktest;
namespace reference = normkit::reference;

namespace {

void check_values(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    CHECK(std::fabs(got[i] - want[i]) <= 1e-14 * std::max(1.0, std::fabs(want[i])));
  }
}

/// The parameter sets the finite-difference tests cover: with γ and β, with γ only, with neither.
struct Affine {
  bool gamma, beta;
};

}  // namespace

TEST_CASE("reference LayerNorm of [1, 2, 3, 4]: mean 2.5, var 1.25", "[reference]") {
  const std::vector<double> x = {1, 2, 3, 4, 10, 10, 10, 10};
  const double s5 = std::sqrt(5.0);
  SECTION("eps = 0, no affine: y = ±3/√5 = ±1.3416…, ±1/√5 = ±0.4472…") {
    const reference::Forward f = reference::layer_norm_forward(x, 4, {}, {}, 0);
    check_values(f.mean, {2.5, 10});
    CHECK(f.rstd[0] == 1 / std::sqrt(1.25));
    CHECK(std::isinf(f.rstd[1]));  // 1/sqrt(0)
    check_values(std::vector<double>(f.y.begin(), f.y.begin() + 4), {-3 / s5, -1 / s5, 1 / s5, 3 / s5});
  }
  SECTION("eps = 1e-5 with γ and β") {
    const std::vector<double> gamma = {1, 2, 0.5, -1}, beta = {0, 1, -1, 0.25};
    const reference::Forward f = reference::layer_norm_forward(x, 4, gamma, beta, 1e-5);
    const double r = 1 / std::sqrt(1.25 + 1e-5), r_const = 1 / std::sqrt(1e-5);
    check_values(f.rstd, {r, r_const});
    check_values(f.y, {-1.5 * r, 2 * -0.5 * r + 1, 0.5 * 0.5 * r - 1, -1 * 1.5 * r + 0.25, 0, 1, -1, 0.25});
  }
}

TEST_CASE("reference RMSNorm of [1, 2, 3, 4]: mean square 7.5", "[reference]") {
  const std::vector<double> x = {1, 2, 3, 4, 0, 0, 0, 0};
  SECTION("eps = 0, no γ: y = x/√7.5 = 0.3651…, 0.7303…, 1.0954…, 1.4606…") {
    const reference::Forward f = reference::rms_norm_forward(x, 4, {}, 0);
    CHECK(f.mean.empty());
    CHECK(f.rstd[0] == 1 / std::sqrt(7.5));
    const double r = 1 / std::sqrt(7.5);
    check_values(std::vector<double>(f.y.begin(), f.y.begin() + 4), {r, 2 * r, 3 * r, 4 * r});
  }
  SECTION("eps = 1e-6 with γ; a zero row gives 0") {
    const std::vector<double> gamma = {1, 2, 0.5, -1};
    const reference::Forward f = reference::rms_norm_forward(x, 4, gamma, 1e-6);
    const double r = 1 / std::sqrt(7.5 + 1e-6);
    check_values(f.rstd, {r, 1 / std::sqrt(1e-6)});
    check_values(f.y, {r, 4 * r, 1.5 * r, -4 * r, 0, 0, 0, 0});
  }
}

namespace {

std::vector<double> times_power_of_two(std::vector<double> values, int exponent) {
  for (double& v : values) v = std::ldexp(v, exponent);
  return values;
}

}  // namespace

TEST_CASE("reference results scale exactly with rows of magnitude 1e-271 to 1e301", "[reference]") {
  // x·2^k gives mean·2^k, rstd and dx·2^-k, and the same y and gradients, bit for bit (eps = 0):
  // the squares of such rows overflow or vanish in double unless the reference scales them.
  constexpr std::size_t features = 33, rows = 3;
  const std::vector<double> x = Random(1).normal(rows * features, 0.5, 1.5), dy = Random(2).normal(rows * features, 0, 1),
                            gamma = Random(3).normal(features, 1, 0.5), beta = Random(4).normal(features, 0, 0.5);
  const reference::Forward ln = reference::layer_norm_forward(x, features, gamma, beta, 0);
  const reference::Forward rms = reference::rms_norm_forward(x, features, gamma, 0);
  const reference::Backward ln_back = reference::layer_norm_backward(dy, x, features, gamma, 0);
  const reference::Backward rms_back = reference::rms_norm_backward(dy, x, features, gamma, 0);
  for (const int k : {-900, -600, -300, 300, 600, 1000}) {
    CAPTURE(k);
    const std::vector<double> scaled = times_power_of_two(x, k);
    const reference::Forward ln_k = reference::layer_norm_forward(scaled, features, gamma, beta, 0);
    CHECK(ln_k.y == ln.y);
    CHECK(ln_k.mean == times_power_of_two(ln.mean, k));
    CHECK(ln_k.rstd == times_power_of_two(ln.rstd, -k));
    const reference::Forward rms_k = reference::rms_norm_forward(scaled, features, gamma, 0);
    CHECK(rms_k.y == rms.y);
    CHECK(rms_k.rstd == times_power_of_two(rms.rstd, -k));
    const reference::Backward ln_back_k = reference::layer_norm_backward(dy, scaled, features, gamma, 0);
    CHECK(ln_back_k.dx == times_power_of_two(ln_back.dx, -k));
    CHECK(ln_back_k.grad_gamma == ln_back.grad_gamma);
    CHECK(ln_back_k.grad_beta == ln_back.grad_beta);
    const reference::Backward rms_back_k = reference::rms_norm_backward(dy, scaled, features, gamma, 0);
    CHECK(rms_back_k.dx == times_power_of_two(rms_back.dx, -k));
    CHECK(rms_back_k.grad_gamma == rms_back.grad_gamma);

    // An eps of 1e-5 cannot show beside a variance of 1e180, and is all there is beside 1e-180.
    const double eps = 1e-5;
    if (k > 0) {
      CHECK(reference::layer_norm_forward(scaled, features, gamma, beta, eps).rstd == ln_k.rstd);
      CHECK(reference::rms_norm_forward(scaled, features, gamma, eps).rstd == rms_k.rstd);
    } else {
      const std::vector<double> eps_only(rows, 1 / std::sqrt(eps));
      CHECK(reference::layer_norm_forward(scaled, features, gamma, beta, eps).rstd == eps_only);
      CHECK(reference::rms_norm_forward(scaled, features, gamma, eps).rstd == eps_only);
    }
  }
}

namespace {

// L = Σ w·y for random w, so dy = w; x, γ, β random; 3 rows of 7 and 3 rows of 33.
struct FiniteDifferenceCase {
  std::size_t features;
  std::vector<double> x, w, gamma, beta;
  double eps = 1e-5;

  explicit FiniteDifferenceCase(std::size_t f)
      : features(f),
        x(Random(1).normal(3 * f, 0.3, 1.7)),
        w(Random(2).normal(3 * f, 0, 1)),
        gamma(Random(3).normal(f, 1, 0.5)),
        beta(Random(4).normal(f, 0, 0.5)) {}
};

}  // namespace

TEST_CASE("reference LayerNorm backward matches finite differences of its forward", "[reference][backward]") {
  for (const std::size_t features : {7u, 33u}) {
    FiniteDifferenceCase c(features);
    for (const Affine affine : {Affine{true, true}, Affine{true, false}, Affine{false, false}}) {
      CAPTURE(features, affine.gamma, affine.beta);
      const std::span<double> g = affine.gamma ? std::span<double>(c.gamma) : std::span<double>();
      const std::span<double> b = affine.beta ? std::span<double>(c.beta) : std::span<double>();
      const auto loss = [&] { return dot(c.w, reference::layer_norm_forward(c.x, features, g, b, c.eps).y); };
      const reference::Backward grads = reference::layer_norm_backward(c.w, c.x, features, g, c.eps);
      check_within("reference LayerNorm dx vs finite differences", worst_vs_peak(grads.dx, numeric_gradient(c.x, loss)),
                   finite_difference_limit);
      if (affine.gamma) {
        check_within("reference LayerNorm dgamma vs finite differences",
                     worst_vs_peak(grads.grad_gamma, numeric_gradient(g, loss)), finite_difference_limit);
      }
      if (affine.beta) {
        check_within("reference LayerNorm dbeta vs finite differences",
                     worst_vs_peak(grads.grad_beta, numeric_gradient(b, loss)), finite_difference_limit);
      }
    }
  }
}

TEST_CASE("reference RMSNorm backward matches finite differences of its forward", "[reference][backward]") {
  for (const std::size_t features : {7u, 33u}) {
    FiniteDifferenceCase c(features);
    for (const bool with_gamma : {true, false}) {
      CAPTURE(features, with_gamma);
      const std::span<double> g = with_gamma ? std::span<double>(c.gamma) : std::span<double>();
      const auto loss = [&] { return dot(c.w, reference::rms_norm_forward(c.x, features, g, c.eps).y); };
      const reference::Backward grads = reference::rms_norm_backward(c.w, c.x, features, g, c.eps);
      CHECK(grads.grad_beta.empty());
      check_within("reference RMSNorm dx vs finite differences", worst_vs_peak(grads.dx, numeric_gradient(c.x, loss)),
                   finite_difference_limit);
      if (with_gamma) {
        check_within("reference RMSNorm dgamma vs finite differences",
                     worst_vs_peak(grads.grad_gamma, numeric_gradient(g, loss)), finite_difference_limit);
      }
    }
  }
}

TEST_CASE("reference functions reject bad arguments", "[reference][errors]") {
  const std::vector<double> x(12, 1.0), dy(8, 1.0), gamma(3, 1.0);
  const auto check = [](const std::string& message, const char* fn, const char* detail) {
    INFO(message);
    CHECK(message.find(fn) != std::string::npos);
    CHECK(message.find(detail) != std::string::npos);
  };
  check(invalid_argument_message([&] { reference::layer_norm_forward(x, 5, {}, {}, 0); }),
        "normkit::reference::layer_norm_forward", "12");
  check(invalid_argument_message([&] { reference::layer_norm_forward(x, 0, {}, {}, 0); }),
        "normkit::reference::layer_norm_forward", "features");
  check(invalid_argument_message([&] { reference::layer_norm_forward(x, 4, gamma, {}, 0); }),
        "normkit::reference::layer_norm_forward", "gamma");
  check(invalid_argument_message([&] { reference::rms_norm_forward(x, 4, gamma, 0); }),
        "normkit::reference::rms_norm_forward", "gamma");
  check(invalid_argument_message([&] { reference::layer_norm_backward(dy, x, 4, {}, 0); }),
        "normkit::reference::layer_norm_backward", "dy");
  check(invalid_argument_message([&] { reference::rms_norm_backward(dy, x, 4, {}, 0); }),
        "normkit::reference::rms_norm_backward", "dy");
}
