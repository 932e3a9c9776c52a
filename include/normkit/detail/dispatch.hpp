// Run-time choice among the per-instruction-set kernels: each set's vector operations with the
// kernels compiled over them, and with_active_kernels(), which hands the active set's kernels
// to a caller.
#pragma once

// Every standard header the kernels use, included before any target region (see
// kernels-inl.hpp for why).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../isa.hpp"
#include "../types.hpp"
#include "moments.hpp"
#include "rows.hpp"
#include "targets.hpp"

#include "../arch/scalar.hpp"
#define NORMKIT_KERNEL_NS scalar
#include "kernels-inl.hpp"
#undef NORMKIT_KERNEL_NS

namespace normkit::detail {

/// Calls fn(K{}) where K is the Kernels type of the active instruction set, e.g.
/// with_active_kernels([&](auto k) { decltype(k)::layer_norm_forward(rows, 0, n); }).
template <class Fn>
decltype(auto) with_active_kernels(Fn&& fn) {
  switch (active_isa()) {
    case isa::scalar:
    default: break;
  }
  return fn(scalar::Kernels{});
}

}  // namespace normkit::detail
