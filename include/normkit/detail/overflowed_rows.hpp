// Backward for the rows whose saved rstd overflowed its type (+Inf): constant rows with eps = 0,
// and rows whose spread (RMSNorm: root mean square) is below 1/max of accum_t. The row kernels
// would form x̂ from (x − mean)·∞, ±Inf or NaN, and add NaN into the γ gradients of the batch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "../types.hpp"
#include "moments.hpp"
#include "rows.hpp"

namespace normkit::detail {

/// Whether training forward can have saved some row rstd = +Inf: only where 1/√eps, the largest
/// rstd it saves, may leave A's range (eps below 3.4e-77 for A = float, eps = 0 for double).
template <class A>
bool rstd_may_overflow(double eps) noexcept {
  const double largest = static_cast<double>(std::numeric_limits<A>::max());
  return !(eps > 4 / (largest * largest));  // 1/√eps < largest/2; for double, 4/∞ = 0
}

/// Whether backward must take row i through overflowed_row_backward.
template <class T>
bool rstd_overflowed(const BackwardRows<T>& a, std::size_t i) noexcept {
  return a.rstd[i] == std::numeric_limits<accum_t<T>>::infinity();
}

/// Backward of row i, whose saved rstd is +Inf, recomputed in double from x alone, as the
/// reference does: the row (for LayerNorm less its first value, which leaves a constant row
/// exactly 0) is scaled by a power of two (row_scale), and x̂ comes from the statistics of the
/// scaled row. x̂ is then the one forward used, 0 for a constant row (forward gave β), and dy·x̂
/// and dy are added into a.grad_gamma and a.grad_beta like any row's. dx = rstd·(g − mean(g) −
/// x̂·mean(g·x̂)) with the row's true rstd, which A could not hold: finite where T holds the
/// result, ±Inf beyond, and for a constant row with eps = 0, which has no derivative, ±Inf or
/// NaN. Scalar, as such rows are rare; dx may be x or dy, as each of its values is written after
/// the last read of its x and dy. Centered: LayerNorm, else RMSNorm.
template <bool Centered, class T>
void overflowed_row_backward(const BackwardRows<T>& a, std::size_t i) {
  using A = accum_t<T>;
  const std::size_t n = a.features;
  const double inv_n = 1 / static_cast<double>(n);
  const T* x = a.x + i * a.x_stride;
  const T* dy = a.dy + i * a.dy_stride;
  const auto value = [](T v) { return static_cast<double>(static_cast<A>(v)); };
  // x_j − origin is exact here: values of T this close together are equal or tiny.
  const double origin = Centered ? value(x[0]) : 0;
  double largest = 0;
  for (std::size_t j = 0; j < n; ++j) largest = std::max(largest, std::fabs(value(x[j]) - origin));
  const double scale = largest > 0 && std::isfinite(largest) ? row_scale<double>(largest) : 1;
  const auto scaled = [&](std::size_t j) { return (value(x[j]) - origin) * scale; };
  double sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += scaled(j);
  const double center = Centered ? sum * inv_n : 0;
  double squares = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double d = scaled(j) - center;
    squares += d * d;
  }
  const double var = squares * inv_n;
  const double r = scaled_rstd(var, a.eps, scale).applied;  // of the scaled row
  const double xhat_per_deviation = var > 0 ? r : 0;        // not 0·∞ for a constant row
  const auto xhat = [&](std::size_t j) { return (scaled(j) - center) * xhat_per_deviation; };
  const auto g = [&](std::size_t j) {
    return a.gamma != nullptr ? value(dy[j]) * static_cast<double>(a.gamma[j]) : value(dy[j]);
  };
  double sum_g = 0, sum_gx = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double g_j = g(j);
    sum_g += g_j;
    sum_gx += g_j * xhat(j);
  }
  const double mean_g = Centered ? sum_g * inv_n : 0;
  const double mean_gx = sum_gx * inv_n;
  T* dx = a.dx != nullptr ? a.dx + i * a.dx_stride : nullptr;
  for (std::size_t j = 0; j < n; ++j) {
    const double xhat_j = xhat(j);
    const double g_j = g(j);
    if (a.grad_gamma != nullptr) a.grad_gamma[j] += static_cast<A>(value(dy[j]) * xhat_j);
    if (a.grad_beta != nullptr) a.grad_beta[j] += static_cast<A>(value(dy[j]));
    // Times r, then the scale: the true rstd r·scale may itself leave double's range.
    if (dx != nullptr) dx[j] = static_cast<T>(static_cast<A>((g_j - mean_g - xhat_j * mean_gx) * r * scale));
  }
}

}  // namespace normkit::detail
