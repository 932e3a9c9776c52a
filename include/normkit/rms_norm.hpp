// RMSNorm<T>: y = x/sqrt(mean(x²) + eps)·γ over each row of features (no centering, no β),
// with its training forward and backward.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "detail/aligned.hpp"
#include "detail/checks.hpp"
#include "detail/driver.hpp"
#include "options.hpp"
#include "types.hpp"

namespace normkit {

/// Root-mean-square normalization over the last dimension: each row of `features` values is
/// divided by its own root mean square, never mixed with other rows.
/// T is float, double, bfloat16 or float16; statistics and parameters are kept in accum_type.
/// forward() is const and may run concurrently; backward() adds into the gradient.
template <class T>
class RMSNorm {
  static_assert(detail::is_element_v<T>, "RMSNorm<T>: T must be float, double, bfloat16 or float16");

 public:
  using value_type = T;
  using accum_type = accum_t<T>;

  /// Throws std::invalid_argument if features is 0 or eps is negative or not finite.
  explicit RMSNorm(std::size_t features, RMSNormOptions options = {}) : features_(features), options_(options) {
    detail::check_features("normkit::RMSNorm", features);
    detail::check_eps("normkit::RMSNorm", options.eps);
    if (options.elementwise_affine) {
      gamma_.assign(features, accum_type(1));
      grad_gamma_.assign(features, accum_type(0));
    }
  }

  std::size_t features() const noexcept { return features_; }
  const RMSNormOptions& options() const noexcept { return options_; }

  /// γ, features values starting at 1; empty without elementwise_affine.
  std::span<accum_type> gamma() noexcept { return gamma_; }
  std::span<const accum_type> gamma() const noexcept { return gamma_; }
  /// The gradient sum that backward() adds into; zero_grad() clears it.
  std::span<accum_type> grad_gamma() noexcept { return grad_gamma_; }
  std::span<const accum_type> grad_gamma() const noexcept { return grad_gamma_; }
  void zero_grad() noexcept { std::fill(grad_gamma_.begin(), grad_gamma_.end(), accum_type(0)); }

  /// Inference: y = normalized x, for rows = x.size() / features rows, row-major.
  /// y may be the very same memory as x. Throws std::invalid_argument, before writing
  /// anything, if x.size() is not a multiple of features, y.size() != x.size(), or y partly
  /// overlaps x (or γ or its gradient).
  void operator()(std::span<const T> x, std::span<T> y) const { forward(x, y); }
  void forward(std::span<const T> x, std::span<T> y) const {
    run_forward("normkit::RMSNorm::forward", x, y, {}, false);
  }
  /// Training: also writes each row's rstd = 1/sqrt(mean(x²) + eps) into rstd[0, rows), for
  /// backward(). Throws as above, and if rstd has fewer than rows values or overlaps x, y, γ
  /// or its gradient.
  void forward(std::span<const T> x, std::span<T> y, std::span<accum_type> rstd) const {
    run_forward("normkit::RMSNorm::forward", x, y, rstd, true);
  }

  /// Gradients for the rows of x, given dy = ∂loss/∂y and the rstd that training forward saved:
  /// writes dx (skipped when dx is empty; may be the very same memory as dy or x) and adds
  /// Σ dy·x̂ into grad_gamma(). Throws std::invalid_argument, before writing anything, on
  /// sizes that do not match x, rstd shorter than the rows, partial overlap, or any argument
  /// sharing memory with grad_gamma() (or dx with γ).
  void backward(std::span<const T> dy, std::span<const T> x, std::span<const accum_type> rstd, std::span<T> dx) {
    const char* fn = "normkit::RMSNorm::backward";
    const std::size_t rows = detail::check_rows(fn, "x", x.size(), features_);
    detail::check_same_size(fn, "dy", dy.size(), "x", x.size());
    detail::check_per_row(fn, "rstd", rstd.size(), rows);
    const auto used_rstd = rstd.first(rows);
    const detail::OwnArrays<accum_type> own = own_arrays();
    own.check_backward_input(fn, "dy", dy);
    own.check_backward_input(fn, "x", x);
    own.check_backward_input(fn, "rstd", used_rstd);
    if (!dx.empty()) {
      detail::check_same_size(fn, "dx", dx.size(), "x", x.size());
      detail::check_in_place_or_disjoint(fn, "dx", dx, "dy", dy);
      detail::check_in_place_or_disjoint(fn, "dx", dx, "x", x);
      detail::check_disjoint(fn, "dx", dx, "rstd", used_rstd);
      own.check_output(fn, "dx", dx);
    }
    const std::size_t arrays = detail::backward_arrays(dy.data(), x.data(), dx.data());
    const detail::BackwardRows<T> args{dy.data(), features_, x.data(), features_,
                                       dx.empty() ? nullptr : dx.data(), features_, features_,
                                       gamma_.empty() ? nullptr : gamma_.data(), nullptr, rstd.data(),
                                       options_.eps, nullptr, nullptr, detail::should_stream(dx.size_bytes(), arrays),
                                       detail::fits_cache(x.size_bytes(), arrays),
                                       detail::wide_backward_reads_ahead()};
    detail::backward<detail::norm_kind::rms>(args, rows, grad_gamma_.empty() ? nullptr : grad_gamma_.data(),
                                             nullptr, workspace_);
  }

 private:
  void run_forward(const char* fn, std::span<const T> x, std::span<T> y, std::span<accum_type> rstd,
                   bool training) const {
    const std::size_t rows = detail::check_rows(fn, "x", x.size(), features_);
    detail::check_same_size(fn, "y", y.size(), "x", x.size());
    detail::check_in_place_or_disjoint(fn, "y", y, "x", x);
    const detail::OwnArrays<accum_type> own = own_arrays();
    own.check_output(fn, "y", y);
    if (training) {
      detail::check_per_row(fn, "rstd", rstd.size(), rows);
      const auto used_rstd = rstd.first(rows);
      detail::check_disjoint(fn, "rstd", used_rstd, "x", x);
      detail::check_disjoint(fn, "rstd", used_rstd, "y", y);
      own.check_output(fn, "rstd", used_rstd);
    }
    const std::size_t arrays = y.data() == x.data() ? 1 : 2;
    const bool stream = detail::should_stream(y.size_bytes(), arrays);
    const detail::ForwardRows<T> args{x.data(), features_, y.data(), features_, features_,
                                      gamma_.empty() ? nullptr : gamma_.data(), nullptr, nullptr,
                                      training ? rstd.data() : nullptr, options_.eps, stream,
                                      detail::fits_cache(y.size_bytes(), arrays),
                                      detail::input_fits_cache(x.size_bytes()), detail::AheadHint::into_l2,
                                      detail::cached_group_bytes()};
    detail::forward_rows<detail::norm_kind::rms>(args, rows);
  }

  detail::OwnArrays<accum_type> own_arrays() const noexcept { return {gamma_, {}, grad_gamma_, {}}; }

  std::size_t features_;
  RMSNormOptions options_;
  detail::aligned_vector<accum_type> gamma_, grad_gamma_;
  // backward()'s gradient partials, kept for the next call: about log2(rows / 64) + 2 buffers
  // of 2·features accum_type, released with the functor.
  detail::SumWorkspace<accum_type> workspace_;
};

}  // namespace normkit
