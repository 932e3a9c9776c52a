// ISA selection (supported_isas, active_isa, set_isa, to_string) and every supported ISA against scalar.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "support.hpp"

using namespace nktest;
using normkit::isa;

namespace {

constexpr isa all_isas[] = {isa::scalar, isa::avx2, isa::avx512, isa::neon};

bool supported(isa which) {
  const auto list = normkit::supported_isas();
  return std::find(list.begin(), list.end(), which) != list.end();
}

/// Lower is better: AVX-512 over AVX2 over scalar, NEON over scalar.
int rank(isa which) {
  switch (which) {
    case isa::avx512:
      return 0;
    case isa::avx2:
    case isa::neon:
      return 1;
    case isa::scalar:
      break;
  }
  return 2;
}

/// One training step: forward, backward, gradients.
template <class Norm>
struct Step {
  Saved<Norm> saved;
  values_t<Norm> dx;
  std::vector<double> grad_gamma, grad_beta;
};

template <class Norm>
Step<Norm> train_step(Norm norm, const values_t<Norm>& x, const values_t<Norm>& dy) {
  Step<Norm> step{forward_train(norm, x), {}, {}, {}};
  step.dx = backward(norm, dy, x, step.saved);
  step.grad_gamma = widen(norm.grad_gamma());
  if constexpr (is_layer_norm_v<Norm>) step.grad_beta = widen(norm.grad_beta());
  return step;
}

}  // namespace

TEST_CASE("to_string names each instruction set", "[isa]") {
  CHECK(normkit::to_string(isa::scalar) == "scalar");
  CHECK(normkit::to_string(isa::avx2) == "avx2");
  CHECK(normkit::to_string(isa::avx512) == "avx512");
  CHECK(normkit::to_string(isa::neon) == "neon");
}

TEST_CASE("supported_isas lists this CPU's instruction sets best first, scalar last", "[isa]") {
  const auto list = normkit::supported_isas();
  REQUIRE(!list.empty());
  CHECK(list.back() == isa::scalar);
  for (std::size_t i = 1; i < list.size(); ++i) {
    INFO(normkit::to_string(list[i - 1]) << " before " << normkit::to_string(list[i]));
    CHECK(rank(list[i - 1]) < rank(list[i]));  // strictly: also no duplicates
  }
  CHECK(supported(normkit::active_isa()));
#if defined(__x86_64__) || defined(_M_X64)
  CHECK(!supported(isa::neon));
#elif defined(__aarch64__)
  CHECK(supported(isa::neon));
  CHECK(!supported(isa::avx2));
  CHECK(!supported(isa::avx512));
#endif
}

TEST_CASE("the active instruction set is NORMKIT_ISA's, or else the best", "[isa]") {
  const char* requested = std::getenv("NORMKIT_ISA");
  if (requested != nullptr && *requested != '\0') {
    CHECK(normkit::to_string(normkit::active_isa()) == requested);
  } else {
    CHECK(normkit::active_isa() == normkit::supported_isas().front());
  }
}

TEST_CASE("set_isa switches to every supported instruction set and rejects the others", "[isa]") {
  const IsaGuard restore;
  for (isa which : normkit::supported_isas()) {
    normkit::set_isa(which);
    CHECK(normkit::active_isa() == which);
  }
  normkit::set_isa(isa::scalar);
  CHECK(normkit::active_isa() == isa::scalar);
  for (isa which : all_isas) {
    if (supported(which)) continue;
    INFO("unsupported: " << normkit::to_string(which));
    REQUIRE_THROWS_AS(normkit::set_isa(which), std::invalid_argument);
    const std::string message = invalid_argument_message([&] { normkit::set_isa(which); });
    CHECK(message.find("normkit::set_isa") != std::string::npos);
    CHECK(message.find(normkit::to_string(which)) != std::string::npos);
    CHECK(normkit::active_isa() == isa::scalar);
  }
}

TEST_CASE("every supported instruction set agrees with scalar", "[isa]") {
  struct Shape {
    std::size_t rows, features;
    double offset;
  };
  const Shape shapes[] = {{3, 1, 0}, {4, 7, 0}, {3, 33, 0}, {2, 100, 0}, {2, 1000, 0}, {1, 4099, 0}, {2, 768, 2000}};
  const IsaGuard restore;
  for_each_norm([&]<class Norm>() {
    using T = typename Norm::value_type;
    constexpr Limits limit = limits<T>();
    for (const Shape& shape : shapes) {
      CAPTURE(shape.rows, shape.features, shape.offset);
      const std::size_t n = shape.rows * shape.features;
      const auto x = normal_values<T>(n, 0.3 + shape.offset, shape.offset == 0 ? 1.7 : 1.0, 21);
      const auto dy = normal_values<T>(n, 0, 1, 22);
      Norm norm(shape.features);
      randomize_parameters(norm, 11);
      normkit::set_isa(isa::scalar);
      const Step<Norm> want = train_step(norm, x, dy);
      const double dx_floor = dx_term_scale(norm, widen(dy), widen(want.saved.rstd));
      for (isa which : normkit::supported_isas()) {
        INFO("isa " << normkit::to_string(which) << " vs scalar");
        normkit::set_isa(which);
        const Step<Norm> got = train_step(norm, x, dy);
        // Both are within the limits of the reference, so within twice them of each other.
        const std::string name = norm_name<Norm>() + " isa vs scalar ";
        check_within(name + "y", worst_relative(got.saved.y, widen(want.saved.y)), 2 * limit.forward_offset);
        check_within(name + "rstd", worst_relative(got.saved.rstd, widen(want.saved.rstd), 0), 2 * limit.stats);
        check_within(name + "dx", worst_vs_peak(got.dx, widen(want.dx), dx_floor), 2 * limit.dx);
        check_within(name + "grad_gamma", worst_vs_peak(got.grad_gamma, want.grad_gamma), 2 * limit.grads);
        if constexpr (is_layer_norm_v<Norm>) {
          check_within(name + "mean", worst_relative(got.saved.mean, widen(want.saved.mean), 1 + shape.offset),
                       2 * limit.stats);
          check_within(name + "grad_beta", worst_vs_peak(got.grad_beta, want.grad_beta), 2 * limit.grads);
        }
      }
    }
  });
}
