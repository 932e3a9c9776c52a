// Bad arguments throw std::invalid_argument naming the function and sizes, and leave outputs untouched.
#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "support.hpp"

using namespace nktest;

namespace {

/// The message names the function and contains every piece (sizes, argument names).
void check_message(const std::string& message, std::string_view fn, std::initializer_list<std::string_view> pieces) {
  INFO("message: " << message);
  CHECK(message.find(fn) != std::string::npos);
  for (const std::string_view piece : pieces) {
    INFO("piece: " << piece);
    CHECK(message.find(piece) != std::string::npos);
  }
}

/// A norm of 7 features, inputs of 13 rows (91 values; sizes chosen to be recognizable in
/// messages), and every output filled with a sentinel that a failed call must leave alone.
template <class Norm>
struct Fixture {
  using T = typename Norm::value_type;
  using A = typename Norm::accum_type;
  static constexpr std::size_t features = 7, rows = 13, n = 91;
  static constexpr double sentinel = -13.25;  // exact in every element type

  Norm norm{features};
  values_t<Norm> x = test_rows<T>(rows, features, 0, 1), dy = normal_values<T>(n, 0, 1, 2);
  values_t<Norm> y = values_t<Norm>(n, from_double<T>(sentinel)), dx = y;
  std::vector<A> mean = std::vector<A>(rows, A(sentinel)), rstd = mean;
  Saved<Norm> saved = forward_train(norm, x);  // valid statistics for backward

  Fixture() {
    randomize_parameters(norm, 3);
    for (A& g : norm.grad_gamma()) g = A(sentinel);
    if constexpr (is_layer_norm_v<Norm>) {
      for (A& g : norm.grad_beta()) g = A(sentinel);
    }
  }

  /// Every output still holds the sentinel.
  bool untouched() const {
    const auto all_sentinel = [](const auto& values) {
      for (const auto& v : values) {
        if (to_double(v) != sentinel) return false;
      }
      return true;
    };
    bool ok = all_sentinel(y) && all_sentinel(dx) && all_sentinel(mean) && all_sentinel(rstd) &&
              all_sentinel(norm.grad_gamma());
    if constexpr (is_layer_norm_v<Norm>) ok = ok && all_sentinel(norm.grad_beta());
    return ok;
  }

  /// Training forward into the given statistics spans.
  void train(std::span<const T> in, std::span<T> out, std::span<A> m, std::span<A> r) const {
    if constexpr (is_layer_norm_v<Norm>)
      norm.forward(in, out, m, r);
    else
      norm.forward(in, out, r);
  }
  void back(std::span<const T> d, std::span<const T> in, std::span<const A> m, std::span<const A> r, std::span<T> out) {
    if constexpr (is_layer_norm_v<Norm>)
      norm.backward(d, in, m, r, out);
    else
      norm.backward(d, in, r, out);
  }
};

template <class T>
struct InOut {
  std::span<T> in, out;
};

/// The two ways an input and an output of 91 values each can partly overlap in a buffer of 92:
/// the output one element after the input, or before.
template <class T>
std::array<InOut<T>, 2> partial_overlaps(std::span<T> buffer) {
  return {{{buffer.first(91), buffer.last(91)}, {buffer.last(91), buffer.first(91)}}};
}

template <class Norm>
std::string class_name() {
  return is_layer_norm_v<Norm> ? "normkit::LayerNorm" : "normkit::RMSNorm";
}

}  // namespace

TEST_CASE("constructors reject features = 0 and a negative or non-finite eps", "[errors]") {
  for_each_norm([]<class Norm>() {
    const std::string fn = class_name<Norm>();
    check_message(invalid_argument_message([] { Norm(0); }), fn, {"features"});
    for (const double eps : {-1.0, -1e-300, std::numeric_limits<double>::quiet_NaN(), HUGE_VAL, -HUGE_VAL}) {
      CAPTURE(eps);
      check_message(invalid_argument_message([&] { make_norm<Norm>(4, eps); }), fn, {"eps"});
    }
    // The message shows the value as given, not rounded to six decimals.
    check_message(invalid_argument_message([] { make_norm<Norm>(4, -1e-9); }), fn, {"eps = -1e-09 "});
  });
}

TEST_CASE("forward rejects bad sizes and overlap, writing nothing", "[errors]") {
  for_each_norm([]<class Norm>() {
    using F = Fixture<Norm>;
    using T = typename F::T;
    using A = typename F::A;
    F f;
    const std::string fn = class_name<Norm>() + "::forward";
    const std::span<const T> x(f.x);
    const std::span<T> y(f.y);
    const values_t<Norm> long_x = normal_values<T>(93, 0, 1, 4);
    const values_t<Norm> long_y(93, from_double<T>(F::sentinel));

    {
      INFO("x.size() not a multiple of features");
      values_t<Norm> out = long_y;
      check_message(invalid_argument_message([&] { f.norm.forward(long_x, out); }), fn, {"93", "7"});
      check_message(invalid_argument_message([&] { f.norm(long_x, out); }), fn, {"93", "7"});
      check_message(invalid_argument_message([&] { f.train(long_x, out, f.mean, f.rstd); }), fn, {"93", "7"});
      CHECK(same_bits(out, long_y));
    }
    {
      INFO("y of another size");
      check_message(invalid_argument_message([&] { f.norm.forward(x, y.first(90)); }), fn, {"90", "91"});
      check_message(invalid_argument_message([&] { f.norm(x.first(84), y.first(91)); }), fn, {"84", "91"});
      check_message(invalid_argument_message([&] { f.train(x, y.first(90), f.mean, f.rstd); }), fn, {"90", "91"});
    }
    {
      INFO("statistics shorter than the rows");
      const std::span<A> mean(f.mean), rstd(f.rstd);
      check_message(invalid_argument_message([&] { f.train(x, y, mean, rstd.first(12)); }), fn, {"rstd", "12", "13"});
      if constexpr (is_layer_norm_v<Norm>) {
        check_message(invalid_argument_message([&] { f.train(x, y, mean.first(12), rstd); }), fn, {"mean", "12", "13"});
      }
    }
    {
      INFO("y partly overlapping x");
      values_t<Norm> buffer = f.x;
      buffer.push_back(from_double<T>(1));
      const values_t<Norm> before = buffer;
      const std::span<T> all(buffer);
      for (const InOut<T>& io : partial_overlaps(all)) {
        check_message(invalid_argument_message([&] { f.norm.forward(io.in, io.out); }), fn, {"overlap", "91"});
        check_message(invalid_argument_message([&] { f.train(io.in, io.out, f.mean, f.rstd); }), fn, {"overlap", "91"});
      }
      CHECK(same_bits(buffer, before));
    }
    if constexpr (is_layer_norm_v<Norm>) {
      INFO("mean partly overlapping rstd");
      std::vector<A> stats(20, A(F::sentinel));
      const std::span<A> all(stats);
      check_message(invalid_argument_message([&] { f.train(x, y, all.first(13), all.last(13)); }), fn, {"overlap"});
      CHECK(stats == std::vector<A>(20, A(F::sentinel)));
    }
    if constexpr (std::is_same_v<T, A>) {
      INFO("y overlapping gamma (an input too)");
      const std::vector<A> gamma_before(f.norm.gamma().begin(), f.norm.gamma().end());
      check_message(invalid_argument_message([&] { f.norm.forward(x.first(7), f.norm.gamma()); }), fn, {"gamma"});
      CHECK(std::equal(gamma_before.begin(), gamma_before.end(), f.norm.gamma().begin()));
    }
    CHECK(f.untouched());
  });
}

TEST_CASE("backward rejects bad sizes and overlap, writing nothing", "[errors]") {
  for_each_norm([]<class Norm>() {
    using F = Fixture<Norm>;
    using T = typename F::T;
    using A = typename F::A;
    F f;
    const std::string fn = class_name<Norm>() + "::backward";
    const std::span<const T> x(f.x), dy(f.dy);
    const std::span<T> dx(f.dx);
    const std::span<const A> mean(f.saved.mean), rstd(f.saved.rstd);

    {
      INFO("x.size() not a multiple of features");
      const values_t<Norm> long_x = normal_values<T>(93, 0, 1, 4), long_dy = long_x;
      values_t<Norm> long_dx(93, from_double<T>(F::sentinel));
      const values_t<Norm> before = long_dx;
      check_message(invalid_argument_message([&] { f.back(long_dy, long_x, mean, rstd, long_dx); }), fn, {"93", "7"});
      CHECK(same_bits(long_dx, before));
    }
    {
      INFO("dy or dx of another size");
      check_message(invalid_argument_message([&] { f.back(dy.first(90), x, mean, rstd, dx); }), fn, {"dy", "90", "91"});
      check_message(invalid_argument_message([&] { f.back(dy, x, mean, rstd, dx.first(90)); }), fn, {"dx", "90", "91"});
    }
    {
      INFO("statistics shorter than the rows");
      check_message(invalid_argument_message([&] { f.back(dy, x, mean, rstd.first(12), dx); }), fn,
                    {"rstd", "12", "13"});
      if constexpr (is_layer_norm_v<Norm>) {
        check_message(invalid_argument_message([&] { f.back(dy, x, mean.first(12), rstd, dx); }), fn,
                      {"mean", "12", "13"});
      }
    }
    {
      INFO("dx partly overlapping dy or x");
      for (const bool over_dy : {true, false}) {
        values_t<Norm> buffer = over_dy ? f.dy : f.x;
        buffer.push_back(from_double<T>(1));
        const values_t<Norm> before = buffer;
        const std::span<T> all(buffer);
        for (const InOut<T>& io : partial_overlaps(all)) {
          CAPTURE(over_dy);
          check_message(invalid_argument_message([&] {
                          over_dy ? f.back(io.in, x, mean, rstd, io.out) : f.back(dy, io.in, mean, rstd, io.out);
                        }),
                        fn, {"overlap", "91"});
        }
        CHECK(same_bits(buffer, before));
      }
    }
    CHECK(f.untouched());
  });
}
