// The vector operations for AVX2 with FMA and F16C: 8 floats or 4 doubles per register.
// See arch/scalar.hpp for the list every arch/ file provides. Included by detail/dispatch.hpp
// inside the "avx2,fma,f16c" target region only.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../types.hpp"

namespace normkit::detail::avx2 {

// Lane masks for partial vectors: 8 ones then 8 zeros; the mask for the first n lanes of a
// 32-bit vector starts at kLaneMask + 8 - n (for 64-bit lanes, read pairs: see Simd<double>).
alignas(64) inline constexpr std::int32_t kLaneMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

template <class A>
struct Simd;

template <>
struct Simd<float> {
  using vec = __m256;
  static constexpr std::size_t lanes = 8;
  static constexpr std::size_t registers = 16;

  static __m256i mask(std::size_t n) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - n));
  }

  static vec zero() { return _mm256_setzero_ps(); }
  static vec set(float a) { return _mm256_set1_ps(a); }

  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static vec load(const bfloat16* p) {  // bfloat16 is the top half of a float
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static vec load(const float16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

  static vec load_n(const float* p, std::size_t n) { return _mm256_maskload_ps(p, mask(n)); }
  // No masked 16-bit load in AVX2: stage the tail in a zeroed buffer.
  template <class T>
  static vec load_n(const T* p, std::size_t n) {
    T buffer[lanes] = {};
    std::memcpy(buffer, p, n * sizeof(T));
    return load(buffer);
  }

  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static void store(bfloat16* p, vec v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), to_bfloat16(v)); }
  static void store(float16* p, vec v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }

  static void store_n(float* p, vec v, std::size_t n) { _mm256_maskstore_ps(p, mask(n), v); }
  template <class T>
  static void store_n(T* p, vec v, std::size_t n) {
    T buffer[lanes];
    store(buffer, v);
    std::memcpy(p, buffer, n * sizeof(T));
  }

  static void stream(float* p, vec v) { _mm256_stream_ps(p, v); }
  static void stream(bfloat16* p, vec v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), to_bfloat16(v)); }
  static void stream(float16* p, vec v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void stream_fence() { _mm_sfence(); }

  static vec keep_n(vec v, std::size_t n) { return _mm256_and_ps(v, _mm256_castsi256_ps(mask(n))); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec mul_add(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec abs(vec v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  // Adds the lanes in the order sums() does, (0 + 1) + (2 + 3) after the halves, so that a row
  // summed alone and the same row summed among others agree bit for bit.
  static float sum(vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehdup_ps(s));
    s = _mm_add_ss(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(s);
  }
  // Halves of pairs, then two rounds of hadd: 15 instructions for 8 sums, where sum() takes 6
  // for one. Reading v in an interleaved order puts sum i in lane i.
  static vec sums(const vec* v) {
    vec half[4];
    NORMKIT_UNROLL
    for (std::size_t i = 0; i < 4; ++i) {
      const vec a = v[i], b = v[i + 4];
      half[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    return _mm256_hadd_ps(_mm256_hadd_ps(half[0], half[1]), _mm256_hadd_ps(half[2], half[3]));
  }

  /// Round to nearest even, as bfloat16(float) does: add 0x7fff plus the lowest kept bit, keep
  /// the top half; NaNs instead keep their top half with the quiet bit set.
  static __m128i to_bfloat16(vec v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i top = _mm256_srli_epi32(bits, 16);
    const __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i quiet = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i halves = _mm256_blendv_epi8(rounded, quiet, nan);
    // Every value fits in 16 bits, so unsigned saturation packs exactly.
    return _mm_packus_epi32(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
  }
};

template <>
struct Simd<double> {
  using vec = __m256d;
  static constexpr std::size_t lanes = 4;
  static constexpr std::size_t registers = 16;

  static __m256i mask(std::size_t n) {  // 64-bit lanes: each is two 32-bit mask entries
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - 2 * n));
  }

  static vec zero() { return _mm256_setzero_pd(); }
  static vec set(double a) { return _mm256_set1_pd(a); }
  static vec load(const double* p) { return _mm256_loadu_pd(p); }
  static vec load(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
  static vec load_n(const double* p, std::size_t n) { return _mm256_maskload_pd(p, mask(n)); }
  static void store(double* p, vec v) { _mm256_storeu_pd(p, v); }
  static void store_n(double* p, vec v, std::size_t n) { _mm256_maskstore_pd(p, mask(n), v); }
  static void stream(double* p, vec v) { _mm256_stream_pd(p, v); }
  static void stream_fence() { _mm_sfence(); }
  static vec keep_n(vec v, std::size_t n) { return _mm256_and_pd(v, _mm256_castsi256_pd(mask(n))); }
  static vec add(vec a, vec b) { return _mm256_add_pd(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_pd(a, b); }
  static vec mul(vec a, vec b) { return _mm256_mul_pd(a, b); }
  static vec mul_add(vec a, vec b, vec c) { return _mm256_fmadd_pd(a, b, c); }
  static vec abs(vec v) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), v); }
  static vec max(vec a, vec b) { return _mm256_max_pd(a, b); }
  static vec div(vec a, vec b) { return _mm256_div_pd(a, b); }
  static vec sqrt(vec v) { return _mm256_sqrt_pd(v); }
  // As sums() adds: (0 + 1) + (2 + 3).
  static double sum(vec v) {
    const __m256d pairs = _mm256_hadd_pd(v, v);
    return _mm_cvtsd_f64(_mm_add_sd(_mm256_castpd256_pd128(pairs), _mm256_extractf128_pd(pairs, 1)));
  }
  static vec sums(const vec* v) {
    const vec a = _mm256_hadd_pd(v[0], v[1]), b = _mm256_hadd_pd(v[2], v[3]);
    return _mm256_add_pd(_mm256_permute2f128_pd(a, b, 0x20), _mm256_permute2f128_pd(a, b, 0x31));
  }
};

}  // namespace normkit::detail::avx2
