// Count, mean and sum of squared deviations (M2) of a run of values, Chan's merge of two runs,
// and the per-row rescaling that keeps statistics finite and accurate at any magnitude.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

namespace normkit::detail {

/// Moments of a run of values. Kept in double: runs are merged once per chunk of a row, so
/// the extra precision costs nothing, and the per-lane work stays in the accumulation type.
struct Moments {
  double count = 0;
  double mean = 0;
  double m2 = 0;  // sum of squared deviations from the mean
};

/// Chan, Golub and LeVeque's pairwise update: the moments of the union of two runs.
inline Moments merge(const Moments& a, const Moments& b) noexcept {
  if (a.count == 0) return b;
  if (b.count == 0) return a;
  const double count = a.count + b.count;
  const double delta = b.mean - a.mean;
  return {count, a.mean + delta * (b.count / count),
          a.m2 + b.m2 + delta * delta * (a.count * b.count / count)};
}

/// a + b as an unevaluated pair: sum holds the rounded sum and error exactly what rounding lost
/// (Knuth's TwoSum, valid in either order of magnitude).
struct TwoSum {
  double sum, error;
};
inline TwoSum two_sum(double a, double b) noexcept {
  const double sum = a + b;
  const double b_part = sum - a;
  return {sum, (a - (sum - b_part)) + (b - b_part)};
}

/// Below this variance, squared deviations of values in A start losing bits to underflow.
template <class A>
inline constexpr double tiny_variance =
    static_cast<double>(std::numeric_limits<A>::min()) * (1ull << std::numeric_limits<A>::digits);

/// True when a variance (or mean square) fits A without overflow and without losing bits to
/// underflow; false for NaN too. Rows outside it are rescaled (or, NaN/Inf, left to poison).
template <class A>
inline bool comfortable_variance(double var) noexcept {
  return var >= tiny_variance<A> && var <= static_cast<double>(std::numeric_limits<A>::max());
}

/// The power of two that brings `peak` (the row's largest magnitude, finite and nonzero) into
/// [0.5, 1), clamped so that it is itself a normal A. Multiplying by it is exact.
template <class A>
inline double row_scale(double peak) noexcept {
  int exponent = 0;
  std::frexp(peak, &exponent);
  constexpr int limit = std::numeric_limits<A>::max_exponent - std::numeric_limits<A>::digits;
  exponent = exponent > limit ? limit : (exponent < -limit ? -limit : exponent);
  return std::ldexp(1.0, -exponent);
}

/// A row's rstd twice: `applied` to the row multiplied by its scale, and `saved`, the row's own.
struct Rstd {
  double applied, saved;
};

/// 1 / sqrt(var + eps·scale²) for a row multiplied by `scale` (a power of two, see row_scale),
/// var (+0 or more, or NaN) being the variance of the scaled row, and that times scale for the
/// row itself: +Inf for a constant row with eps = 0, which the second branch below takes.
/// Double rows are scaled by up to 2^±971, and eps·scale² then overflowed for rows below
/// ~1e-157 (eps = 1e-5), whose rstd came out 0, and underflowed for long constant rows above
/// ~1e151, whose rstd came out inexact and from ~1e159 +Inf, where both are 1/sqrt(eps). Where
/// eps·scale² leaves double's range, the row's own rstd is taken at the row's scale,
/// 1/sqrt(var/scale² + eps): what underflows then is the variance of a tiny row beside eps, or
/// a constant row's 0. `applied` may leave double's range there (see applied_rstd).
inline Rstd scaled_rstd(double var, double eps, double scale) noexcept {
  const double scaled_eps = eps * scale * scale;
  const bool in_range = scaled_eps <= std::numeric_limits<double>::max() &&
                        (scaled_eps >= std::numeric_limits<double>::min() || var > 0);
  if (in_range) {
    const double r = 1 / std::sqrt(var + scaled_eps);
    return {r, r * scale};
  }
  const double saved = 1 / std::sqrt(var / scale / scale + eps);
  return {saved / scale, saved};
}

/// The multiplier the kernels apply, later rounded to A: rstd, or 0 where rstd exceeds A's
/// range. That happens only for a constant row: with eps = 0 (rstd +Inf), in float with eps
/// below ~9e-78, or, rescaled (longer than the registers), with eps up to ~4e-15 for a row
/// near 1e30. Its centered values are all exactly 0, so 0 keeps y at β instead of 0·Inf = NaN.
template <class A>
inline double applied_rstd(double rstd) noexcept {
  return rstd <= static_cast<double>(std::numeric_limits<A>::max()) || rstd != rstd ? rstd : 0;
}

}  // namespace normkit::detail
