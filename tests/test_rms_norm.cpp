// RMSNorm forward vs the reference (every size, offsets), a hand-checked batch, zero rows, options.
#include <algorithm>
#include <cmath>
#include <vector>

#include "support.hpp"

using namespace nktest;

namespace {

normkit::RMSNormOptions options(double eps, bool affine = true) {
  normkit::RMSNormOptions o;
  o.eps = eps;
  o.elementwise_affine = affine;
  return o;
}

}  // namespace

TEST_CASE("RMSNorm forward matches the reference at every size", "[rms_norm][forward]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : test_sizes()) {
      check_forward_against_reference(RMSNorm<T>(features), rows_for(features));
    }
  });
}

TEST_CASE("RMSNorm forward matches the reference over many rows", "[rms_norm][forward]") {
  // More rows than the kernels process together, so that groups of rows end mid-batch.
  for_each_type([]<class T>() {
    for (const std::size_t features : {9u, 64u, 100u, 300u, 1000u})
      check_forward_against_reference(RMSNorm<T>(features), 37);
  });
}

TEST_CASE("RMSNorm forward stays accurate on rows far from zero", "[rms_norm][forward]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : {5u, 17u, 100u, 768u, 4096u, 4099u}) {
      for (const double offset : {1e2, 2e3, 1e4, -2e3}) {
        check_forward_against_reference(RMSNorm<T>(features), 3, offset);
      }
    }
  });
}

TEST_CASE("RMSNorm of a hand-checked (4, 8) batch: one mean square per row", "[rms_norm][forward]") {
  // Exact in float: mean squares 204/8 = 25.5, (1001000.25 + 999000.25)/2 = 1000000.25,
  // (9 + 1)/2 = 5 and 256/8 = 32.
  const std::vector<double> x = {1,      2,     3,      4,     5,      6,     7,      8,      //
                                 1000.5, 999.5, 1000.5, 999.5, 1000.5, 999.5, 1000.5, 999.5,  //
                                 -3,     -1,    -3,     -1,    -3,     -1,    -3,     -1,     //
                                 0,      0,     0,      0,     0,      0,     0,      16};
  const double mean_square[] = {25.5, 1000000.25, 5, 32};
  for_types<float, double>([&]<class T>() {
    INFO("element type " << type_name<T>());
    const RMSNorm<T> norm(8);
    const Saved<RMSNorm<T>> got = forward_train(norm, narrow<T>(x));
    normkit::reference::Forward want{std::vector<double>(32), {}, {}};
    for (std::size_t i = 0; i < 4; ++i) {
      want.rstd.push_back(1 / std::sqrt(mean_square[i] + 1e-6));
      for (std::size_t j = 0; j < 8; ++j) want.y[8 * i + j] = x[8 * i + j] * want.rstd[i];
    }
    check_forward(got, want, limits<T>().forward, "");
  });
}

TEST_CASE("RMSNorm of a zero row is zero", "[rms_norm][forward]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : {1u, 7u, 64u, 1000u, 4099u}) {
      for (const double eps : {1e-6, 0.0}) {
        CAPTURE(features, eps);
        RMSNorm<T> norm(features, options(eps));
        randomize_parameters(norm, 6);
        CHECK(count_nonzero(inference(norm, values_t<RMSNorm<T>>(2 * features, from_double<T>(0)))) == 0);
      }
    }
  });
}

TEST_CASE("RMSNorm saves exact statistics for zero rows among ordinary ones", "[rms_norm][forward]") {
  // A batch's padding: zero rows, every third row of a batch, short rows and long. They have
  // rstd = 1/sqrt(eps), +Inf for eps = 0 (and for eps = 1e-80 in float), and y = 0; their
  // neighbours match the reference.
  for_each_type([]<class T>() {
    using A = accum_t<T>;
    for (const std::size_t features : {1u, 7u, 16u, 64u, 100u, 256u, 768u}) {
      for (const double eps : {1e-6, 0.0, 1e-80}) {
        CAPTURE(features, eps);
        RMSNorm<T> norm(features, options(eps));
        randomize_parameters(norm, features + 7);
        constexpr std::size_t rows = 37;
        std::vector<T> x = test_rows<T>(rows, features, 0, features + 8);
        for (std::size_t i = 0; i < rows; i += 3) {
          std::fill_n(x.begin() + static_cast<std::ptrdiff_t>(i * features), features, from_double<T>(0));
        }
        const Saved<RMSNorm<T>> got = forward_train(norm, x);
        if (eps == 1e-6) check_forward(got, reference_forward(norm, widen(x)), limits<T>().forward, " (zero rows)");
        for (std::size_t i = 0; i < rows; i += 3) {
          CAPTURE(i);
          CHECK(got.rstd[i] == static_cast<A>(1 / std::sqrt(eps)));
          CHECK(count_nonzero(row_of(got.y, i, features)) == 0);
        }
      }
    }
  });
}

TEST_CASE("RMSNorm default options and parameters", "[rms_norm][options]") {
  const RMSNorm<float> norm(10);
  CHECK(norm.features() == 10);
  CHECK(norm.options().eps == 1e-6);
  CHECK(norm.options().elementwise_affine);
  REQUIRE(norm.gamma().size() == 10);
  REQUIRE(norm.grad_gamma().size() == 10);
  for (std::size_t j = 0; j < 10; ++j) {
    CHECK(norm.gamma()[j] == 1);
    CHECK(norm.grad_gamma()[j] == 0);
  }
}

TEST_CASE("RMSNorm's parameters and gradients start on a cache line, in copies too", "[rms_norm][options]") {
  for (const std::size_t features : {1u, 10u, 768u, 4099u}) {
    const RMSNorm<float> norm(features);
    const RMSNorm<float> copy = norm;
    const RMSNorm<double> wide(features);
    CHECK(starts_on_line(norm.gamma().data()));
    CHECK(starts_on_line(norm.grad_gamma().data()));
    CHECK(starts_on_line(copy.gamma().data()));
    CHECK(starts_on_line(wide.gamma().data()));
  }
}

TEST_CASE("RMSNorm without elementwise_affine has no gamma and normalizes only", "[rms_norm][options]") {
  for_each_type([]<class T>() {
    for (const std::size_t features : {1u, 33u, 1000u}) {
      const RMSNorm<T> norm(features, options(1e-6, false));
      CHECK(!norm.options().elementwise_affine);
      CHECK(norm.gamma().empty());
      CHECK(norm.grad_gamma().empty());
      check_forward_against_reference(norm, 3);
    }
  });
}

TEST_CASE("RMSNorm uses a custom eps", "[rms_norm][options]") {
  for_each_type([]<class T>() {
    RMSNorm<T> norm(33, options(0.25));
    CHECK(norm.options().eps == 0.25);
    check_forward_against_reference(norm, 3);
    // The check above can fail: the default eps would give visibly different results.
    randomize_parameters(norm, 1);
    RMSNorm<T> default_eps(33);
    randomize_parameters(default_eps, 1);
    const auto x = test_rows<T>(3, 33, 0, 2);
    CHECK(worst_relative(inference(norm, x), reference_forward(default_eps, widen(x)).y).error > 1e-2);
  });
}
