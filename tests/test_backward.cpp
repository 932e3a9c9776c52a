// Backward vs the reference and vs finite differences of the double forward; gradient accumulation; options.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "support.hpp"

using namespace nktest;

namespace {

normkit::LayerNormOptions layer_options(bool affine, bool bias) {
  normkit::LayerNormOptions o;
  o.elementwise_affine = affine;
  o.bias = bias;
  return o;
}

normkit::RMSNormOptions rms_options(bool affine) {
  normkit::RMSNormOptions o;
  o.elementwise_affine = affine;
  return o;
}

/// L = Σ w·y over 3 rows, with random x, w (= dy), γ and β, through normkit's double forward:
/// normkit's backward must give L's gradients as central differences of that forward measure them.
template <class Norm>
void check_against_finite_differences(Norm norm) {
  const std::size_t features = norm.features(), n = 3 * features;
  CAPTURE(features, norm.gamma().size());
  randomize_parameters(norm, 7);
  std::vector<double> x = Random(8).normal(n, 0.3, 1.7);
  const std::vector<double> w = Random(9).normal(n, 0, 1);
  const auto loss = [&] { return dot(w, inference(norm, x)); };

  const std::vector<double> dx = backward(norm, w, x, forward_train(norm, x));
  const std::string name = norm_name<Norm>();
  check_within(name + " dx vs finite differences", worst_vs_peak(dx, numeric_gradient(x, loss)),
               finite_difference_limit);
  if (!norm.gamma().empty()) {
    check_within(name + " grad_gamma vs finite differences",
                 worst_vs_peak(widen(norm.grad_gamma()), numeric_gradient(norm.gamma(), loss)),
                 finite_difference_limit);
  }
  if constexpr (is_layer_norm_v<Norm>) {
    if (!norm.beta().empty()) {
      check_within(name + " grad_beta vs finite differences",
                   worst_vs_peak(widen(norm.grad_beta()), numeric_gradient(norm.beta(), loss)),
                   finite_difference_limit);
    }
  } else {
    // The data make the wrong RMSNorm gradient (with LayerNorm's −rstd·mean(g) term) miss by
    // far more than the limit, so the dx check above would catch it.
    const std::vector<double> gamma = widen(norm.gamma()), rstd = reference_forward(norm, x).rstd;
    double mean_g_term = 0, dx_peak = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      double mean_g = 0;
      for (std::size_t j = 0; j < features; ++j) mean_g += w[i * features + j] * (gamma.empty() ? 1 : gamma[j]);
      mean_g_term = std::max(mean_g_term, rstd[i] * std::fabs(mean_g) / static_cast<double>(features));
    }
    for (const double v : dx) dx_peak = std::max(dx_peak, std::fabs(v));
    CHECK(mean_g_term > 1e4 * finite_difference_limit * dx_peak);
  }
}

}  // namespace

TEST_CASE("LayerNorm backward matches the reference at every size", "[layer_norm][backward]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : test_sizes()) {
      check_backward_against_reference(LayerNorm<T>(features), rows_for(features));
    }
  });
}

TEST_CASE("RMSNorm backward matches the reference at every size", "[rms_norm][backward]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : test_sizes()) {
      check_backward_against_reference(RMSNorm<T>(features), rows_for(features));
    }
  });
}

TEST_CASE("backward stays accurate on rows far from zero", "[backward]") {
  // 2000 + N(0, 1): the saved float mean is off by up to 6e-5, which x̂ must not inherit.
  for_each_norm([]<class Norm>() {
    for (const std::size_t features : {17u, 768u, 4096u}) {
      for (const double offset : {1e2, 2e3, 1e4}) check_backward_against_reference(Norm(features), 3, offset);
    }
  });
}

TEST_CASE("backward of short rows by whole groups of 16 and a partial one", "[backward]") {
  // 37 rows: short LayerNorm rows go backward by groups of 16 rows where the pass fits the cache.
  for_each_norm([]<class Norm>() {
    for (const std::size_t features : {1u, 8u, 64u, 100u, 256u}) check_backward_against_reference(Norm(features), 37);
    check_backward_against_reference(Norm(64), 37, 2e3);
  });
}

TEST_CASE("backward over 65536 rows of 64 features", "[backward]") {
  // dγ and dβ sum 65536 rows: within the 2e-5 in float.
  check_backward_against_reference(LayerNorm<float>(64), 65536);
  check_backward_against_reference(RMSNorm<float>(64), 65536);
}

TEST_CASE("gradient sums over many rows lose accuracy like log(rows), not rows", "[backward]") {
  // DESIGN §2: rows are summed in fixed blocks whose partials are added pairwise. For dβ = Σ dy
  // over 65536 rows of N(0, 1) (peak ~ 600), that costs ~2e-7 of the peak; one float running
  // sum per feature costs ~256·2^-24·256 absolute, ~6e-6 of the peak. 1e-6 tells them apart.
  LayerNorm<float> norm(64);
  const std::size_t rows = 65536;
  const auto x = normal_values<float>(rows * 64, 0.3, 1.7, 1);
  const auto dy = normal_values<float>(rows * 64, 0, 1, 2);
  backward_into(norm, dy, x, forward_train(norm, x), {});
  const normkit::reference::Backward want = reference_backward(norm, widen(dy), widen(x));
  check_within("LayerNorm<float> grad_beta over 65536 rows", worst_vs_peak(norm.grad_beta(), want.grad_beta), 1e-6);
  check_within("LayerNorm<float> grad_gamma over 65536 rows", worst_vs_peak(norm.grad_gamma(), want.grad_gamma), 1e-6);
}

TEST_CASE("backward without elementwise_affine or bias", "[backward][options]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : {1u, 33u, 1000u, 4099u}) {
      check_backward_against_reference(LayerNorm<T>(features, layer_options(false, false)), 3);
      check_backward_against_reference(LayerNorm<T>(features, layer_options(true, false)), 3);
      check_backward_against_reference(RMSNorm<T>(features, rms_options(false)), 3);
    }
  });
}

TEST_CASE("LayerNorm backward is the gradient of the forward (finite differences)", "[layer_norm][backward]") {
  for (const std::size_t features : {1u, 7u, 33u}) {
    check_against_finite_differences(LayerNorm<double>(features));
    check_against_finite_differences(LayerNorm<double>(features, layer_options(true, false)));
    check_against_finite_differences(LayerNorm<double>(features, layer_options(false, false)));
  }
}

TEST_CASE("RMSNorm backward is the gradient of the forward, without a mean(g) term (finite differences)",
          "[rms_norm][backward]") {
  // Not 1 feature: there dx ≈ eps/|x|³, below what differences of an O(1) loss can resolve.
  for (const std::size_t features : {2u, 7u, 33u}) {
    check_against_finite_differences(RMSNorm<double>(features));
    check_against_finite_differences(RMSNorm<double>(features, rms_options(false)));
  }
}

TEST_CASE("RMSNorm backward gives a −0 input the reference's sign of zero at every row length",
          "[rms_norm][backward]") {
  // Where x = −0 and dy = −0, dx = rstd·(g − x̂·mean(g·x̂)) is −0 where mean(g·x̂) < 0 (row 0,
  // dy = −x elsewhere) and +0 where it is > 0 (row 1, dy = x), if every product keeps its sign.
  // 64 features take the registers where 16 vectors hold them (not on scalar, nor NEON's
  // doubles), 1000 a row at a time, 4099 the tiles of two rows.
  for_each_type([]<class T>() {
    for (const std::size_t features : {64u, 1000u, 4099u}) {
      CAPTURE(features);
      RMSNorm<T> norm(features);
      values_t<RMSNorm<T>> x = normal_values<T>(2 * features, 0, 1, 11);
      values_t<RMSNorm<T>> dy(x.size());
      for (std::size_t j = 0; j < features; ++j) {
        dy[j] = from_double<T>(-to_double(x[j]));
        dy[features + j] = x[features + j];
      }
      const std::size_t zeros[] = {0, 5, features - 1};
      for (const std::size_t j : zeros) {
        for (const std::size_t i : {std::size_t{0}, features}) x[i + j] = dy[i + j] = from_double<T>(-0.0);
      }
      const auto dx = backward(norm, dy, x, forward_train(norm, x));
      const auto want = reference_backward(norm, widen(dy), widen(x)).dx;
      for (const std::size_t i : {std::size_t{0}, features}) {
        for (const std::size_t j : zeros) {
          CAPTURE(i, j);
          REQUIRE(want[i + j] == 0);
          CHECK(to_double(dx[i + j]) == 0);
          CHECK(std::signbit(to_double(dx[i + j])) == std::signbit(want[i + j]));
        }
      }
    }
  });
}

TEST_CASE("backward adds into the gradients, zero_grad clears them, an empty dx is skipped", "[backward]") {
  // 130 rows: more than two blocks of rows; 5 rows of 4099 features: two tiles and a single row.
  for_each_norm([]<class Norm>() {
    for (const std::size_t features : {33u, 4099u}) {
      CAPTURE(features);
      const std::size_t rows = features > 1000 ? 5 : 130;
      using A = typename Norm::accum_type;
      using T = typename Norm::value_type;
      Norm norm(features);
      randomize_parameters(norm, 3);
      const auto x = test_rows<T>(rows, features, 0, 4);
      const auto dy = normal_values<T>(rows * features, 0, 1, 5);
      const Saved<Norm> saved = forward_train(norm, x);
      // The row blocks' sum is formed apart and added in once (DESIGN §2), so a second call adds
      // the same total again: one rounding per value.
      const double one_rounding = 2 * static_cast<double>(std::numeric_limits<A>::epsilon());

      const auto dx1 = backward(norm, dy, x, saved);
      const std::vector<double> once = all_gradients(norm);
      const auto dx2 = backward(norm, dy, x, saved);
      std::vector<double> twice_want = once;
      for (double& g : twice_want) g *= 2;
      CHECK(same_bits(dx1, dx2));
      check_within(norm_name<Norm>() + " second backward adds", worst_vs_peak(all_gradients(norm), twice_want), one_rounding);

      norm.zero_grad();
      CHECK(count_nonzero(all_gradients(norm)) == 0);
      backward(norm, dy, x, saved);
      CHECK(all_gradients(norm) == once);

      norm.zero_grad();
      backward_into(norm, dy, x, saved, {});
      if (features > 1000) CHECK(all_gradients(norm) == once);  // the same tiles, without dx
      check_within(norm_name<Norm>() + " backward without dx", worst_vs_peak(all_gradients(norm), once), one_rounding);

      // backward() keeps its partials' buffers from call to call: a call over 3 rows (one block,
      // not three) leaves nothing behind for the next.
      const auto x3 = test_rows<T>(3, features, 0, 6);
      const auto dy3 = normal_values<T>(3 * features, 0, 1, 7);
      backward(norm, dy3, x3, forward_train(norm, x3));
      norm.zero_grad();
      backward(norm, dy, x, saved);
      CHECK(all_gradients(norm) == once);
    }
  });
}

// The functors keep backward()'s scratch buffers; that must not cost them their cheap moves
// (std::vector<LayerNorm<float>> would copy every γ on growth).
static_assert(std::is_nothrow_move_constructible_v<normkit::LayerNorm<float>> &&
              std::is_nothrow_move_assignable_v<normkit::LayerNorm<float>> &&
              std::is_nothrow_move_constructible_v<normkit::RMSNorm<normkit::bfloat16>> &&
              std::is_nothrow_move_assignable_v<normkit::RMSNorm<normkit::bfloat16>>);
