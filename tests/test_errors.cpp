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

template <class A>
struct Own {
  std::string name;
  std::span<A> values;
};

/// The norm's own arrays by the names its messages use: γ and its gradient, and β and its
/// gradient for LayerNorm.
template <class Norm>
std::vector<Own<typename Norm::accum_type>> own_arrays(Norm& norm) {
  std::vector<Own<typename Norm::accum_type>> own{{"gamma", norm.gamma()}, {"grad_gamma", norm.grad_gamma()}};
  if constexpr (is_layer_norm_v<Norm>) {
    own.push_back({"beta", norm.beta()});
    own.push_back({"grad_beta", norm.grad_beta()});
  }
  return own;
}

/// Every value of the norm's own arrays, exactly, to check that a failed call wrote none.
template <class Norm>
std::vector<double> own_values(Norm& norm) {
  std::vector<double> all;
  for (const auto& own : own_arrays(norm)) {
    const std::vector<double> values = widen(own.values);
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
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
    {
      INFO("y or a saved statistic in the norm's own arrays");
      // One row, so that its one statistic fits inside γ or a gradient.
      const std::span<const T> row = x.first(F::features);
      const std::span<T> row_out = y.first(F::features);
      const std::span<A> mean(f.mean), rstd(f.rstd);
      const std::vector<double> before = own_values(f.norm);
      for (const auto& own : own_arrays(f.norm)) {
        CAPTURE(own.name);
        const std::string piece = "overlaps " + own.name + " (";
        check_message(invalid_argument_message([&] { f.train(row, row_out, mean, own.values.last(1)); }), fn,
                      {": rstd (", piece});
        if constexpr (is_layer_norm_v<Norm>) {
          check_message(invalid_argument_message([&] { f.train(row, row_out, own.values.first(1), rstd); }), fn,
                        {": mean (", piece});
        }
        if constexpr (std::is_same_v<T, A>) {
          check_message(invalid_argument_message([&] { f.norm.forward(row, own.values); }), fn, {": y (", piece});
          check_message(invalid_argument_message([&] { f.train(row, own.values, mean, rstd); }), fn, {": y (", piece});
        }
      }
      CHECK(own_values(f.norm) == before);
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
    {
      INFO("an argument in the gradients, or dx in any of the norm's own arrays");
      // One row, so that its one statistic, or the whole row, fits inside γ or a gradient.
      const std::span<const T> dy_row = dy.first(F::features), x_row = x.first(F::features);
      const std::span<T> dx_row = dx.first(F::features);
      const std::vector<double> before = own_values(f.norm);
      for (const auto& own : own_arrays(f.norm)) {
        CAPTURE(own.name);
        const std::string piece = "overlaps " + own.name + " (";
        const std::span<const A> inside = own.values.first(1);
        if (own.name.starts_with("grad_")) {
          for (const std::span<T> out : {dx_row, std::span<T>()}) {
            CAPTURE(out.size());
            check_message(invalid_argument_message([&] { f.back(dy_row, x_row, mean, inside, out); }), fn,
                          {": rstd (", piece});
            if constexpr (is_layer_norm_v<Norm>) {
              check_message(invalid_argument_message([&] { f.back(dy_row, x_row, inside, rstd, out); }), fn,
                            {": mean (", piece});
            }
            if constexpr (std::is_same_v<T, A>) {
              check_message(invalid_argument_message([&] { f.back(own.values, x_row, mean, rstd, out); }), fn,
                            {": dy (", piece});
              check_message(invalid_argument_message([&] { f.back(dy_row, own.values, mean, rstd, out); }), fn,
                            {": x (", piece});
            }
          }
        }
        if constexpr (std::is_same_v<T, A>) {
          check_message(invalid_argument_message([&] { f.back(dy_row, x_row, mean, rstd, own.values); }), fn,
                        {": dx (", piece});
        }
      }
      CHECK(own_values(f.norm) == before);
    }
    CHECK(f.untouched());
  });
}

TEST_CASE("backward takes statistics longer than the rows with dx beside their first rows", "[errors]") {
  // The statistics beyond the rows are neither read nor written, so dx may lie there, as
  // training forward allows for y.
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    using A = typename Norm::accum_type;
    if constexpr (std::is_same_v<T, A>) {
      constexpr std::size_t features = 7, rows = 13;
      Norm norm(features), separate(features);
      randomize_parameters(norm, 5);
      randomize_parameters(separate, 5);
      const values_t<Norm> x = test_rows<T>(rows, features, 0, 1), dy = normal_values<T>(rows * features, 0, 1, 2);
      const Saved<Norm> saved = forward_train(norm, x);
      const values_t<Norm> want = backward(separate, dy, x, saved);

      // [statistic of each row | dx], one buffer: the statistic's span runs to its end.
      std::vector<A> buffer(rows + rows * features);
      const std::span<A> all(buffer);
      const std::span<T> dx = all.last(rows * features);
      if constexpr (is_layer_norm_v<Norm>) {
        std::copy(saved.mean.begin(), saved.mean.end(), buffer.begin());
        norm.backward(dy, x, all, saved.rstd, dx);
      } else {
        std::copy(saved.rstd.begin(), saved.rstd.end(), buffer.begin());
        norm.backward(dy, x, all, dx);
      }
      CHECK(same_bits(std::span<const T>(dx), std::span<const T>(want)));
      CHECK(all_gradients(norm) == all_gradients(separate));
    }
  });
}
