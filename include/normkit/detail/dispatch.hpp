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
#include <type_traits>

#include "../isa.hpp"
#include "../types.hpp"
#include "moments.hpp"
#include "rows.hpp"
#include "targets.hpp"

#if NORMKIT_HAVE_AVX2 || NORMKIT_HAVE_AVX512
#include <immintrin.h>
#endif
#if NORMKIT_HAVE_NEON
#include <arm_neon.h>
#endif

#include "../arch/scalar.hpp"
#define NORMKIT_KERNEL_NS scalar
#include "kernels-inl.hpp"
#undef NORMKIT_KERNEL_NS

#if NORMKIT_HAVE_AVX2
NORMKIT_TARGET_PUSH("avx2,fma,f16c")
#include "../arch/avx2.hpp"
#define NORMKIT_KERNEL_NS avx2
#include "kernels-inl.hpp"
#undef NORMKIT_KERNEL_NS
NORMKIT_TARGET_POP()
#endif

#if NORMKIT_HAVE_AVX512
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized flags
// wherever they are inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
NORMKIT_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include "../arch/avx512.hpp"
#define NORMKIT_KERNEL_NS avx512
#include "kernels-inl.hpp"
#undef NORMKIT_KERNEL_NS
NORMKIT_TARGET_POP()
#if NORMKIT_HAVE_AVX512_BF16
NORMKIT_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")
#include "../arch/avx512_bf16.hpp"
#define NORMKIT_KERNEL_NS avx512_bf16
#include "kernels-inl.hpp"
#undef NORMKIT_KERNEL_NS
NORMKIT_TARGET_POP()
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#if NORMKIT_HAVE_NEON
#include "../arch/neon.hpp"
#define NORMKIT_KERNEL_NS neon
#include "kernels-inl.hpp"
#undef NORMKIT_KERNEL_NS
#endif

namespace normkit::detail {

/// Calls fn(K{}) where K is the Kernels type of the active instruction set for rows of T, e.g.
/// with_active_kernels<T>([&](auto k) { decltype(k)::layer_norm_forward(rows, 0, n); }).
template <class T, class Fn>
decltype(auto) with_active_kernels(Fn&& fn) {
  switch (active_isa()) {
#if NORMKIT_HAVE_AVX512
    case isa::avx512:
#if NORMKIT_HAVE_AVX512_BF16
      // Only bfloat16 runs differently with AVX512_BF16; other types would compile the same
      // kernels twice.
      if constexpr (std::is_same_v<T, bfloat16>) {
        if (avx512_bf16_rounding()) return fn(avx512_bf16::Kernels{});
      }
#endif
      return fn(avx512::Kernels{});
#endif
#if NORMKIT_HAVE_AVX2
    case isa::avx2: return fn(avx2::Kernels{});
#endif
#if NORMKIT_HAVE_NEON
    case isa::neon: return fn(neon::Kernels{});
#endif
    default: return fn(scalar::Kernels{});
  }
}

}  // namespace normkit::detail
