// The vector operations for the scalar path: a "vector" of one lane, in plain C++, so that the
// kernels written for SIMD also run (and are tested) everywhere.
//
// Every arch/ file provides the same operations as Simd<A>, for A = float and double:
//   vec, lanes                     the register type and how many A it holds
//   registers                      how many vector registers the ISA has (16 taken for scalar)
//   zero(), set(a)                 all lanes 0 / a
//   load(p), load_n(p, n)          lanes from p (T = A, or a 16-bit type widened to float);
//                                  load_n reads only p[0..n) and zeroes the other lanes
//   store(p, v), store_n(p, v, n)  to p (rounded once to T); store_n writes only p[0..n)
//   stream(p, v), stream_fence()   a store that bypasses the cache, to p aligned for a whole
//                                  vector of T; the fence orders all of them before later stores
//   keep_n(v, n)                   lanes [0, n) of v, the others 0
//   add, sub, mul, mul_add(a,b,c)  lane-wise; mul_add is a·b + c, fused where the ISA can
//   abs(v), max(a, b)              lane-wise |v| and the larger of a and b (either one where
//                                  one is NaN)
//   sum(v)                         the horizontal sum of the lanes
//   sums(v)                        from `lanes` vectors v[0..lanes), a vector whose lane i is
//                                  the horizontal sum of v[i]: many rows' sums at once
// with 0 < n < lanes wherever a count is taken. Simd<double> also provides
//   load(p), p a float*            lanes of floats widened to double
//   div(a, b), sqrt(v)             lane-wise, correctly rounded
#pragma once

#include <cmath>
#include <cstddef>

#include "../types.hpp"

namespace normkit::detail::scalar {

template <class A>
struct Simd {
  using vec = A;
  static constexpr std::size_t lanes = 1;
  static constexpr std::size_t registers = 16;

  static vec zero() { return A(0); }
  static vec set(A a) { return a; }
  template <class T>
  static vec load(const T* p) { return static_cast<A>(*p); }
  // With one lane there is no partial vector; these exist so kernels compile unchanged.
  template <class T>
  static vec load_n(const T* p, std::size_t) { return load(p); }
  template <class T>
  static void store(T* p, vec v) { *p = static_cast<T>(v); }
  template <class T>
  static void store_n(T* p, vec v, std::size_t) { store(p, v); }
  template <class T>
  static void stream(T* p, vec v) { store(p, v); }
  static void stream_fence() {}
  static vec keep_n(vec v, std::size_t) { return v; }
  static vec add(vec a, vec b) { return a + b; }
  static vec sub(vec a, vec b) { return a - b; }
  static vec mul(vec a, vec b) { return a * b; }
  // Fused where the machine has an FMA, as every SIMD mul_add is. Left as a·b + c there, it was
  // the compiler's to fuse (GCC's default -ffp-contract=fast), and GCC chose by the code around
  // it: on AArch64 a short row's x̂ = t·r − correction was one fmadd in a group of LayerNorm
  // rows but an fmul and an fsub row by row, where t·r had merged with lane_sums' x̃ = t·r, so
  // the row's dx depended on its batch. Without hardware FMA, std::fma is a slow library call,
  // and no kernel needs the single rounding (its products by powers of two are exact).
  static vec mul_add(vec a, vec b, vec c) {
#if defined(__FP_FAST_FMA) && defined(__FP_FAST_FMAF)
    return std::fma(a, b, c);
#else
    return a * b + c;
#endif
  }
  static vec abs(vec v) { return std::fabs(v); }
  static vec max(vec a, vec b) { return a > b ? a : b; }
  static A sum(vec v) { return v; }
  static vec sums(const vec* v) { return v[0]; }
  static vec div(vec a, vec b) { return a / b; }
  static vec sqrt(vec v) { return std::sqrt(v); }
};

}  // namespace normkit::detail::scalar
