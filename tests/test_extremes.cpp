// NaN/±Inf stay in their row; rows of any magnitude (subnormal to FLT_MAX/DBL_MAX) match the reference.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "support.hpp"

using namespace nktest;

namespace {

/// Rows N(0.3, 1.7) scaled to a largest magnitude of 1.75 (so that ·2^127 stays below FLT_MAX and
/// ·2^1023 below DBL_MAX), then two rows of extremes: alternating ±1.75, and 1.75 but one −1.75.
std::vector<double> unit_rows(std::size_t features) {
  std::vector<double> x = Random(features).normal(3 * features, 0.3, 1.7);
  for (std::size_t i = 0; i < 3; ++i) {
    double peak = 0;
    for (std::size_t j = 0; j < features; ++j) peak = std::max(peak, std::fabs(x[i * features + j]));
    for (std::size_t j = 0; j < features; ++j) x[i * features + j] *= 1.75 / peak;
  }
  for (std::size_t j = 0; j < features; ++j) x.push_back(j % 2 == 0 ? 1.75 : -1.75);
  for (std::size_t j = 0; j < features; ++j) x.push_back(j == features / 2 ? -1.75 : 1.75);
  return x;
}

/// The rows of unit_rows(features) times 2^exponent, as T, against the reference on the same
/// values, which scales each row by a power of two of its own (see normkit::reference).
template <class Norm>
void check_magnitude(std::size_t features, int exponent, bool zero_eps) {
  using T = typename Norm::value_type;
  const double eps = zero_eps ? 0 : options_t<Norm>().eps;
  CAPTURE(features, exponent, eps);
  Norm norm = make_norm<Norm>(features, eps);
  randomize_parameters(norm, 3);
  std::vector<double> scaled = unit_rows(features);
  for (double& v : scaled) v = std::ldexp(v, exponent);
  const values_t<Norm> x = narrow<T>(scaled);
  const normkit::reference::Forward want = reference_forward(norm, widen(x));

  const Saved<Norm> got = forward_train(norm, x);
  CHECK(count_finite(got.y) == got.y.size());
  CHECK(count_finite(got.mean) == got.mean.size());
  check_within(norm_name<Norm>() + " y (magnitudes)", worst_relative(got.y, want.y), limits<T>().forward);
  // An rstd past A's range (eps = 0 and the smallest rows) is saved as +Inf.
  std::vector<double> got_rstd, want_rstd;
  for (std::size_t i = 0; i < want.rstd.size(); ++i) {
    if (want.rstd[i] > static_cast<double>(std::numeric_limits<typename Norm::accum_type>::max())) {
      CHECK(std::isinf(got.rstd[i]));
    } else {
      got_rstd.push_back(static_cast<double>(got.rstd[i]));
      want_rstd.push_back(want.rstd[i]);
    }
  }
  check_within(norm_name<Norm>() + " rstd (magnitudes)", worst_relative(got_rstd, want_rstd, 0), limits<T>().stats);
}

/// LayerNorm and RMSNorm, eps = 0 and the default eps, at each exponent.
template <class T>
void check_magnitudes(std::initializer_list<int> exponents) {
  for (const std::size_t features : {2u, 7u, 64u, 100u, 200u, 1000u, 8197u}) {
    for (const int exponent : exponents) {
      for (const bool zero_eps : {true, false}) {
        check_magnitude<LayerNorm<T>>(features, exponent, zero_eps);
        check_magnitude<RMSNorm<T>>(features, exponent, zero_eps);
      }
    }
  }
}

}  // namespace

TEST_CASE("a NaN or an infinity poisons its own row only", "[extremes]") {
  // 40 rows: the poisoned row sits among the first 16 of a group of short rows, or past them
  // in a group of 32; eps = 0 too, where the saved rstd of such a row comes out NaN.
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    for (const std::size_t features : {1u, 8u, 33u, 100u, 200u, 1000u}) {
      for (const double eps : {options_t<Norm>().eps, 0.0}) {
        Norm norm = make_norm<Norm>(features, eps);
        randomize_parameters(norm, 1);
        const auto x = test_rows<T>(40, features, 0, 2);
        const Saved<Norm> clean = forward_train(norm, x);
        for (const std::size_t row : {2u, 20u, 31u}) {
          for (const double bad : {std::numeric_limits<double>::quiet_NaN(), HUGE_VAL, -HUGE_VAL}) {
            for (const std::size_t at : {std::size_t{0}, features / 2, features - 1}) {
              CAPTURE(features, eps, row, bad, at);
              auto poisoned = x;
              poisoned[row * features + at] = from_double<T>(bad);
              const Saved<Norm> got = forward_train(norm, poisoned);
              CHECK(count_finite(row_of(got.y, row, features)) == 0);
              CHECK(other_rows_same(got.y, clean.y, row, features));
              CHECK(other_rows_same(got.mean, clean.mean, row, 1));
              CHECK(other_rows_same(got.rstd, clean.rstd, row, 1));
            }
          }
        }
      }
    }
  });
}

TEST_CASE("float rows of any magnitude give finite results matching the reference", "[extremes]") {
  // 2^-140 ≈ 7e-43 (subnormal) … 2^127 ≈ 1.7e38, which puts the largest values at ±3e38.
  check_magnitudes<float>({-140, -100, -50, -17, 0, 33, 66, 100, 127});
}

TEST_CASE("double rows of any magnitude give finite results matching the reference", "[extremes]") {
  // 2^-1060 ≈ 1e-319 (subnormal) … 2^1023 ≈ 9e307, which puts the largest values at ±1.6e308.
  check_magnitudes<double>({-1060, -500, -166, 0, 166, 500, 1023});
}

TEST_CASE("rows that need rescaling among ordinary ones come out as they do alone", "[extremes]") {
  // A rescaled row's output is written on its own, where an ordinary RMSNorm row's is written
  // while the next row is read (see forward_fused): every mix of the two must give each row
  // bitwise as a batch of that row alone does.
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    // Beyond A's comfortable range for variances and mean squares, both ways; float16 has no
    // such values.
    constexpr int far = std::is_same_v<T, double> ? 600 : 120;
    if constexpr (!std::is_same_v<T, float16>) {
      for (const std::size_t features : {300u, 1000u, 2048u}) {
        CAPTURE(features);
        Norm norm(features);
        randomize_parameters(norm, 1);
        const std::vector<int> exponents{0, far, 0, -far, -far, 0, 0, far, far, -far, 0};
        std::vector<double> wide = Random(features).normal(exponents.size() * features, 0.3, 1.7);
        for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = std::ldexp(wide[i], exponents[i / features]);
        const values_t<Norm> x = narrow<T>(wide);
        const Saved<Norm> batch = forward_train(norm, x);
        CHECK(same_bits(inference(norm, x), batch.y));
        for (std::size_t row = 0; row < exponents.size(); ++row) {
          CAPTURE(row);
          const Saved<Norm> alone = forward_train(norm, row_of(x, row, features));
          CHECK(same_bits(alone.y, row_of(batch.y, row, features)));
          CHECK(same_bits(alone.rstd, row_of(batch.rstd, row, 1)));
          CHECK(count_finite(alone.y) == features);
        }
      }
    }
  });
}

TEST_CASE("backward from rows whose rstd overflowed keeps the batch's gradients finite", "[extremes][backward]") {
  // Every third row has a standard deviation (RMSNorm: root mean square) below 1/max of A:
  // constant (LayerNorm 0 or 1234, RMSNorm 0) or tiny (N(0.3, 1.7)·2^-132 in the float-computed
  // types, ·2^-1040 in double; float16 holds no such values). With eps = 0, or 1e-80 in float,
  // training forward saves them rstd = +Inf. Backward must give them the x̂ that forward used
  // (0 for a constant row), so that the γ/β gradients match the reference over the other rows
  // plus the constant rows' dy in β's; tiny rows the dx of the reference, which is the dx of
  // the row scaled by 2^1040 or 2^132 (and eps by its square) scaled back, ±Inf beyond T (half
  // of them have dy·2^-40, which keeps most of their dx finite); and the other rows the dx
  // they have in a batch of their own. 133 rows cross two blocks of gradient partials; rows of
  // 4096 go by pairs; without elementwise_affine there are no gradients to block.
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    using A = typename Norm::accum_type;
    constexpr bool in_double = std::is_same_v<A, double>;
    constexpr int tiny = in_double ? -1040 : -132;
    for (const std::size_t features : {1u, 7u, 64u, 100u, 256u, 768u, 4096u}) {
      if (is_layer_norm_v<Norm> && features == 1) continue;  // every row constant
      const std::size_t rows = features < 4096 ? 133 : 10;
      for (const double eps : {0.0, 1e-80}) {
        if (in_double && eps != 0) continue;  // 1/sqrt(1e-80) fits a double
        for (const bool affine : {true, false}) {
          CAPTURE(features, eps, affine);
          const auto make = [&] {
            options_t<Norm> options;
            options.eps = eps;
            options.elementwise_affine = affine;
            if constexpr (is_layer_norm_v<Norm>) options.bias = affine;
            Norm norm(features, options);
            randomize_parameters(norm, features);
            return norm;
          };
          Norm norm = make();
          std::vector<double> wide = widen(test_rows<T>(rows, features, 0, features + 1));
          std::vector<double> wide_dy = widen(test_rows<T>(rows, features, 0, features + 2));
          for (std::size_t i = 0; i < rows; i += 3) {
            const bool flat = i % 2 == 0 || std::is_same_v<T, float16>;
            const double value = is_layer_norm_v<Norm> && i % 4 == 0 ? 1234 : 0;
            for (std::size_t j = i * features; j < (i + 1) * features; ++j) {
              wide[j] = flat ? value : std::ldexp(wide[j], tiny);
              if (i % 4 == 3) wide_dy[j] = std::ldexp(wide_dy[j], -40);
            }
          }
          const values_t<Norm> x = narrow<T>(wide), dy = narrow<T>(wide_dy);
          // Which rows came out constant, in T (tiny bfloat16 values may round to 0), and
          // which overflowed.
          std::vector<bool> constant(rows), overflowed(rows), varying(rows), ordinary(rows);
          for (std::size_t i = 0; i < rows; ++i) {
            const auto row = row_of(x, i, features);
            constant[i] = std::all_of(row.begin(), row.end(), [&](T v) { return to_double(v) == to_double(row[0]); }) &&
                          (is_layer_norm_v<Norm> || to_double(row[0]) == 0);
            overflowed[i] = i % 3 == 0;
            varying[i] = !constant[i];
            ordinary[i] = !overflowed[i];
          }
          const Saved<Norm> saved = forward_train(norm, x);
          for (std::size_t i = 0; i < rows; i += 3) REQUIRE(std::isinf(saved.rstd[i]));
          const values_t<Norm> dx = backward(norm, dy, x, saved);

          // The rows `keep` selects, in order.
          const auto pick = [&](const auto& batch, const std::vector<bool>& keep) {
            std::remove_cvref_t<decltype(batch)> out;
            for (std::size_t i = 0; i < rows; ++i) {
              const auto row = row_of(batch, i, features);
              if (keep[i]) out.insert(out.end(), row.begin(), row.end());
            }
            return out;
          };
          if (affine) {
            const normkit::reference::Backward want =
                reference_backward(norm, widen(pick(dy, varying)), widen(pick(x, varying)));
            std::vector<double> want_gradients = want.grad_gamma;
            if constexpr (is_layer_norm_v<Norm>) {
              std::vector<double> beta = want.grad_beta;
              const std::vector<double> dy_constant = widen(pick(dy, constant));
              for (std::size_t k = 0; k < dy_constant.size(); ++k) beta[k % features] += dy_constant[k];
              want_gradients.insert(want_gradients.end(), beta.begin(), beta.end());
            }
            check_within(norm_name<Norm>() + " gradients (rstd overflowed)",
                         worst_vs_peak(all_gradients(norm), want_gradients), limits<T>().grads);
          }

          Norm alone = make();
          const values_t<Norm> x_ordinary = pick(x, ordinary);
          const Saved<Norm> saved_ordinary = forward_train(alone, x_ordinary);
          CHECK(same_bits(pick(dx, ordinary), backward(alone, pick(dy, ordinary), x_ordinary, saved_ordinary)));

          const std::vector<double> gamma = widen(norm.gamma());
          for (std::size_t i = 0; i < rows; ++i) {
            if (constant[i] || !overflowed[i]) continue;
            CAPTURE(i);
            std::vector<double> scaled = widen(row_of(x, i, features));
            for (double& v : scaled) v = std::ldexp(v, -tiny);
            const std::vector<double> row_dy = widen(row_of(dy, i, features));
            const double scaled_eps = std::ldexp(eps, -2 * tiny);
            const normkit::reference::Backward want =
                is_layer_norm_v<Norm>
                    ? normkit::reference::layer_norm_backward(row_dy, scaled, features, gamma, scaled_eps)
                    : normkit::reference::rms_norm_backward(row_dy, scaled, features, gamma, scaled_eps);
            const double scaled_rstd =
                (is_layer_norm_v<Norm> ? normkit::reference::layer_norm_forward(scaled, features, {}, {}, scaled_eps)
                                       : normkit::reference::rms_norm_forward(scaled, features, {}, scaled_eps))
                    .rstd[0];
            // dx_term_scale's, and the largest dx, for the 16-bit types' rounding of it.
            double terms = 0;
            for (std::size_t j = 0; j < features; ++j) {
              const double g = row_dy[j] * (gamma.empty() ? 1 : gamma[j]);
              terms = std::max({terms, scaled_rstd * std::fabs(g), std::fabs(want.dx[j])});
            }
            // One check a row, naming the first value out of place.
            const std::vector<double> got = widen(row_of(dx, i, features));
            std::size_t wrong = 0, first = 0;
            for (std::size_t j = 0; j < features; ++j) {
              const double ref = std::ldexp(want.dx[j], -tiny), rounded = to_double(from_double<T>(ref));
              const double tolerance = std::ldexp(limits<T>().dx * terms, -tiny);
              const bool right = std::isinf(rounded) ? got[j] == rounded : std::fabs(got[j] - ref) <= tolerance;
              if (!right && wrong++ == 0) first = j;
            }
            INFO("dx [" << first << "]: got " << got[first] << ", want " << std::ldexp(want.dx[first], -tiny));
            CHECK(wrong == 0);
          }

          for (const bool over_dy : {true, false}) {
            CAPTURE(over_dy);
            Norm in_place = make();
            values_t<Norm> buffer = over_dy ? dy : x;
            if (over_dy) backward_into(in_place, buffer, x, saved, buffer);
            else backward_into(in_place, dy, buffer, saved, buffer);
            CHECK(same_bits(buffer, dx));
            CHECK(all_gradients(in_place) == all_gradients(norm));
          }
        }
      }
    }
  });
}
