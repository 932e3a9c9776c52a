// Element types: the 16-bit storage formats bfloat16 and float16, and accum_t, the type each
// element type is computed in.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace normkit {

/// bfloat16: the upper half of an IEEE binary32 (8-bit exponent, 7-bit mantissa). Storage only:
/// normkit widens it to float, computes, and rounds once on store. `bits` is the raw pattern.
struct bfloat16 {
  std::uint16_t bits;

  bfloat16() = default;
  /// Rounds to nearest, ties to even. NaN stays a quiet NaN; ±Inf and signed zero are kept.
  constexpr explicit bfloat16(float f) noexcept : bits(round(f)) {}
  /// Exact.
  constexpr explicit operator float() const noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }
  static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 r{};
    r.bits = b;
    return r;
  }

 private:
  static constexpr std::uint16_t round(float f) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign and payload top, force quiet
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    }
    // Adding 0x7fff plus the lowest kept bit rounds to nearest even; a carry out of the
    // mantissa correctly bumps the exponent, up to Inf.
    const std::uint32_t lsb = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
  }
};

/// float16: IEEE binary16 (5-bit exponent, 10-bit mantissa, max 65504). Storage only, like
/// bfloat16. `bits` is the raw pattern.
struct float16 {
  std::uint16_t bits;

  float16() = default;
  /// Rounds to nearest, ties to even; overflow gives ±Inf, underflow gives subnormals or ±0.
  /// NaN stays a quiet NaN; ±Inf and signed zero are kept.
  constexpr explicit float16(float f) noexcept : bits(round(f)) {}
  /// Exact (every binary16 value is a binary32 value).
  constexpr explicit operator float() const noexcept { return widen(bits); }
  static constexpr float16 from_bits(std::uint16_t b) noexcept {
    float16 r{};
    r.bits = b;
    return r;
  }

 private:
  static constexpr std::uint16_t round(float f) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {  // NaN: quiet bit set, top of the payload kept
      return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
    }
    if (a >= 0x38800000u) {  // |f| >= 2^-14: a normal binary16, or overflow to Inf
      // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
      const std::uint32_t lsb = (a >> 13) & 1u;
      const std::uint32_t h = (a + 0x0fffu + lsb - 0x38000000u) >> 13;
      return static_cast<std::uint16_t>(sign | (h >= 0x7c00u ? 0x7c00u : h));
    }
    // Subnormal binary16 (units of 2^-24) or zero. Adding 0.5f puts the float's last mantissa
    // bit at 2^-24, so the hardware addition itself rounds to nearest even; a result of 0x400
    // is exactly the smallest normal.
    const float shifted = std::bit_cast<float>(a) + 0.5f;
    const std::uint32_t h = std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(0.5f);
    return static_cast<std::uint16_t>(sign | h);
  }

  static constexpr float widen(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    const std::uint32_t mantissa = h & 0x03ffu;
    if (exponent == 0x1fu) {  // Inf or NaN
      return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    }
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
      const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
      return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
    }
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
};

static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);
static_assert(sizeof(float16) == 2 && std::is_trivially_copyable_v<float16>);

/// The type statistics, parameters and gradients are kept in: double for double, float for
/// float, bfloat16 and float16.
template <class T>
using accum_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

namespace detail {
/// True for the element types the functors accept.
template <class T>
inline constexpr bool is_element_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                     std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;
}  // namespace detail

}  // namespace normkit
