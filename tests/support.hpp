// Test helpers: seeded data, exact widening, the reference on a norm's own parameters, limits, per-type drivers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <normkit/normkit.hpp>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "precompiled_kernels.hpp"

namespace nktest {

using normkit::accum_t;
using normkit::bfloat16;
using normkit::float16;
using normkit::LayerNorm;
using normkit::RMSNorm;

// ---------------------------------------------------------------------------------------------
// Element types

template <class T>
inline constexpr bool is_16bit_v = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

template <class T>
constexpr std::string_view type_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, double>)
    return "double";
  else if constexpr (std::is_same_v<T, bfloat16>)
    return "bfloat16";
  else
    return "float16";
}

/// Exact: every element type is a subset of double.
template <class T>
double to_double(T v) {
  if constexpr (is_16bit_v<T>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

/// Rounds to T (16-bit types through float: fine for test data, whose exact value is then read
/// back with to_double).
template <class T>
T from_double(double v) {
  if constexpr (is_16bit_v<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// Any range of element or accumulation values, as doubles (exact).
template <class Range>
std::vector<double> widen(const Range& values) {
  std::vector<double> out;
  out.reserve(std::size(values));
  for (const auto& v : values) out.push_back(to_double(v));
  return out;
}

template <class T>
std::vector<T> narrow(std::span<const double> values) {
  std::vector<T> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = from_double<T>(values[i]);
  return out;
}

/// Bitwise equality, so that NaN equals the same NaN and -0 differs from +0.
template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return false;
  }
  return true;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return same_bits(std::span<const T>(a), std::span<const T>(b));
}

/// Rows [first, first + count) of a rows × features batch.
template <class V>
V rows_of(const V& batch, std::size_t first, std::size_t count, std::size_t features) {
  return V(batch.begin() + static_cast<std::ptrdiff_t>(first * features),
           batch.begin() + static_cast<std::ptrdiff_t>((first + count) * features));
}

/// Row i of a rows × features batch.
template <class V>
V row_of(const V& batch, std::size_t i, std::size_t features) {
  return rows_of(batch, i, 1, features);
}

/// Every row but `except` of a and b is bitwise the same.
template <class V>
bool other_rows_same(const V& a, const V& b, std::size_t except, std::size_t features) {
  for (std::size_t i = 0; i * features < a.size(); ++i) {
    if (i != except && !same_bits(row_of(a, i, features), row_of(b, i, features))) return false;
  }
  return true;
}

/// True when p starts a 64-byte cache line: where the library keeps its parameters, so that no
/// vector load of them straddles two lines.
inline bool starts_on_line(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

/// n values in `storage` (resized for it) from its first 64-byte line boundary on. A
/// std::vector's own data is only as aligned as malloc makes it; outputs are written
/// differently (streamed short rows) when every row starts on a vector boundary.
template <class T>
std::span<T> on_line(std::vector<T>& storage, std::size_t n) {
  storage.assign(n + 64 / sizeof(T), T{});
  std::size_t skip = 0;
  while (!starts_on_line(storage.data() + skip)) ++skip;
  return std::span<T>(storage).subspan(skip, n);
}

/// How many values are finite.
template <class V>
std::size_t count_finite(const V& values) {
  std::size_t count = 0;
  for (const auto& v : values) count += std::isfinite(to_double(v)) ? 1u : 0u;
  return count;
}

/// How many values are not zero (±0 both count as zero).
template <class T>
std::size_t count_nonzero(const std::vector<T>& values) {
  std::size_t count = 0;
  for (const T& v : values) count += to_double(v) != 0 ? 1u : 0u;
  return count;
}

// ---------------------------------------------------------------------------------------------
// Seeded data. mt19937_64's output is fixed by the standard, and the conversions below are our
// own (std::normal_distribution differs between standard libraries), so the data are the same
// everywhere.

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}

  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1p-53; }

  /// N(mean, stddev) by Box–Muller.
  double normal(double mean, double stddev) {
    const double radius = std::sqrt(-2 * std::log(1 - uniform()));
    return mean + stddev * radius * std::cos(2 * 3.14159265358979323846 * uniform());
  }

  std::vector<double> normal(std::size_t n, double mean, double stddev) {
    std::vector<double> out(n);
    for (double& v : out) v = normal(mean, stddev);
    return out;
  }

 private:
  std::mt19937_64 engine_;
};

/// n values N(mean, stddev), rounded to T.
template <class T>
std::vector<T> normal_values(std::size_t n, double mean, double stddev, std::uint64_t seed) {
  return narrow<T>(Random(seed).normal(n, mean, stddev));
}

/// x − by for every value, exact because every x is within a factor two of `by` (Sterbenz).
/// For offset rows like 1e4 + N(0, 1): LayerNorm is shift-invariant, so the reference can work
/// on the small deviations and owe no accuracy to its handling of a large mean.
inline std::vector<double> shifted(std::span<const double> x, double by) {
  std::vector<double> out(x.begin(), x.end());
  bool exact = true;
  for (double& v : out) {
    exact = exact && (by == 0 || (v / by >= 0.5 && v / by <= 2));
    v -= by;
  }
  REQUIRE(exact);
  return out;
}

/// Σ a·b in double: the scalar loss L = Σ w·y of the finite-difference tests.
inline double dot(std::span<const double> a, std::span<const double> b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

/// How far a finite-difference gradient may be from an exact one, relative to the largest:
/// with h = 1e-6, L's rounding (~1e-16·|L|) costs ~1e-10·|L| and the truncation ~h² = 1e-12,
/// while a wrong formula (RMSNorm with a −mean(g) term, say) is off by ~1e-1.
inline constexpr double finite_difference_limit = 1e-7;

/// dL/dv for every v in `values` by central differences (L(v + h) − L(v − h)) / 2h, each value
/// restored after its turn. loss() computes L from the current values.
template <class Loss>
std::vector<double> numeric_gradient(std::span<double> values, Loss&& loss, double h = 1e-6) {
  std::vector<double> gradient(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double saved = values[i];
    values[i] = saved + h;
    const double up = loss();
    values[i] = saved - h;
    const double down = loss();
    values[i] = saved;
    gradient[i] = (up - down) / (2 * h);
  }
  return gradient;
}

// ---------------------------------------------------------------------------------------------
// Norms, generically

template <class Norm>
inline constexpr bool is_layer_norm_v = false;
template <class T>
inline constexpr bool is_layer_norm_v<LayerNorm<T>> = true;

template <class Norm>
using options_t = std::conditional_t<is_layer_norm_v<Norm>, normkit::LayerNormOptions, normkit::RMSNormOptions>;

template <class Norm>
std::string norm_name() {
  return std::string(is_layer_norm_v<Norm> ? "LayerNorm<" : "RMSNorm<") +
         std::string(type_name<typename Norm::value_type>()) + ">";
}

template <class Norm>
Norm make_norm(std::size_t features, double eps) {
  options_t<Norm> options;
  options.eps = eps;
  return Norm(features, options);
}

/// γ ~ N(1, 0.5) and β ~ N(0, 0.5), for those the norm has: real scales and shifts, not 1 and 0.
template <class Norm>
void randomize_parameters(Norm& norm, std::uint64_t seed) {
  using A = typename Norm::accum_type;
  Random random(seed);
  for (A& g : norm.gamma()) g = static_cast<A>(random.normal(1, 0.5));
  if constexpr (is_layer_norm_v<Norm>) {
    for (A& b : norm.beta()) b = static_cast<A>(random.normal(0, 0.5));
  }
}

/// What training forward saves: y, and per row mean (LayerNorm only) and rstd.
template <class Norm>
struct Saved {
  std::vector<typename Norm::value_type> y;
  std::vector<typename Norm::accum_type> mean, rstd;
};

template <class Norm>
using values_t = std::vector<typename Norm::value_type>;

template <class Norm>
Saved<Norm> forward_train(const Norm& norm, std::span<const typename Norm::value_type> x) {
  const std::size_t rows = x.size() / norm.features();
  Saved<Norm> out{values_t<Norm>(x.size()), {}, std::vector<typename Norm::accum_type>(rows)};
  if constexpr (is_layer_norm_v<Norm>) {
    out.mean.resize(rows);
    norm.forward(x, out.y, out.mean, out.rstd);
  } else {
    norm.forward(x, out.y, out.rstd);
  }
  return out;
}

/// Inference forward, into a new vector, written from a line boundary on (on_line): other
/// outputs are wherever malloc puts them, so that the tests cover both.
template <class Norm>
values_t<Norm> inference(const Norm& norm, const values_t<Norm>& x) {
  values_t<Norm> storage;
  const std::span<typename Norm::value_type> y = on_line(storage, x.size());
  norm.forward(x, y);
  return values_t<Norm>(y.begin(), y.end());
}

/// backward() with the statistics of `saved`, writing dx into `dx` (may alias dy or x, or be empty).
template <class Norm, class T = typename Norm::value_type>
void backward_into(Norm& norm, std::type_identity_t<std::span<const T>> dy, std::type_identity_t<std::span<const T>> x,
                   const Saved<Norm>& saved, std::type_identity_t<std::span<T>> dx) {
  if constexpr (is_layer_norm_v<Norm>)
    norm.backward(dy, x, saved.mean, saved.rstd, dx);
  else
    norm.backward(dy, x, saved.rstd, dx);
}

template <class Norm>
values_t<Norm> backward(Norm& norm, const values_t<Norm>& dy, const values_t<Norm>& x, const Saved<Norm>& saved) {
  values_t<Norm> dx(x.size());
  backward_into(norm, dy, x, saved, dx);
  return dx;
}

/// Every accumulated gradient of the norm, exactly: grad_gamma, then grad_beta where it has one.
template <class Norm>
std::vector<double> all_gradients(const Norm& norm) {
  std::vector<double> all = widen(norm.grad_gamma());
  if constexpr (is_layer_norm_v<Norm>) {
    const std::vector<double> beta = widen(norm.grad_beta());
    all.insert(all.end(), beta.begin(), beta.end());
  }
  return all;
}

/// The double reference with the norm's own features, eps and parameters. LayerNorm rows may
/// be passed as x − offset (see shifted()); the saved means then get the offset back.
template <class Norm>
normkit::reference::Forward reference_forward(const Norm& norm, std::span<const double> x, double offset = 0) {
  const std::vector<double> gamma = widen(norm.gamma());
  if constexpr (is_layer_norm_v<Norm>) {
    const std::vector<double> beta = widen(norm.beta());
    normkit::reference::Forward ref =
        normkit::reference::layer_norm_forward(x, norm.features(), gamma, beta, norm.options().eps);
    for (double& m : ref.mean) m += offset;
    return ref;
  } else {
    REQUIRE(offset == 0);  // RMSNorm is not shift-invariant
    return normkit::reference::rms_norm_forward(x, norm.features(), gamma, norm.options().eps);
  }
}

template <class Norm>
normkit::reference::Backward reference_backward(const Norm& norm, std::span<const double> dy,
                                                std::span<const double> x) {
  const std::vector<double> gamma = widen(norm.gamma());
  if constexpr (is_layer_norm_v<Norm>) {
    return normkit::reference::layer_norm_backward(dy, x, norm.features(), gamma, norm.options().eps);
  } else {
    return normkit::reference::rms_norm_backward(dy, x, norm.features(), gamma, norm.options().eps);
  }
}

// ---------------------------------------------------------------------------------------------
// Limits (from the issue) and error measures

/// The unit roundoff of storing a float result as T: 2^-8 for bfloat16 (8 significant bits),
/// 2^-11 for float16 (11). 0 for float and double, whose own roundings are inside their limits.
template <class T>
inline constexpr double store_rounding = std::is_same_v<T, bfloat16>  ? 0x1p-8
                                         : std::is_same_v<T, float16> ? 0x1p-11
                                                                      : 0;

struct Limits {
  double forward;         ///< max |y − y_ref| / max(1, |y_ref|), rows N(0.3, 1.7)
  double forward_offset;  ///< the same for rows offset by up to 1e4, std 1
  double stats;           ///< mean relative to max(|mean|, std); rstd relative
  double dx;              ///< max |dx − dx_ref| / max(max |dx_ref|, dx_term_scale)
  double grads;           ///< the same for dγ and dβ
};

/// Float and double: the numbers. A 16-bit type is computed in float, then rounded once
/// on store: if the float result is within τ·max(1, |y_ref|), the stored one is within
/// u·(1 + τ)·max(1, |y_ref|) more (u = store_rounding). Statistics and gradients stay float.
template <class T>
constexpr Limits limits() {
  if constexpr (std::is_same_v<T, double>) {
    return {1e-12, 1e-12, 1e-12, 1e-10, 1e-10};
  } else {
    constexpr Limits f{5e-6, 1e-5, 2e-6, 2e-5, 2e-5};
    constexpr double u = store_rounding<T>;
    return {f.forward + u * (1 + f.forward), f.forward_offset + u * (1 + f.forward_offset), f.stats,
            f.dx + u * (1 + f.dx), f.grads};
  }
}

/// The worst element of a comparison.
struct Deviation {
  double error = 0;
  std::size_t index = 0;
  double got = 0, want = 0;
};

/// The element where |got − want| / scale(i) is largest; a NaN error counts as infinite. `got`
/// is any sized range of element or accumulation values.
template <class Got, class Scale>
Deviation worst_of(const Got& got, const std::vector<double>& want, Scale&& scale) {
  REQUIRE(std::size(got) == want.size());
  Deviation worst;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = to_double(got[i]);
    double e = std::fabs(g - want[i]) / scale(i);
    if (std::isnan(e)) e = std::numeric_limits<double>::infinity();
    if (e > worst.error || i == 0) worst = {e, i, g, want[i]};
  }
  return worst;
}

/// The worst |got − want| / max(floor, |want|).
template <class Got>
Deviation worst_relative(const Got& got, const std::vector<double>& want, double floor = 1) {
  return worst_of(got, want, [&](std::size_t i) { return std::max(floor, std::fabs(want[i])); });
}

/// The worst |got − want| relative to the largest |want|, or to `floor` if that is larger
/// (for gradients, whose small entries are sums that cancel).
template <class Got>
Deviation worst_vs_peak(const Got& got, const std::vector<double>& want, double floor = 0) {
  double peak = floor;
  for (double w : want) peak = std::max(peak, std::fabs(w));
  if (peak == 0) peak = 1;
  return worst_of(got, want, [peak](std::size_t) { return peak; });
}

/// The size of the terms dx is computed from, max rstd·|dy·γ| over the batch: the floor for
/// comparing dx. For ordinary rows it is about dx's own largest value, but in a row of one
/// RMSNorm feature or two LayerNorm features dx = rstd·(g − …) cancels down to eps-sized values,
/// and float can only promise its roundings relative to the terms.
template <class Norm>
double dx_term_scale(const Norm& norm, const std::vector<double>& dy, const std::vector<double>& rstd) {
  const std::size_t features = norm.features();
  const std::vector<double> gamma = widen(norm.gamma());
  double scale = 0;
  for (std::size_t k = 0; k < dy.size(); ++k) {
    const double g = dy[k] * (gamma.empty() ? 1 : gamma[k % features]);
    scale = std::max(scale, rstd[k / features] * std::fabs(g));
  }
  return scale;
}

/// The largest error seen per check, printed at exit when NORMKIT_TEST_REPORT is set, to show
/// how much room each limit leaves on this ISA.
class ErrorReport {
 public:
  void add(const std::string& what, double error, double limit) {
    auto [it, fresh] = worst_.try_emplace(what, error, limit);
    if (!fresh && !(error <= it->second.first)) it->second.first = error;
  }
  ~ErrorReport() {
    const char* enabled = std::getenv("NORMKIT_TEST_REPORT");
    if (enabled == nullptr || *enabled == '\0') return;
    std::printf("\nnormkit tests on %s: largest error seen / limit\n",
                std::string(normkit::to_string(normkit::active_isa())).c_str());
    for (const auto& [what, worst] : worst_) {
      std::printf("  %-48s %10.3g / %-10.3g (%5.1f%%)\n", what.c_str(), worst.first, worst.second,
                  100 * worst.first / worst.second);
    }
  }

 private:
  std::map<std::string, std::pair<double, double>> worst_;
};

inline ErrorReport& error_report() {
  static ErrorReport report;
  return report;
}

/// CHECKs d.error <= limit (shown as their ratio), naming `what` and the worst element on
/// failure, and records it for the report.
inline void check_within(const std::string& what, const Deviation& d, double limit) {
  INFO(what << ": worst at [" << d.index << "]: got " << d.got << ", want " << d.want << ", error " << d.error
            << ", limit " << limit);
  CHECK(d.error / limit <= 1);
  error_report().add(what, d.error, limit);
}

/// Compares a norm's training forward against the reference: y with `y_limit`, the saved mean
/// (relative to max(|mean|, std)) and rstd with the type's stats limit.
template <class Norm>
void check_forward(const Saved<Norm>& got, const normkit::reference::Forward& want, double y_limit,
                   const std::string& label) {
  using T = typename Norm::value_type;
  const std::string name = norm_name<Norm>();
  check_within(name + " y" + label, worst_relative(got.y, want.y), y_limit);
  check_within(name + " rstd", worst_relative(got.rstd, want.rstd, 0), limits<T>().stats);
  if constexpr (is_layer_norm_v<Norm>) {
    const Deviation worst = worst_of(
        got.mean, want.mean, [&](std::size_t i) { return std::max(std::fabs(want.mean[i]), 1 / want.rstd[i]); });
    check_within(name + " mean", worst, limits<T>().stats);
  }
}

// ---------------------------------------------------------------------------------------------
// Comparisons with the reference over sizes

/// The row lengths the issue asks for: every SIMD tail (1…17 and around 32, 64, 128, 256), model
/// widths, and a row longer than any chunk; and a row of each register count of the short-row
/// path past 8 (9…16 vectors, each compiled separately) at 2, 4, 8 and 16 lanes.
inline std::vector<std::size_t> test_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t f = 1; f <= 17; ++f) sizes.push_back(f);
  for (const std::size_t f :
       {31u, 32u, 33u, 63u, 64u, 65u, 127u, 128u, 129u, 255u, 256u, 257u, 768u, 1000u, 4096u, 4099u, 65537u}) {
    sizes.push_back(f);
  }
  for (const std::size_t lanes : {2u, 4u, 8u, 16u}) {
    for (std::size_t vectors = 9; vectors <= 16; ++vectors) {
      const std::size_t f = vectors * lanes - 1;
      if (std::find(sizes.begin(), sizes.end(), f) == sizes.end()) sizes.push_back(f);
    }
  }
  return sizes;
}

/// Few rows of the long ones, to keep the suite fast under sanitizers and qemu.
inline std::size_t rows_for(std::size_t features) { return features > 4099 ? 2 : features >= 768 ? 3 : 5; }

/// Rows N(0.3, 1.7), or N(offset, 1) for a nonzero offset, as T.
template <class T>
std::vector<T> test_rows(std::size_t rows, std::size_t features, double offset, std::uint64_t seed) {
  return offset == 0 ? normal_values<T>(rows * features, 0.3, 1.7, seed)
                     : normal_values<T>(rows * features, offset, 1, seed);
}

/// The reference forward of x, shifting LayerNorm rows by `offset` first (see reference_forward).
template <class Norm>
normkit::reference::Forward reference_forward_of(const Norm& norm, const values_t<Norm>& x, double offset) {
  if constexpr (is_layer_norm_v<Norm>)
    return reference_forward(norm, shifted(widen(x), offset), offset);
  else
    return reference_forward(norm, widen(x));
}

/// Training forward of random rows with random γ/β against the reference, within the issue's
/// limits; and inference forward (forward() and operator()) gives the very same y.
template <class Norm>
void check_forward_against_reference(Norm norm, std::size_t rows, double offset = 0) {
  using T = typename Norm::value_type;
  const std::size_t features = norm.features();
  CAPTURE(rows, features, offset, norm.options().eps);
  randomize_parameters(norm, features + 1);
  const auto x = test_rows<T>(rows, features, offset, features);
  const Saved<Norm> saved = forward_train(norm, x);
  check_forward(saved, reference_forward_of(norm, x, offset),
                offset == 0 ? limits<T>().forward : limits<T>().forward_offset, offset == 0 ? "" : " (offset rows)");
  CHECK(same_bits(inference(norm, x), saved.y));
  values_t<Norm> y(x.size());
  norm(x, y);
  CHECK(same_bits(y, saved.y));
}

/// Backward of random rows and dy with random γ/β against the reference: dx (see dx_term_scale),
/// dγ and dβ relative to their largest values.
template <class Norm>
void check_backward_against_reference(Norm norm, std::size_t rows, double offset = 0) {
  using T = typename Norm::value_type;
  const std::size_t features = norm.features();
  CAPTURE(rows, features, offset, norm.options().eps);
  randomize_parameters(norm, features + 2);
  const auto x = test_rows<T>(rows, features, offset, features + 3);
  const auto dy = normal_values<T>(rows * features, 0, 1, features + 4);
  const Saved<Norm> saved = forward_train(norm, x);
  const auto dx = backward(norm, dy, x, saved);
  const std::vector<double> x_ref = is_layer_norm_v<Norm> ? shifted(widen(x), offset) : widen(x);
  const std::vector<double> dy_ref = widen(dy);
  const normkit::reference::Backward want = reference_backward(norm, dy_ref, x_ref);
  const double dx_floor = dx_term_scale(norm, dy_ref, reference_forward(norm, x_ref).rstd);
  const std::string name = norm_name<Norm>();
  check_within(name + " dx", worst_vs_peak(dx, want.dx, dx_floor), limits<T>().dx);
  if (!norm.gamma().empty()) {
    check_within(name + " grad_gamma", worst_vs_peak(norm.grad_gamma(), want.grad_gamma), limits<T>().grads);
  }
  if constexpr (is_layer_norm_v<Norm>) {
    if (!norm.beta().empty()) {
      check_within(name + " grad_beta", worst_vs_peak(norm.grad_beta(), want.grad_beta), limits<T>().grads);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Drivers

/// Runs body.template operator()<T>() for each listed type.
template <class... Ts, class Body>
void for_types(Body&& body) {
  (body.template operator()<Ts>(), ...);
}

/// For float, double, bfloat16 and float16, with the type named on failure.
template <class Body>
void for_each_type(Body&& body) {
  for_types<float, double, bfloat16, float16>([&]<class T>() {
    INFO("element type " << type_name<T>());
    body.template operator()<T>();
  });
}

/// Runs body.template operator()<Norm>() for LayerNorm<T> and RMSNorm<T> of every element type.
template <class Body>
void for_each_norm(Body&& body) {
  for_each_type([&]<class T>() {
    for_types<LayerNorm<T>, RMSNorm<T>>([&]<class Norm>() {
      INFO("norm " << norm_name<Norm>());
      body.template operator()<Norm>();
    });
  });
}

/// Restores the active instruction set on scope exit: the suite runs once per ISA (NORMKIT_ISA),
/// and a test that switches must not change what the others run on.
class IsaGuard {
 public:
  IsaGuard() : saved_(normkit::active_isa()) {}
  ~IsaGuard() { normkit::set_isa(saved_); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  normkit::isa saved_;
};

/// Calls f, which must throw std::invalid_argument, and returns its what(); CHECK-fails (and
/// returns "") if nothing was thrown. Other exceptions propagate and fail the test.
template <class F>
std::string invalid_argument_message(F&& f) {
  bool thrown = false;
  std::string message;
  try {
    f();
  } catch (const std::invalid_argument& e) {
    thrown = true;
    message = e.what();
  }
  CHECK(thrown);
  return message;
}

}  // namespace nktest
