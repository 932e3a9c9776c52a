// The vector operations for AVX-512 with AVX512_BF16: those of arch/avx512.hpp, except that
// floats are rounded to bfloat16 by one instruction (vcvtneps2bf16) instead of ten. Included
// by detail/dispatch.hpp inside the AVX512_BF16 target region only; isa::avx512 runs bfloat16
// rows with it where avx512_bf16_rounding() says so (see isa.hpp).
//
// The software rounding set the pace of bfloat16 rows. With the instruction alone, one thread
// on Zen 4 (standalone harness, bfloat16 in and out): LayerNorm forward 4096×768 12.9 → 16.7
// GiB/s, 1024×4096 14.7 → 18.1, 4096×64 11.1 → 14.0, RMSNorm forward 4096×768 18.1 → 26.1.
// The check for subnormals below takes back about a third of that (15.2, 17.5, 12.6, 22.6),
// whether it tests the input's class or the exponent bits, branches to the software rounding
// or blends it in, or looks for zeros in the output instead.
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "../types.hpp"
#include "avx512.hpp"

namespace normkit::detail::avx512_bf16 {

template <class A>
struct Simd : avx512::Simd<A> {};

template <>
struct Simd<float> : avx512::Simd<float> {
  using Base = avx512::Simd<float>;
  using Base::store;
  using Base::store_n;
  using Base::stream;

  static void store(bfloat16* p, vec v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bfloat16(v)); }
  static void store_n(bfloat16* p, vec v, std::size_t n) { _mm256_mask_storeu_epi16(p, mask(n), to_bfloat16(v)); }
  static void stream(bfloat16* p, vec v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), to_bfloat16(v)); }

  /// Round to nearest even, as bfloat16(float) does, NaNs made quiet as there. The instruction
  /// flushes subnormal inputs to zero, where bfloat16(float) rounds them like any other value,
  /// so a vector holding one takes the software rounding.
  static __m256i to_bfloat16(vec v) {
    if (_mm512_fpclass_ps_mask(v, 0x20) != 0) return Base::to_bfloat16(v);  // 0x20: subnormal
    return (__m256i)_mm512_cvtneps_pbh(v);  // the same 256 bits
  }
};

}  // namespace normkit::detail::avx512_bf16
