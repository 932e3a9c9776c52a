// LayerNorm forward vs the reference (every size, offsets, uneven rows), a hand-checked batch, constant rows, options.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "support.hpp"

using namespace nktest;

namespace {

normkit::LayerNormOptions options(double eps, bool affine = true, bool bias = true) {
  normkit::LayerNormOptions o;
  o.eps = eps;
  o.elementwise_affine = affine;
  o.bias = bias;
  return o;
}

}  // namespace

TEST_CASE("LayerNorm forward matches the reference at every size", "[layer_norm][forward]") {
  // With γ and β, γ only, and neither: each its own kernel, holding γ and β in registers up to
  // its own row size.
  for_each_type([]<class T>() {
    for (const std::size_t features : test_sizes()) {
      check_forward_against_reference(LayerNorm<T>(features), rows_for(features));
      check_forward_against_reference(LayerNorm<T>(features, options(1e-5, true, false)), rows_for(features));
      check_forward_against_reference(LayerNorm<T>(features, options(1e-5, false)), rows_for(features));
    }
  });
}

TEST_CASE("LayerNorm forward matches the reference over many rows", "[layer_norm][forward]") {
  // More rows than the kernels process together, so that groups of rows end mid-batch;
  // 8197 features: long rows, which go by pairs and blocks of columns, the last one partial.
  for_each_type([]<class T>() {
    for (const std::size_t features : {9u, 64u, 100u, 300u, 1000u, 8197u})
      check_forward_against_reference(LayerNorm<T>(features), 37);
  });
}

TEST_CASE("LayerNorm forward stays accurate on rows far from zero", "[layer_norm][forward]") {
  // |mean| up to 1e4·std: float keeps ~3 digits fewer of x − mean unless the kernel corrects.
  for_each_type([]<class T>() {
    for (const std::size_t features : {5u, 17u, 100u, 768u, 4096u, 4099u}) {
      for (const double offset : {1e2, 2e3, 1e4, -2e3}) {
        check_forward_against_reference(LayerNorm<T>(features), 3, offset);
      }
    }
  });
}

TEST_CASE("LayerNorm forward stays accurate when a row's first half differs from the rest", "[layer_norm][forward]") {
  // Short rows are centered on the mean of at least their first half: one standard deviation
  // from the row's mean in rows whose halves sit 1e3 apart; sorted rows are the next worst.
  for_each_type([]<class T>() {
    for (const std::size_t features : {2u, 3u, 16u, 17u, 48u, 64u, 100u, 128u, 256u}) {
      CAPTURE(features);
      LayerNorm<T> norm(features);
      randomize_parameters(norm, features + 5);
      std::vector<double> x = Random(features + 6).normal(4 * features, 0, 1);
      const auto row = [&](std::size_t i) { return x.begin() + static_cast<std::ptrdiff_t>(i * features); };
      std::for_each(row(0), row(0) + static_cast<std::ptrdiff_t>(features / 2), [](double& v) { v += 1e3; });
      std::for_each(row(1) + static_cast<std::ptrdiff_t>(features / 2), row(2), [](double& v) { v += 1e3; });
      std::sort(row(2), row(3));
      std::sort(row(3), row(4), std::greater<>());
      const std::vector<T> rows = narrow<T>(x);
      check_forward(forward_train(norm, rows), reference_forward(norm, widen(rows)),
                    limits<T>().forward, " (uneven rows)");
    }
  });
}

TEST_CASE("LayerNorm of a hand-checked (4, 8) batch: one mean and one variance per row", "[layer_norm][forward]") {
  // Exact in float: row 0 is 1…8 (mean 4.5, var 5.25), row 1 alternates 1000.5 and 999.5
  // (mean 1000, var 0.25), row 2 alternates −3 and −1 (mean −2, var 1), row 3 is seven 0s and
  // a 16 (mean 2, var 28).
  const std::vector<double> x = {1,      2,     3,      4,     5,      6,     7,      8,      //
                                 1000.5, 999.5, 1000.5, 999.5, 1000.5, 999.5, 1000.5, 999.5,  //
                                 -3,     -1,    -3,     -1,    -3,     -1,    -3,     -1,     //
                                 0,      0,     0,      0,     0,      0,     0,      16};
  const double mean[] = {4.5, 1000, -2, 2}, var[] = {5.25, 0.25, 1, 28};
  for_types<float, double>([&]<class T>() {
    INFO("element type " << type_name<T>());
    const LayerNorm<T> norm(8);
    const Saved<LayerNorm<T>> got = forward_train(norm, narrow<T>(x));
    normkit::reference::Forward want{std::vector<double>(32), {}, {}};
    for (std::size_t i = 0; i < 4; ++i) {
      want.mean.push_back(mean[i]);
      want.rstd.push_back(1 / std::sqrt(var[i] + 1e-5));
      for (std::size_t j = 0; j < 8; ++j) want.y[8 * i + j] = (x[8 * i + j] - mean[i]) * want.rstd[i];
    }
    check_forward(got, want, limits<T>().forward, "");
  });
}

TEST_CASE("LayerNorm of a constant row is exactly beta", "[layer_norm][forward]") {
  // x − mean is exactly 0, whatever eps (even 0) and however large the constant.
  for_each_type([]<class T>() {
    for (const std::size_t features : {1u, 2u, 7u, 64u, 1000u, 4099u}) {
      for (const double constant : {0.0, 1234.0, -3.5, 1e-30, 3e38}) {
        const T c = from_double<T>(constant);
        if (!std::isfinite(to_double(c))) continue;  // 3e38 is +Inf in float16
        for (const double eps : {1e-5, 1e-6, 0.0}) {
          CAPTURE(features, constant, eps);
          LayerNorm<T> norm(features, options(eps));
          randomize_parameters(norm, 5);
          const values_t<LayerNorm<T>> x(3 * features, c);
          values_t<LayerNorm<T>> beta(x.size());
          for (std::size_t k = 0; k < beta.size(); ++k) beta[k] = from_double<T>(norm.beta()[k % features]);
          CHECK(same_bits(inference(norm, x), beta));

          LayerNorm<T> no_bias(features, options(eps, true, false));
          randomize_parameters(no_bias, 5);
          CHECK(count_nonzero(inference(no_bias, x)) == 0);
        }
      }
    }
  });
}

TEST_CASE("LayerNorm saves exact statistics for constant rows among ordinary ones", "[layer_norm][forward]") {
  // A batch's padding: constant rows, every third row of a batch, short rows and long. They have
  // mean = the constant exactly and rstd = 1/sqrt(eps), +Inf for eps = 0 (and for eps = 1e-80 in
  // float); their neighbours match the reference. Long double rows of 1e-200 to 1e300 are
  // rescaled by up to 2^±971, where eps·scale² leaves double's range. Without β, a row of −0
  // gives −0·γ, as x − mean is −0.
  for_each_type([]<class T>() {
    using A = accum_t<T>;
    for (const std::size_t features : {1u, 7u, 16u, 64u, 100u, 256u, 768u}) {
      for (const double constant : {0.0, -0.0, 1234.0, -3.5, 1e-30, 1e200, 1e300, -1e-200}) {
        if (!std::isfinite(to_double(from_double<T>(constant)))) continue;
        for (const double eps : {1e-5, 0.0, 1e-80}) {
          CAPTURE(features, constant, eps);
          LayerNorm<T> norm(features, options(eps));
          randomize_parameters(norm, features + 7);
          constexpr std::size_t rows = 37;
          std::vector<T> x = test_rows<T>(rows, features, 0, features + 8);
          const T c = from_double<T>(constant);
          for (std::size_t i = 0; i < rows; i += 3) {
            std::fill_n(x.begin() + static_cast<std::ptrdiff_t>(i * features), features, c);
          }
          const Saved<LayerNorm<T>> got = forward_train(norm, x);
          if (eps == 1e-5) {
            check_forward(got, reference_forward(norm, widen(x)), limits<T>().forward, " (constant rows)");
          }
          values_t<LayerNorm<T>> beta(features);
          for (std::size_t j = 0; j < features; ++j) beta[j] = from_double<T>(norm.beta()[j]);
          for (std::size_t i = 0; i < rows; i += 3) {
            CAPTURE(i);
            CHECK(got.mean[i] == static_cast<A>(to_double(c)));
            CHECK(got.rstd[i] == static_cast<A>(1 / std::sqrt(eps)));
            CHECK(same_bits(row_of(got.y, i, features), beta));
          }
          if (constant == 0 && std::signbit(constant)) {
            LayerNorm<T> no_bias(features, options(eps, true, false));
            randomize_parameters(no_bias, features + 9);
            const values_t<LayerNorm<T>> y = inference(no_bias, x);
            values_t<LayerNorm<T>> zeros(features);
            for (std::size_t j = 0; j < features; ++j) zeros[j] = from_double<T>(-0.0 * no_bias.gamma()[j]);
            for (std::size_t i = 0; i < rows; i += 3) CHECK(same_bits(row_of(y, i, features), zeros));
          }
        }
      }
    }
  });
}

TEST_CASE("LayerNorm default options and parameters", "[layer_norm][options]") {
  const LayerNorm<float> norm(10);
  CHECK(norm.features() == 10);
  CHECK(norm.options().eps == 1e-5);
  CHECK(norm.options().elementwise_affine);
  CHECK(norm.options().bias);
  REQUIRE(norm.gamma().size() == 10);
  REQUIRE(norm.beta().size() == 10);
  REQUIRE(norm.grad_gamma().size() == 10);
  REQUIRE(norm.grad_beta().size() == 10);
  for (std::size_t j = 0; j < 10; ++j) {
    CHECK(norm.gamma()[j] == 1);
    CHECK(norm.beta()[j] == 0);
    CHECK(norm.grad_gamma()[j] == 0);
    CHECK(norm.grad_beta()[j] == 0);
  }
}

TEST_CASE("LayerNorm's parameters and gradients start on a cache line, in copies too", "[layer_norm][options]") {
  for (const std::size_t features : {1u, 10u, 768u, 4099u}) {
    const LayerNorm<float> norm(features);
    const LayerNorm<float> copy = norm;
    const LayerNorm<double> wide(features);
    CHECK(starts_on_line(norm.gamma().data()));
    CHECK(starts_on_line(norm.beta().data()));
    CHECK(starts_on_line(norm.grad_gamma().data()));
    CHECK(starts_on_line(norm.grad_beta().data()));
    CHECK(starts_on_line(copy.gamma().data()));
    CHECK(starts_on_line(copy.beta().data()));
    CHECK(starts_on_line(wide.gamma().data()));
    CHECK(starts_on_line(wide.beta().data()));
  }
}

TEST_CASE("LayerNorm without elementwise_affine has no parameters and normalizes only", "[layer_norm][options]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : {1u, 33u, 1000u}) {
      const LayerNorm<T> norm(features, options(1e-5, false));
      CHECK(!norm.options().elementwise_affine);
      CHECK(norm.gamma().empty());
      CHECK(norm.beta().empty());
      CHECK(norm.grad_gamma().empty());
      CHECK(norm.grad_beta().empty());
      check_forward_against_reference(norm, 3);
      // bias = true means nothing without elementwise_affine
      CHECK(LayerNorm<T>(features, options(1e-5, false, true)).beta().empty());
    }
  });
}

TEST_CASE("LayerNorm without bias scales by gamma only", "[layer_norm][options]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : {1u, 33u, 1000u}) {
      const LayerNorm<T> norm(features, options(1e-5, true, false));
      CHECK(!norm.options().bias);
      CHECK(norm.gamma().size() == features);
      CHECK(norm.grad_gamma().size() == features);
      CHECK(norm.beta().empty());
      CHECK(norm.grad_beta().empty());
      check_forward_against_reference(norm, 3);
    }
  });
}

TEST_CASE("LayerNorm uses a custom eps", "[layer_norm][options]") {
  for_each_type([]<class T>() {
    LayerNorm<T> norm(33, options(0.25));
    CHECK(norm.options().eps == 0.25);
    check_forward_against_reference(norm, 3);
    // The check above can fail: the default eps would give visibly different results.
    randomize_parameters(norm, 1);
    LayerNorm<T> default_eps(33);
    randomize_parameters(default_eps, 1);
    const auto x = test_rows<T>(3, 33, 0, 2);
    CHECK(worst_relative(inference(norm, x), reference_forward(default_eps, widen(x)).y).error > 1e-2);
  });
}
