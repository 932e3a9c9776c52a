// Rows never interact, in-place calls equal out-of-place ones bitwise, and an empty batch is a no-op.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "support.hpp"

using namespace nktest;

TEST_CASE("changing one row changes only that row's outputs", "[rows]") {
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    for (const std::size_t features : {1u, 8u, 33u, 1000u, 4099u}) {
      CAPTURE(features);
      Norm norm(features);
      randomize_parameters(norm, 1);
      const auto x = test_rows<T>(4, features, 0, 2);
      const auto dy = normal_values<T>(4 * features, 0, 1, 3);
      auto changed = x;
      const auto other = normal_values<T>(features, 5, 3, 4);
      std::copy(other.begin(), other.end(), changed.begin() + static_cast<std::ptrdiff_t>(2 * features));

      const Saved<Norm> a = forward_train(norm, x), b = forward_train(norm, changed);
      CHECK(other_rows_same(a.y, b.y, 2, features));
      CHECK(other_rows_same(a.mean, b.mean, 2, 1));
      CHECK(other_rows_same(a.rstd, b.rstd, 2, 1));
      CHECK(other_rows_same(backward(norm, dy, x, a), backward(norm, dy, changed, b), 2, features));
      if (features > 1) CHECK(!same_bits(row_of(a.y, 2, features), row_of(b.y, 2, features)));
    }
  });
}

TEST_CASE("a batch of some rows gives bitwise those rows of a batch of 64", "[rows]") {
  // Short rows go by groups of 16 rows, whose phases skip the chunks of 4 rows past the batch,
  // and longer RMSNorm rows up to 2048 floats write each row while reading the next: each row
  // of a smaller batch must come out as it does in a full group, and the last row as the others.
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    for (const std::size_t features : {8u, 33u, 64u, 100u, 256u, 1000u, 2048u, 4096u, 4099u, 8197u}) {
      CAPTURE(features);
      Norm norm(features);
      randomize_parameters(norm, 1);
      const auto x = test_rows<T>(64, features, 0, 2);
      const auto dy = normal_values<T>(64 * features, 0, 1, 3);
      const Saved<Norm> batch = forward_train(norm, x);
      const auto batch_dx = backward(norm, dy, x, batch);
      struct Slice {
        std::size_t first, count;
      };
      for (const Slice s : {Slice{0, 1}, Slice{17, 1}, Slice{63, 1}, Slice{0, 2}, Slice{0, 3}, Slice{0, 4}, Slice{0, 5},
                            Slice{0, 8}, Slice{0, 9}, Slice{0, 13}, Slice{0, 15}, Slice{0, 16}, Slice{0, 17}, Slice{3, 31}}) {
        CAPTURE(s.first, s.count);
        const auto rows = [&](const auto& v, std::size_t width) { return rows_of(v, s.first, s.count, width); };
        const auto xs = rows(x, features);
        const Saved<Norm> some = forward_train(norm, xs);
        CHECK(same_bits(some.y, rows(batch.y, features)));
        CHECK(same_bits(some.rstd, rows(batch.rstd, 1)));
        CHECK(same_bits(some.mean, is_layer_norm_v<Norm> ? rows(batch.mean, 1) : batch.mean));
        CHECK(same_bits(inference(norm, xs), some.y));
        CHECK(same_bits(backward(norm, rows(dy, features), xs, some), rows(batch_dx, features)));
      }
    }
  });
}

TEST_CASE("a short row's backward gives the same dx alone as in a batch too large for the cache", "[rows]") {
  // Short LayerNorm rows go backward by groups where x, dy and dx fit half the cache, and row
  // by row past it (see layer_norm_backward_group). The batch here just passes that limit; the
  // rows alone fit it. (Under normkit.streaming and normkit.single_rows the limit is 0 and both
  // go row by row.)
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    const std::size_t limit =
        normkit::detail::bytes_from_environment("NORMKIT_GROUP_MAX_BYTES", normkit::detail::stream_min_bytes() / 2);
    for (const std::size_t features : {8u, 64u, 100u}) {
      CAPTURE(features);
      const std::size_t rows = std::max<std::size_t>(limit / (3 * features * sizeof(T)) + 1, 32);
      Norm norm(features);
      randomize_parameters(norm, 1);
      const auto x = test_rows<T>(rows, features, 0, 2);
      const auto dy = normal_values<T>(rows * features, 0, 1, 3);
      const auto batch_dx = backward(norm, dy, x, forward_train(norm, x));
      for (const std::size_t row : {std::size_t{0}, std::size_t{1}, std::size_t{17}, rows / 2, rows - 1}) {
        CAPTURE(row);
        const auto one = [&](const auto& v) { return rows_of(v, row, 1, features); };
        const auto xs = one(x);
        CHECK(same_bits(backward(norm, one(dy), xs, forward_train(norm, xs)), one(batch_dx)));
      }
    }
  });
}

TEST_CASE("an output starting anywhere in a cache line gets the same values", "[rows]") {
  // Long LayerNorm rows are written in blocks of columns whose ends follow y's alignment, and
  // streamed rows peel their unaligned head: every start must write every value, the same.
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    for (const std::size_t features : {1000u, 4096u, 8197u}) {
      CAPTURE(features);
      Norm norm(features);
      randomize_parameters(norm, 1);
      const auto x = test_rows<T>(4, features, 0, 2);
      const auto want = inference(norm, x);
      for (std::size_t skip = 0; skip < 64 / sizeof(T); ++skip) {
        CAPTURE(skip);
        values_t<Norm> storage;
        const std::span<T> y = on_line(storage, x.size() + skip).subspan(skip);
        norm.forward(x, y);
        CHECK(same_bits<T>(y, want));
      }
    }
  });
}

TEST_CASE("a dx starting anywhere in a cache line gets the same values and gradients", "[rows]") {
  // Streamed dx (as in the normkit.streaming run) moves the γ/β gradient partials to dx's
  // place in its line: every start must give every dx value and every gradient sum, the same.
  // 130 rows make three blocks of partials, the last of two rows; 100 floats go row by row,
  // 1000 and 4096 in tiles.
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    constexpr std::size_t rows = 130;
    for (const std::size_t features : {100u, 1000u, 4096u}) {
      CAPTURE(features);
      Norm norm(features);
      randomize_parameters(norm, 1);
      const auto x = test_rows<T>(rows, features, 0, 2);
      const auto dy = normal_values<T>(rows * features, 0, 1, 3);
      const Saved<Norm> saved = forward_train(norm, x);
      norm.zero_grad();
      const auto want_dx = backward(norm, dy, x, saved);
      const auto want_grads = all_gradients(norm);
      for (std::size_t skip = 0; skip < 64 / sizeof(T); ++skip) {
        CAPTURE(skip);
        values_t<Norm> storage;
        const std::span<T> dx = on_line(storage, x.size() + skip).subspan(skip);
        norm.zero_grad();
        backward_into(norm, dy, x, saved, dx);
        CHECK(same_bits<T>(dx, want_dx));
        CHECK(all_gradients(norm) == want_grads);
      }
    }
  });
}

TEST_CASE("in place gives bitwise the results of out of place", "[rows]") {
  for_each_norm([]<class Norm>() {
    using T = typename Norm::value_type;
    for (const std::size_t features : {1u, 17u, 64u, 1000u, 4096u, 4099u, 8197u}) {
      CAPTURE(features);
      Norm norm(features);
      randomize_parameters(norm, 1);
      const auto x = test_rows<T>(3, features, 0, 2);
      const auto dy = normal_values<T>(3 * features, 0, 1, 3);
      const Saved<Norm> want = forward_train(norm, x);
      const auto want_dx = backward(norm, dy, x, want);
      const auto want_gamma = widen(norm.grad_gamma());

      auto buffer = x;  // y = x
      norm.forward(buffer, buffer);
      CHECK(same_bits(buffer, want.y));

      values_t<Norm> storage;  // y = x, from a line boundary on (see on_line)
      const std::span<T> aligned = on_line(storage, x.size());
      std::copy(x.begin(), x.end(), aligned.begin());
      norm.forward(aligned, aligned);
      CHECK(same_bits<T>(aligned, want.y));

      buffer = x;  // training: y = x
      using A = typename Norm::accum_type;
      std::vector<A> mean(want.mean.size(), A(7)), rstd(want.rstd.size(), A(7));
      if constexpr (is_layer_norm_v<Norm>)
        norm.forward(buffer, buffer, mean, rstd);
      else
        norm.forward(buffer, buffer, rstd);
      CHECK(same_bits(buffer, want.y));
      CHECK(same_bits(mean, want.mean));
      CHECK(same_bits(rstd, want.rstd));

      norm.zero_grad();
      buffer = dy;  // dx = dy
      backward_into(norm, buffer, x, want, buffer);
      CHECK(same_bits(buffer, want_dx));
      CHECK(widen(norm.grad_gamma()) == want_gamma);

      norm.zero_grad();
      buffer = x;  // dx = x
      backward_into(norm, dy, buffer, want, buffer);
      CHECK(same_bits(buffer, want_dx));
      CHECK(widen(norm.grad_gamma()) == want_gamma);
    }
  });
}

TEST_CASE("an array updated in place counts once toward the streaming threshold", "[rows]") {
  float dy[1], x[1], dx[1];
  CHECK(normkit::detail::backward_arrays(dy, x, dx) == 3);
  CHECK(normkit::detail::backward_arrays(dy, x, dy) == 2);
  CHECK(normkit::detail::backward_arrays(dy, x, x) == 2);
  CHECK(normkit::detail::backward_arrays(dy, dy, dx) == 2);
  CHECK(normkit::detail::backward_arrays(dy, dy, dy) == 1);
  // Two arrays of half the threshold stream, one alone does not (NORMKIT_STREAM_MIN_BYTES=0 or
  // 1 streams everything).
  const std::size_t threshold = normkit::detail::stream_min_bytes();
  const std::size_t half = threshold / 2 + threshold % 2;
  CHECK(normkit::detail::should_stream(half, 2));
  CHECK(normkit::detail::should_stream(half, 1) == (threshold <= 1));
}

TEST_CASE("forward rows go by the larger groups up to half the streaming threshold", "[rows]") {
  // With NORMKIT_GROUP_MAX_BYTES unset the limit is half of stream_min_bytes(), inclusive; the
  // normkit.single_rows test sets it to 0, where only an empty pass fits.
  const std::size_t limit =
      normkit::detail::bytes_from_environment("NORMKIT_GROUP_MAX_BYTES", normkit::detail::stream_min_bytes() / 2);
  CHECK(normkit::detail::fits_cache(limit, 1));
  CHECK_FALSE(normkit::detail::fits_cache(limit + 1, 1));
  CHECK(normkit::detail::fits_cache(limit / 2, 2));
  CHECK_FALSE(normkit::detail::fits_cache(limit / 2 + 1, 2));
}

TEST_CASE("an empty batch is valid and changes nothing", "[rows]") {
  // Rows of 5 features go through the registers, of 1000 through the fused passes where those
  // apply (RMSNorm forward had read the first row of an empty batch there), of 5000 by pairs
  // and tiles.
  for_each_norm([]<class Norm>() {
    for (const std::size_t features : {5u, 1000u, 5000u}) {
      INFO("features " << features);
      Norm norm(features);
      randomize_parameters(norm, 1);
      values_t<Norm> none;
      norm.forward(none, none);
      const Saved<Norm> saved = forward_train(norm, none);
      CHECK(saved.rstd.empty());
      norm.zero_grad();
      CHECK(backward(norm, none, none, saved).empty());
      for (const auto g : norm.grad_gamma()) CHECK(g == 0);
    }
  });
}

TEST_CASE("wide vectors read backward rows ahead as NORMKIT_BACKWARD_READ_AHEAD asks, else but on a Zen 5", "[rows]") {
  // normkit.streaming sets it to 1 and normkit.single_rows to 0, so that the suite runs the
  // backward passes both ways on any AVX-512 CPU.
  const char* requested = std::getenv("NORMKIT_BACKWARD_READ_AHEAD");
  const std::string_view asked = requested != nullptr ? requested : "";
  const bool expected = asked == "1" || (asked != "0" && normkit::detail::amd_family() != 0x1a);
  CHECK(normkit::detail::wide_backward_reads_ahead() == expected);
}

TEST_CASE("backward rows read ahead or not give bitwise the same dx and gradients", "[rows]") {
  // Reading ahead only prefetches; rows of 1000 floats go singly, of 4099 (γ present) by tiles.
  for (const std::size_t features : {1000u, 4099u}) {
    CAPTURE(features);
    constexpr std::size_t rows = 7;
    LayerNorm<float> norm(features);
    randomize_parameters(norm, 1);
    const auto x = test_rows<float>(rows, features, 0, 2);
    const auto dy = normal_values<float>(rows * features, 0, 1, 3);
    const Saved<LayerNorm<float>> saved = forward_train(norm, x);
    const auto run = [&](bool wide_reads_ahead) {
      std::vector<float> dx(rows * features), grad_gamma(features), grad_beta(features);
      const normkit::detail::BackwardRows<float> args{
          dy.data(), features, x.data(), features, dx.data(), features, features, norm.gamma().data(),
          saved.mean.data(), saved.rstd.data(), norm.options().eps, grad_gamma.data(), grad_beta.data(), false, true, wide_reads_ahead};
      normkit::detail::backward_rows<normkit::detail::norm_kind::layer>(args, 0, rows);
      return std::vector<std::vector<float>>{dx, grad_gamma, grad_beta};
    };
    const auto with = run(true), without = run(false);
    for (std::size_t k = 0; k < with.size(); ++k) CHECK(same_bits(with[k], without[k]));
  }
}

namespace {

/// How forward_rows_of runs its rows: ForwardRows' cache flags, read-ahead hint and group size.
struct RowPlan {
  bool in_cache, x_in_cache;
  normkit::detail::AheadHint hint;
  std::size_t group_bytes;
};

/// y (as T), mean and rstd of forward rows.
template <class T>
using RowOutputs = std::tuple<std::vector<T>, std::vector<float>, std::vector<float>>;

/// The outputs of forward rows of x through `norm`'s γ (and β for LayerNorm), run as `plan` says.
template <class T, class Norm>
RowOutputs<T> forward_rows_of(const Norm& norm, const std::vector<T>& x, std::size_t rows, RowPlan plan) {
  constexpr bool layer = std::is_same_v<Norm, LayerNorm<T>>;
  const std::size_t features = norm.features();
  std::vector<T> y(rows * features);
  std::vector<float> mean(rows), rstd(rows);
  const float* beta = nullptr;
  if constexpr (layer) beta = norm.beta().data();
  const normkit::detail::ForwardRows<T> args{
      x.data(), features, y.data(), features, features, norm.gamma().data(),
      beta, layer ? mean.data() : nullptr, rstd.data(), 1e-5, false, plan.in_cache,
      plan.x_in_cache, plan.hint, plan.group_bytes};
  if constexpr (layer) normkit::detail::forward_rows<normkit::detail::norm_kind::layer>(args, rows);
  else normkit::detail::forward_rows<normkit::detail::norm_kind::rms>(args, rows);
  return {y, mean, rstd};
}

/// Whether two runs of forward_rows_of gave the same y, mean and rstd, bit for bit.
template <class T>
bool same_outputs(const RowOutputs<T>& a, const RowOutputs<T>& b) {
  return same_bits(std::get<0>(a), std::get<0>(b)) && same_bits(std::get<1>(a), std::get<1>(b)) &&
         same_bits(std::get<2>(a), std::get<2>(b));
}

/// Checks that forward rows grouped by any size, where the pass fits the cache, give the bits
/// they give one at a time.
template <class T, class Norm>
void check_any_group_size(const Norm& norm, std::size_t rows) {
  using normkit::detail::AheadHint;
  const auto x = test_rows<T>(rows, norm.features(), 0, 7);
  const auto singly = forward_rows_of(norm, x, rows, {false, true, AheadHint::into_l2, 0});
  for (const std::size_t group_bytes : {2048u, 8192u, 12288u, 65536u}) {
    CAPTURE(group_bytes);
    CHECK(same_outputs(forward_rows_of(norm, x, rows, {true, true, AheadHint::into_l2, group_bytes}), singly));
  }
}

}  // namespace

TEST_CASE("forward rows read ahead or not give bitwise the same y and statistics", "[rows]") {
  // Rows of 64 KiB and more read ahead only where x does not fit the cache (x_in_cache false),
  // and reading ahead only prefetches, into L2 or with the non-temporal hint (see
  // layer_norm_ahead_hint). 16387 floats go by pairs and blocks of columns (β present); the
  // RMSNorm rows go singly.
  constexpr std::size_t rows = 5, features = 16387;
  using normkit::detail::AheadHint;
  const auto x = test_rows<float>(rows, features, 0, 5);
  const auto check = [&](const auto& norm) {
    const std::size_t group_bytes = normkit::detail::cached_group_bytes();
    const auto without = forward_rows_of(norm, x, rows, {false, true, AheadHint::into_l2, group_bytes});
    for (const AheadHint hint : {AheadHint::into_l2, AheadHint::non_temporal}) {
      CAPTURE(hint == AheadHint::non_temporal);
      CHECK(same_outputs(forward_rows_of(norm, x, rows, {false, false, hint, group_bytes}), without));
    }
  };
  LayerNorm<float> layer(features);
  randomize_parameters(layer, 4);
  check(layer);
  RMSNorm<float> rms(features);
  randomize_parameters(rms, 4);
  check(rms);
}

TEST_CASE("forward rows give bitwise the same y and statistics in groups of any size", "[rows]") {
  // Where the pass fits the cache, rows longer than the registers go by groups of up to
  // cached_group_bytes of input (less than 12 KiB with a small L1, see driver.hpp), up to
  // kGroupRows rows; rows of these widths go one at a time elsewhere. A row's results must not
  // depend on its group: 37 rows leave a partial last group for every size of more than a row.
  // RMSNorm rows of floats go fused in the cache, not by groups; its bfloat16 rows go by groups.
  constexpr std::size_t rows = 37;
  for (const std::size_t features : {300u, 768u, 1000u}) {
    CAPTURE(features);
    LayerNorm<float> layer_float(features);
    randomize_parameters(layer_float, 6);
    check_any_group_size<float>(layer_float, rows);
    LayerNorm<bfloat16> layer_bf16(features);
    randomize_parameters(layer_bf16, 8);
    check_any_group_size<bfloat16>(layer_bf16, rows);
    RMSNorm<bfloat16> rms_bf16(features);
    randomize_parameters(rms_bf16, 9);
    check_any_group_size<bfloat16>(rms_bf16, rows);
  }
}
