// Argument checks shared by LayerNorm and RMSNorm: sizes, row counts and overlap. The functors
// run all of them before writing anything.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "error.hpp"

namespace normkit::detail {

template <class U>
std::uintptr_t address_of(std::span<U> s) noexcept {
  return reinterpret_cast<std::uintptr_t>(s.data());
}

/// True when the two spans share at least one byte.
template <class U, class V>
bool overlap(std::span<U> a, std::span<V> b) noexcept {
  if (a.empty() || b.empty()) return false;
  const std::uintptr_t a0 = address_of(a), b0 = address_of(b);
  return a0 < b0 + b.size_bytes() && b0 < a0 + a.size_bytes();
}

/// True when the two spans are the very same bytes.
template <class U, class V>
bool same_memory(std::span<U> a, std::span<V> b) noexcept {
  return address_of(a) == address_of(b) && a.size_bytes() == b.size_bytes();
}

inline void check_features(const char* fn, std::size_t features) {
  if (features == 0) fail(std::string(fn) + ": features = 0; a row needs at least one feature");
}

inline void check_eps(const char* fn, double eps) {
  if (!(eps >= 0) || !std::isfinite(eps)) {
    // The shortest form that reads back as eps: std::to_string's six decimals showed -1e-9 as
    // "-0.000000".
    char text[32];
    const std::to_chars_result end = std::to_chars(text, text + sizeof text, eps);
    fail(std::string(fn) + ": eps = " + std::string(text, end.ptr) + " must be finite and >= 0");
  }
}

/// The number of rows in `size` values; fails unless size is a multiple of features.
inline std::size_t check_rows(const char* fn, const char* name, std::size_t size, std::size_t features) {
  if (size % features != 0) {
    fail(std::string(fn) + ": " + show((std::string(name) + ".size()").c_str(), size) +
         " is not a multiple of " + show("features", features));
  }
  return size / features;
}

inline void check_same_size(const char* fn, const char* name, std::size_t size, const char* ref_name,
                            std::size_t ref_size) {
  if (size != ref_size) {
    fail(std::string(fn) + ": " + show((std::string(name) + ".size()").c_str(), size) + " differs from " +
         show((std::string(ref_name) + ".size()").c_str(), ref_size));
  }
}

/// Per-row statistics (mean, rstd) need one value per row; extra values are left alone.
inline void check_per_row(const char* fn, const char* name, std::size_t size, std::size_t rows) {
  if (size < rows) {
    fail(std::string(fn) + ": " + show((std::string(name) + ".size()").c_str(), size) + " is less than " +
         show("rows", rows));
  }
}

/// An output may be the very same memory as an input (in place) but must not partly overlap it.
template <class U, class V>
void check_in_place_or_disjoint(const char* fn, const char* out_name, std::span<U> out, const char* in_name,
                                std::span<V> in) {
  if (overlap(out, in) && !same_memory(out, in)) {
    fail(std::string(fn) + ": " + out_name + " (" + std::to_string(out.size()) + " values) partly overlaps " +
         in_name + " (" + std::to_string(in.size()) +
         " values); it may only be the very same memory (in place) or separate");
  }
}

template <class U, class V>
void check_disjoint(const char* fn, const char* a_name, std::span<U> a, const char* b_name, std::span<V> b) {
  if (overlap(a, b)) {
    fail(std::string(fn) + ": " + a_name + " (" + std::to_string(a.size()) + " values) overlaps " + b_name +
         " (" + std::to_string(b.size()) + " values)");
  }
}

/// The arrays a functor owns: γ, β and the gradients (empty where the norm has none). No call
/// may write into any of them through an argument (forward() is const, and backward() would
/// wreck the γ it reads or the sums it adds to), and backward() must not read an argument that
/// its own gradient sums overwrite as it goes.
template <class A>
struct OwnArrays {
  std::span<const A> gamma, beta, grad_gamma, grad_beta;

  template <class U>
  void check_output(const char* fn, const char* name, std::span<U> out) const {
    check_disjoint(fn, name, out, "gamma", gamma);
    check_disjoint(fn, name, out, "beta", beta);
    check_backward_input(fn, name, out);
  }
  template <class U>
  void check_backward_input(const char* fn, const char* name, std::span<U> in) const {
    check_disjoint(fn, name, in, "grad_gamma", grad_gamma);
    check_disjoint(fn, name, in, "grad_beta", grad_beta);
  }
};

}  // namespace normkit::detail
