// The naive double-precision reference of LayerNorm and RMSNorm, forward and backward: two-pass
// statistics (with the mean's correction sum) and the textbook formulas, written for
// obviousness, not speed, over each row scaled by a power of two so that any finite values
// work. Every fast path is tested against it, and users may check their own results with it.
// x, dy: rows × features values, row-major; gamma and beta: features values, or empty for
// γ = 1, β = 0. Each function throws std::invalid_argument, naming itself and the sizes, when
// features is 0 or a size does not fit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "detail/checks.hpp"

namespace normkit::reference {

/// y for rows × features values, and each row's mean and rstd = 1/sqrt(var + eps)
/// (for RMSNorm, mean stays empty and rstd = 1/sqrt(mean(x²) + eps)).
struct Forward {
  std::vector<double> y, mean, rstd;
};

/// dx, and the gradients of γ and β summed over the rows (β's empty for RMSNorm).
struct Backward {
  std::vector<double> dx, grad_gamma, grad_beta;
};

namespace detail {
inline std::size_t rows_of(const char* fn, std::span<const double> x, std::size_t features) {
  normkit::detail::check_features(fn, features);
  return normkit::detail::check_rows(fn, "x", x.size(), features);
}
inline void check_parameter(const char* fn, const char* name, std::span<const double> p, std::size_t features) {
  if (!p.empty()) normkit::detail::check_same_size(fn, name, p.size(), "features", features);
}

/// e with 2^e ≤ max|x| < 2^(e+1) over a row (0 for a row of zeros, or with Inf or NaN). The
/// reference works on x·2^-e, so that no square overflows (|x| ≳ 1e154) or vanishes
/// (≲ 1e-162). Powers of two scale exactly: other rows come out bit for bit as unscaled.
inline int row_exponent(const double* row, std::size_t features) {
  double largest = 0;
  for (std::size_t j = 0; j < features; ++j) largest = std::max(largest, std::fabs(row[j]));
  return largest > 0 && std::isfinite(largest) ? std::ilogb(largest) : 0;
}

/// A row's rstd = 1/sqrt(var + eps), from its variance scaled by 2^-2e, and x̂ per deviation
/// of the scaled row.
struct Scaled {
  double rstd, xhat_per_deviation;
};
inline Scaled scaled_rstd(double scaled_var, int e, double eps) {
  if (scaled_var == 0) {
    // A constant row: every deviation is 0, and x̂ = 0·rstd (NaN where eps = 0) at any scale.
    const double rstd = 1 / std::sqrt(eps);
    return {rstd, rstd};
  }
  // Another row's scaled variance is at least ~2^-105/features, beside which an eps that
  // scaling takes below double's range could not show.
  const double scaled_eps = std::ldexp(eps, -2 * e);
  if (std::isinf(scaled_eps)) {
    // eps is more than 2^1024 times the variance, which cannot show in var + eps.
    const double rstd = 1 / std::sqrt(eps);
    return {rstd, std::ldexp(rstd, e)};
  }
  const double per_deviation = 1 / std::sqrt(scaled_var + scaled_eps);
  return {std::ldexp(per_deviation, -e), per_deviation};
}
}  // namespace detail

/// LayerNorm: y = (x − mean)·rstd·γ + β with the population variance (divided by features).
/// An empty gamma means γ = 1, an empty beta β = 0.
inline Forward layer_norm_forward(std::span<const double> x, std::size_t features, std::span<const double> gamma,
                                  std::span<const double> beta, double eps) {
  const char* fn = "normkit::reference::layer_norm_forward";
  const std::size_t rows = detail::rows_of(fn, x, features);
  detail::check_parameter(fn, "gamma", gamma, features);
  detail::check_parameter(fn, "beta", beta, features);
  Forward out{std::vector<double>(x.size()), std::vector<double>(rows), std::vector<double>(rows)};
  const double n = static_cast<double>(features);
  std::vector<double> row(features);
  for (std::size_t i = 0; i < rows; ++i) {
    const int e = detail::row_exponent(x.data() + i * features, features);
    for (std::size_t j = 0; j < features; ++j) row[j] = std::ldexp(x[i * features + j], -e);
    double sum = 0;
    for (std::size_t j = 0; j < features; ++j) sum += row[j];
    // The mean as a pair mean + mean_low. The sum's rounding error grows with |mean| (4e-13 at
    // 1e4 + N(0,1)), and so does the rounding of the mean itself; the sum of the deviations
    // from it measures both, and subtracting the pair keeps x − mean exact to the size of the
    // deviations.
    const double mean = sum / n;
    double residual = 0;
    for (std::size_t j = 0; j < features; ++j) residual += row[j] - mean;
    const double mean_low = residual / n;
    double squares = 0;
    for (std::size_t j = 0; j < features; ++j) squares += (row[j] - mean - mean_low) * (row[j] - mean - mean_low);
    const detail::Scaled scaled = detail::scaled_rstd(squares / n, e, eps);
    out.mean[i] = std::ldexp(mean + mean_low, e);
    out.rstd[i] = scaled.rstd;
    for (std::size_t j = 0; j < features; ++j) {
      const double g = gamma.empty() ? 1 : gamma[j], b = beta.empty() ? 0 : beta[j];
      out.y[i * features + j] = (row[j] - mean - mean_low) * scaled.xhat_per_deviation * g + b;
    }
  }
  return out;
}

/// RMSNorm: y = x·rstd·γ with rstd = 1/sqrt(mean(x²) + eps). An empty gamma means γ = 1.
inline Forward rms_norm_forward(std::span<const double> x, std::size_t features, std::span<const double> gamma,
                                double eps) {
  const char* fn = "normkit::reference::rms_norm_forward";
  const std::size_t rows = detail::rows_of(fn, x, features);
  detail::check_parameter(fn, "gamma", gamma, features);
  Forward out{std::vector<double>(x.size()), {}, std::vector<double>(rows)};
  std::vector<double> row(features);
  for (std::size_t i = 0; i < rows; ++i) {
    const int e = detail::row_exponent(x.data() + i * features, features);
    for (std::size_t j = 0; j < features; ++j) row[j] = std::ldexp(x[i * features + j], -e);
    double squares = 0;
    for (std::size_t j = 0; j < features; ++j) squares += row[j] * row[j];
    const detail::Scaled scaled = detail::scaled_rstd(squares / static_cast<double>(features), e, eps);
    out.rstd[i] = scaled.rstd;
    for (std::size_t j = 0; j < features; ++j) {
      out.y[i * features + j] = row[j] * scaled.xhat_per_deviation * (gamma.empty() ? 1 : gamma[j]);
    }
  }
  return out;
}

/// LayerNorm gradients. Recomputes each row's statistics from x, then with x̂ = (x − mean)·rstd
/// and g = dy·γ: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), grad_gamma = Σ dy·x̂, grad_beta = Σ dy.
inline Backward layer_norm_backward(std::span<const double> dy, std::span<const double> x, std::size_t features,
                                    std::span<const double> gamma, double eps) {
  const char* fn = "normkit::reference::layer_norm_backward";
  const std::size_t rows = detail::rows_of(fn, x, features);
  normkit::detail::check_same_size(fn, "dy", dy.size(), "x", x.size());
  detail::check_parameter(fn, "gamma", gamma, features);
  const Forward f = layer_norm_forward(x, features, {}, {}, eps);  // f.y is x̂
  Backward out{std::vector<double>(x.size()), std::vector<double>(features), std::vector<double>(features)};
  const double n = static_cast<double>(features);
  for (std::size_t i = 0; i < rows; ++i) {
    double mean_g = 0, mean_gx = 0;
    for (std::size_t j = 0; j < features; ++j) {
      const double g = dy[i * features + j] * (gamma.empty() ? 1 : gamma[j]);
      mean_g += g / n;
      mean_gx += g * f.y[i * features + j] / n;
    }
    for (std::size_t j = 0; j < features; ++j) {
      const std::size_t k = i * features + j;
      const double g = dy[k] * (gamma.empty() ? 1 : gamma[j]);
      out.dx[k] = f.rstd[i] * (g - mean_g - f.y[k] * mean_gx);
      out.grad_gamma[j] += dy[k] * f.y[k];
      out.grad_beta[j] += dy[k];
    }
  }
  return out;
}

/// RMSNorm gradients. With x̂ = x·rstd and g = dy·γ: dx = rstd·(g − x̂·mean(g·x̂)) (no mean(g)
/// term: RMSNorm does not center), grad_gamma = Σ dy·x̂.
inline Backward rms_norm_backward(std::span<const double> dy, std::span<const double> x, std::size_t features,
                                  std::span<const double> gamma, double eps) {
  const char* fn = "normkit::reference::rms_norm_backward";
  const std::size_t rows = detail::rows_of(fn, x, features);
  normkit::detail::check_same_size(fn, "dy", dy.size(), "x", x.size());
  detail::check_parameter(fn, "gamma", gamma, features);
  const Forward f = rms_norm_forward(x, features, {}, eps);  // f.y is x̂
  Backward out{std::vector<double>(x.size()), std::vector<double>(features), {}};
  for (std::size_t i = 0; i < rows; ++i) {
    double mean_gx = 0;
    for (std::size_t j = 0; j < features; ++j) {
      mean_gx += dy[i * features + j] * (gamma.empty() ? 1 : gamma[j]) * f.y[i * features + j] /
                 static_cast<double>(features);
    }
    for (std::size_t j = 0; j < features; ++j) {
      const std::size_t k = i * features + j;
      const double g = dy[k] * (gamma.empty() ? 1 : gamma[j]);
      out.dx[k] = f.rstd[i] * (g - f.y[k] * mean_gx);
      out.grad_gamma[j] += dy[k] * f.y[k];
    }
  }
  return out;
}

}  // namespace normkit::reference
