// The vector operations for AArch64 Advanced SIMD (NEON): 4 floats or 2 doubles per register.
// See arch/scalar.hpp for the list every arch/ file provides. Every AArch64 CPU has them, so
// no target region is needed.
#pragma once

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../types.hpp"

namespace normkit::detail::neon {

// Lane masks for partial vectors: the first n 32-bit lanes start at kLaneMask + 4 - n.
alignas(16) inline constexpr std::uint32_t kLaneMask[8] = {~0u, ~0u, ~0u, ~0u, 0, 0, 0, 0};
alignas(16) inline constexpr std::uint64_t kLaneMask64[4] = {~0ull, ~0ull, 0, 0};

template <class A>
struct Simd;

template <>
struct Simd<float> {
  using vec = float32x4_t;
  static constexpr std::size_t lanes = 4;
  static constexpr std::size_t registers = 32;

  static vec zero() { return vdupq_n_f32(0.0f); }
  static vec set(float a) { return vdupq_n_f32(a); }

  static vec load(const float* p) { return vld1q_f32(p); }
  static vec load(const bfloat16* p) {  // bfloat16 is the top half of a float
    return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p))), 16));
  }
  static vec load(const float16* p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p))));
  }
  // NEON has no masked load: stage the tail in a zeroed buffer.
  template <class T>
  static vec load_n(const T* p, std::size_t n) {
    T buffer[lanes] = {};
    std::memcpy(buffer, p, n * sizeof(T));
    return load(buffer);
  }

  static void store(float* p, vec v) { vst1q_f32(p, v); }
  static void store(bfloat16* p, vec v) { vst1_u16(reinterpret_cast<std::uint16_t*>(p), to_bfloat16(v)); }
  static void store(float16* p, vec v) {  // FPCR's default rounding: to nearest even
    vst1_u16(reinterpret_cast<std::uint16_t*>(p), vreinterpret_u16_f16(vcvt_f16_f32(v)));
  }
  template <class T>
  static void store_n(T* p, vec v, std::size_t n) {
    T buffer[lanes];
    store(buffer, v);
    std::memcpy(p, buffer, n * sizeof(T));
  }

  // AArch64 has no vector non-temporal store worth the name (STNP is a hint on pairs of
  // registers); ordinary stores.
  template <class T>
  static void stream(T* p, vec v) { store(p, v); }
  static void stream_fence() {}
  static vec keep_n(vec v, std::size_t n) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), vld1q_u32(kLaneMask + 4 - n)));
  }
  static vec add(vec a, vec b) { return vaddq_f32(a, b); }
  static vec sub(vec a, vec b) { return vsubq_f32(a, b); }
  static vec mul(vec a, vec b) { return vmulq_f32(a, b); }
  static vec mul_add(vec a, vec b, vec c) { return vfmaq_f32(c, a, b); }
  static vec abs(vec v) { return vabsq_f32(v); }
  static vec max(vec a, vec b) { return vmaxq_f32(a, b); }
  static float sum(vec v) { return vaddvq_f32(v); }
  static vec sums(const vec* v) { return vpaddq_f32(vpaddq_f32(v[0], v[1]), vpaddq_f32(v[2], v[3])); }

  /// Round to nearest even, as bfloat16(float) does; NaNs keep their top half, made quiet.
  static uint16x4_t to_bfloat16(vec v) {
    const uint32x4_t bits = vreinterpretq_u32_f32(v);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(1));
    const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(vaddq_u32(bits, vdupq_n_u32(0x7fff)), lsb), 16);
    const uint32x4_t quiet = vorrq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(0x40));
    const uint32x4_t is_number = vceqq_f32(v, v);
    return vmovn_u32(vbslq_u32(is_number, rounded, quiet));
  }
};

template <>
struct Simd<double> {
  using vec = float64x2_t;
  static constexpr std::size_t lanes = 2;
  static constexpr std::size_t registers = 32;

  static vec zero() { return vdupq_n_f64(0.0); }
  static vec set(double a) { return vdupq_n_f64(a); }
  static vec load(const double* p) { return vld1q_f64(p); }
  static vec load(const float* p) { return vcvt_f64_f32(vld1_f32(p)); }
  static vec load_n(const double* p, std::size_t) { return vsetq_lane_f64(*p, zero(), 0); }  // n is 1
  static void store(double* p, vec v) { vst1q_f64(p, v); }
  static void store_n(double* p, vec v, std::size_t) { *p = vgetq_lane_f64(v, 0); }
  static void stream(double* p, vec v) { store(p, v); }
  static void stream_fence() {}
  static vec keep_n(vec v, std::size_t n) {
    return vreinterpretq_f64_u64(vandq_u64(vreinterpretq_u64_f64(v), vld1q_u64(kLaneMask64 + 2 - n)));
  }
  static vec add(vec a, vec b) { return vaddq_f64(a, b); }
  static vec sub(vec a, vec b) { return vsubq_f64(a, b); }
  static vec mul(vec a, vec b) { return vmulq_f64(a, b); }
  static vec mul_add(vec a, vec b, vec c) { return vfmaq_f64(c, a, b); }
  static vec abs(vec v) { return vabsq_f64(v); }
  static vec max(vec a, vec b) { return vmaxq_f64(a, b); }
  static vec div(vec a, vec b) { return vdivq_f64(a, b); }
  static vec sqrt(vec v) { return vsqrtq_f64(v); }
  static double sum(vec v) { return vaddvq_f64(v); }
  static vec sums(const vec* v) { return vpaddq_f64(v[0], v[1]); }
};

}  // namespace normkit::detail::neon
