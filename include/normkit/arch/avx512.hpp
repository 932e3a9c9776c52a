// The vector operations for AVX-512 F/BW/VL/DQ: 16 floats or 8 doubles per register, with
// masked loads and stores for the tails. See arch/scalar.hpp for the list every arch/ file
// provides. Included by detail/dispatch.hpp inside the AVX-512 target region only.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "../types.hpp"

namespace normkit::detail::avx512 {

template <class A>
struct Simd;

template <>
struct Simd<float> {
  using vec = __m512;
  static constexpr std::size_t lanes = 16;
  static constexpr std::size_t registers = 32;

  static __mmask16 mask(std::size_t n) { return static_cast<__mmask16>((1u << n) - 1); }

  static vec zero() { return _mm512_setzero_ps(); }
  static vec set(float a) { return _mm512_set1_ps(a); }

  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static vec load(const bfloat16* p) { return widen_bfloat16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static vec load(const float16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

  static vec load_n(const float* p, std::size_t n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static vec load_n(const bfloat16* p, std::size_t n) { return widen_bfloat16(_mm256_maskz_loadu_epi16(mask(n), p)); }
  static vec load_n(const float16* p, std::size_t n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(n), p)); }

  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static void store(bfloat16* p, vec v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bfloat16(v)); }
  static void store(float16* p, vec v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_float16(v)); }

  static void store_n(float* p, vec v, std::size_t n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static void store_n(bfloat16* p, vec v, std::size_t n) { _mm256_mask_storeu_epi16(p, mask(n), to_bfloat16(v)); }
  static void store_n(float16* p, vec v, std::size_t n) { _mm256_mask_storeu_epi16(p, mask(n), to_float16(v)); }

  static void stream(float* p, vec v) { _mm512_stream_ps(p, v); }
  static void stream(bfloat16* p, vec v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), to_bfloat16(v)); }
  static void stream(float16* p, vec v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), to_float16(v)); }
  static void stream_fence() { _mm_sfence(); }

  static vec keep_n(vec v, std::size_t n) { return _mm512_maskz_mov_ps(mask(n), v); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec mul_add(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec abs(vec v) { return _mm512_abs_ps(v); }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  // Stays in 512-bit registers: GCC 12's 512→256-bit casts trip -Wuninitialized in its headers.
  static float sum(vec v) {
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_cvtss_f32(v);
  }
  // Each round halves both the vectors left and the width each still spans: 45 instructions
  // for 16 sums, where sum() takes 8 for one. Reading v in a transposed order puts sum i in
  // lane i.
  static vec sums(const vec* v) {
    vec half[8], quarter[4], eighth[2];
    const auto in = [v](std::size_t s) { return v[(s % 4) * 4 + s / 4]; };
    NORMKIT_UNROLL
    for (std::size_t i = 0; i < 8; ++i) {
      const vec a = in(2 * i), b = in(2 * i + 1);
      half[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    }
    NORMKIT_UNROLL
    for (std::size_t i = 0; i < 4; ++i) {
      const vec a = half[2 * i], b = half[2 * i + 1];
      quarter[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd));
    }
    NORMKIT_UNROLL
    for (std::size_t i = 0; i < 2; ++i) {
      const vec a = quarter[2 * i], b = quarter[2 * i + 1];
      eighth[i] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(eighth[0], eighth[1], 0x44), _mm512_shuffle_ps(eighth[0], eighth[1], 0xee));
  }

  /// bfloat16 is the top half of a float: word i moves to word 2i + 1, the low words are zeroed.
  /// One vpermw, where widening then shifting took two operations: bfloat16 in and out, with
  /// AVX512_BF16's rounding, LayerNorm forward 4096×768 15.2 → 16.5 GiB/s, RMSNorm 22.6 → 24.2
  /// (Zen 4, one thread). Not measured on Intel, where vpermw is two µops on Skylake-X.
  static vec widen_bfloat16(__m256i halves) {
    const __m512i to_odd_words = _mm512_set_epi32(15 << 16, 14 << 16, 13 << 16, 12 << 16, 11 << 16, 10 << 16, 9 << 16,
                                                  8 << 16, 7 << 16, 6 << 16, 5 << 16, 4 << 16, 3 << 16, 2 << 16, 1 << 16, 0);
    return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xaaaaaaaau, to_odd_words, _mm512_castsi256_si512(halves)));
  }
  /// Round to nearest even, as bfloat16(float) does; NaNs keep their top half, made quiet.
  static __m256i to_bfloat16(vec v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i top = _mm512_srli_epi32(bits, 16);
    const __m512i lsb = _mm512_and_si512(top, _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __m512i quiet = _mm512_or_si512(top, _mm512_set1_epi32(0x40));
    const __m512i halves = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, quiet);
    return _mm512_cvtepi32_epi16(halves);
  }
  // The masked form: without optimization GCC 12 expands _mm512_cvtps_ph to a macro passing -1
  // as the mask, which -Wsign-conversion flags here.
  static __m256i to_float16(vec v) {
    return _mm512_maskz_cvtps_ph(static_cast<__mmask16>(0xffff), v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
};

template <>
struct Simd<double> {
  using vec = __m512d;
  static constexpr std::size_t lanes = 8;
  static constexpr std::size_t registers = 32;

  static __mmask8 mask(std::size_t n) { return static_cast<__mmask8>((1u << n) - 1); }

  static vec zero() { return _mm512_setzero_pd(); }
  static vec set(double a) { return _mm512_set1_pd(a); }
  static vec load(const double* p) { return _mm512_loadu_pd(p); }
  static vec load(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
  static vec load_n(const double* p, std::size_t n) { return _mm512_maskz_loadu_pd(mask(n), p); }
  static void store(double* p, vec v) { _mm512_storeu_pd(p, v); }
  static void store_n(double* p, vec v, std::size_t n) { _mm512_mask_storeu_pd(p, mask(n), v); }
  static void stream(double* p, vec v) { _mm512_stream_pd(p, v); }
  static void stream_fence() { _mm_sfence(); }
  static vec keep_n(vec v, std::size_t n) { return _mm512_maskz_mov_pd(mask(n), v); }
  static vec add(vec a, vec b) { return _mm512_add_pd(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_pd(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_pd(a, b); }
  static vec mul_add(vec a, vec b, vec c) { return _mm512_fmadd_pd(a, b, c); }
  static vec abs(vec v) { return _mm512_abs_pd(v); }
  static vec max(vec a, vec b) { return _mm512_max_pd(a, b); }
  static vec div(vec a, vec b) { return _mm512_div_pd(a, b); }
  static vec sqrt(vec v) { return _mm512_sqrt_pd(v); }
  static double sum(vec v) {
    v = _mm512_add_pd(v, _mm512_shuffle_f64x2(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm512_add_pd(v, _mm512_shuffle_f64x2(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_add_pd(v, _mm512_permute_pd(v, 0x55));
    return _mm512_cvtsd_f64(v);
  }
  // As Simd<float>::sums, with three rounds for 8 sums.
  static vec sums(const vec* v) {
    vec half[4], quarter[2];
    const auto in = [v](std::size_t s) { return v[(s % 4) * 2 + s / 4]; };
    NORMKIT_UNROLL
    for (std::size_t i = 0; i < 4; ++i) {
      const vec a = in(2 * i), b = in(2 * i + 1);
      half[i] = _mm512_add_pd(_mm512_shuffle_f64x2(a, b, 0x44), _mm512_shuffle_f64x2(a, b, 0xee));
    }
    NORMKIT_UNROLL
    for (std::size_t i = 0; i < 2; ++i) {
      const vec a = half[2 * i], b = half[2 * i + 1];
      quarter[i] = _mm512_add_pd(_mm512_shuffle_f64x2(a, b, 0x88), _mm512_shuffle_f64x2(a, b, 0xdd));
    }
    return _mm512_add_pd(_mm512_unpacklo_pd(quarter[0], quarter[1]), _mm512_unpackhi_pd(quarter[0], quarter[1]));
  }
};

}  // namespace normkit::detail::avx512
