// bfloat16/float16: round to nearest even, exact widening, every bit pattern; and accum_t.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "support.hpp"

using namespace nktest;

namespace {

struct Case {
  float from;
  std::uint16_t bits;
};

float from_bits32(std::uint32_t bits) { return std::bit_cast<float>(bits); }

/// The 16-bit format's parameters: which bit is the quiet bit, which pattern is +Inf.
template <class H>
struct Format;
template <>
struct Format<bfloat16> {
  static constexpr std::uint16_t inf = 0x7f80, quiet = 0x0040, max = 0x7f7f;
};
template <>
struct Format<float16> {
  static constexpr std::uint16_t inf = 0x7c00, quiet = 0x0200, max = 0x7bff;
};

template <class H>
bool is_nan_bits(std::uint16_t bits) {
  return (bits & Format<H>::inf) == Format<H>::inf && (bits & 0x7fff) != Format<H>::inf;
}

template <class H>
bool is_quiet_nan_bits(std::uint16_t bits) {
  return is_nan_bits<H>(bits) && (bits & Format<H>::quiet) != 0;
}

/// Independent of the library: the value of a binary16 pattern, from its fields.
double float16_value(std::uint16_t bits) {
  const double sign = (bits & 0x8000) != 0 ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

template <class H>
void check_table(std::initializer_list<Case> cases) {
  for (const Case& c : cases) {
    INFO("from " << c.from << " (0x" << std::hex << std::bit_cast<std::uint32_t>(c.from) << "), want 0x" << c.bits);
    CHECK(H(c.from).bits == c.bits);
  }
}

template <class H>
void check_nans_stay_quiet_nans() {
  for (std::uint32_t nan :
       {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu, 0x7f802000u}) {
    INFO("float NaN 0x" << std::hex << nan);
    const std::uint16_t bits = H(from_bits32(nan)).bits;
    CAPTURE(bits);
    CHECK(is_quiet_nan_bits<H>(bits));
    CHECK(std::isnan(static_cast<float>(H(from_bits32(nan)))));
  }
}

/// For every finite non-negative pattern b: the value of b rounds to b, and around the midpoint
/// m between b and b + 1 (the next pattern, +Inf after the largest finite value), the float just
/// below m rounds to b, the float just above m to b + 1, and m itself to whichever of b, b + 1
/// is even. Negative values round to the same magnitude. The midpoint of two 16-bit values has
/// one more significant bit than they do, so it is an exact float.
template <class H>
void check_rounding_around_every_pattern() {
  for (std::uint32_t b = 0; b <= Format<H>::max; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const double lo = to_double(H::from_bits(bits));
    const double hi = bits < Format<H>::max ? to_double(H::from_bits(static_cast<std::uint16_t>(bits + 1)))
                                            : 2 * lo - to_double(H::from_bits(static_cast<std::uint16_t>(bits - 1)));
    const auto mid = static_cast<float>((lo + hi) / 2);
    const auto even = static_cast<std::uint16_t>((bits & 1) == 0 ? bits : bits + 1);
    const float below = std::nextafter(mid, 0.0f), above = std::nextafter(mid, INFINITY);
    const auto up = static_cast<std::uint16_t>(bits + 1);
    const bool ok = static_cast<double>(mid) == (lo + hi) / 2 && H(static_cast<float>(lo)).bits == bits &&
                    H(below).bits == bits && H(mid).bits == even && H(above).bits == up &&
                    H(-below).bits == (bits | 0x8000) && H(-mid).bits == (even | 0x8000) &&
                    H(-above).bits == (up | 0x8000);
    if (!ok) {
      INFO("pattern 0x" << std::hex << b << ": value " << lo << ", midpoint " << mid << " -> 0x" << H(mid).bits
                        << ", below -> 0x" << H(below).bits << ", above -> 0x" << H(above).bits);
      CHECK(ok);
      return;  // one failure says enough; 65536 would drown it
    }
  }
}

/// Every one of the 65536 patterns: widening then narrowing gives it back (a NaN gives a quiet
/// NaN: a signaling one cannot survive as such).
template <class H>
void check_round_trip_of_every_pattern() {
  std::uint32_t failures = 0;
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float wide = static_cast<float>(H::from_bits(bits));
    const std::uint16_t back = H(wide).bits;
    const bool ok = is_nan_bits<H>(bits) ? std::isnan(wide) && is_quiet_nan_bits<H>(back) : back == bits;
    if (!ok && ++failures <= 3) {
      INFO("pattern 0x" << std::hex << b << " widens to " << wide << " and narrows to 0x" << back);
      CHECK(ok);
    }
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("bfloat16 and float16 are 2-byte trivially copyable bit patterns", "[types]") {
  CHECK(sizeof(bfloat16) == 2);
  CHECK(sizeof(float16) == 2);
  CHECK(std::is_trivially_copyable_v<bfloat16>);
  CHECK(std::is_trivially_copyable_v<float16>);
  CHECK(bfloat16::from_bits(0xbeef).bits == 0xbeef);
  CHECK(float16::from_bits(0xbeef).bits == 0xbeef);
  CHECK(std::bit_cast<std::uint16_t>(bfloat16::from_bits(0x1234)) == 0x1234);
}

TEST_CASE("accum_t is double for double and float otherwise", "[types]") {
  CHECK(std::is_same_v<accum_t<double>, double>);
  CHECK(std::is_same_v<accum_t<float>, float>);
  CHECK(std::is_same_v<accum_t<bfloat16>, float>);
  CHECK(std::is_same_v<accum_t<float16>, float>);
  for_each_type([]<class T>() {
    CHECK(std::is_same_v<typename LayerNorm<T>::value_type, T>);
    CHECK(std::is_same_v<typename LayerNorm<T>::accum_type, accum_t<T>>);
    CHECK(std::is_same_v<typename RMSNorm<T>::value_type, T>);
    CHECK(std::is_same_v<typename RMSNorm<T>::accum_type, accum_t<T>>);
  });
}

TEST_CASE("bfloat16 from float rounds to nearest even (hand-checked cases)", "[types]") {
  check_table<bfloat16>({
      {1.0f, 0x3f80},
      {-2.0f, 0xc000},
      {0.1f, 0x3dcd},                     // 0x3dcc'cccd: the dropped half is above a tie
      {from_bits32(0x3f808000), 0x3f80},  // 1 + 2^-8: a tie, to the even 1
      {from_bits32(0x3f818000), 0x3f82},  // a tie, to the even neighbour above
      {from_bits32(0x3f808001), 0x3f81},  // just above a tie
      {from_bits32(0x3f807fff), 0x3f80},  // just below a tie
      {from_bits32(0x3fffffff), 0x4000},  // rounding carries into the exponent
      {from_bits32(0x7f7f0000), 0x7f7f},  // the largest bfloat16, ≈ 3.3895e38
      {from_bits32(0x7f7f7fff), 0x7f7f},
      {from_bits32(0x7f7f8000), 0x7f80},  // a tie above the largest: to even, which is +Inf
      {std::numeric_limits<float>::max(), 0x7f80},
      {-std::numeric_limits<float>::max(), 0xff80},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {INFINITY, 0x7f80},
      {-INFINITY, 0xff80},
      {from_bits32(0x00010000), 0x0001},  // the smallest bfloat16 subnormal, 2^-133
      {from_bits32(0x00000001), 0x0000},  // the smallest float subnormal underflows
      {from_bits32(0x00008000), 0x0000},  // a tie, to the even 0
      {from_bits32(0x00018000), 0x0002},  // a tie, to the even neighbour above
      {from_bits32(0x80000001), 0x8000},  // underflows to -0
  });
  check_nans_stay_quiet_nans<bfloat16>();
}

TEST_CASE("float16 from float rounds to nearest even (hand-checked cases)", "[types]") {
  check_table<float16>({
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.5f, 0x3800},
      {0.1f, 0x2e66},                     // 1.6·2^-4: mantissa 614.4 → 614
      {1.0f + 0x1p-11f, 0x3c00},          // a tie, to the even 1
      {1.0f + 3 * 0x1p-11f, 0x3c02},      // a tie, to the even neighbour above
      {from_bits32(0x3f801001), 0x3c01},  // just above a tie
      {2049.0f, 0x6800},                  // spacing 2 at 2048: a tie, to 2048
      {2051.0f, 0x6802},                  // a tie, to 2052
      {65504.0f, 0x7bff},                 // the largest float16
      {65519.0f, 0x7bff},                 // below the tie with 65536
      {65520.0f, 0x7c00},                 // the tie: to even, which is +Inf
      {1e5f, 0x7c00},
      {-1e5f, 0xfc00},
      {std::numeric_limits<float>::max(), 0x7c00},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {0x1p-24f, 0x0001},  // the smallest subnormal
      {-0x1p-24f, 0x8001},
      {0x1p-25f, 0x0000},                 // a tie, to the even 0
      {from_bits32(0x33000001), 0x0001},  // just above that tie
      {3 * 0x1p-25f, 0x0002},             // 1.5·2^-24: a tie, to 2
      {5 * 0x1p-25f, 0x0002},             // 2.5·2^-24: a tie, to 2
      {1023 * 0x1p-24f, 0x03ff},          // the largest subnormal
      {1023.5f * 0x1p-24f, 0x0400},       // a tie, to the even smallest normal
      {0x1p-14f, 0x0400},                 // the smallest normal
      {0x1p-26f, 0x0000},
      {-0x1p-26f, 0x8000},  // underflows to -0
  });
  check_nans_stay_quiet_nans<float16>();
}

TEST_CASE("widening to float is exact (hand-checked cases)", "[types]") {
  CHECK(static_cast<float>(bfloat16::from_bits(0x3f80)) == 1.0f);
  CHECK(static_cast<float>(bfloat16::from_bits(0xc040)) == -3.0f);
  CHECK(static_cast<float>(bfloat16::from_bits(0x7f7f)) == 0x1.fep127f);
  CHECK(static_cast<float>(bfloat16::from_bits(0x0001)) == 0x1p-133f);
  CHECK(std::signbit(static_cast<float>(bfloat16::from_bits(0x8000))));
  CHECK(static_cast<float>(bfloat16::from_bits(0xff80)) == -INFINITY);
  CHECK(static_cast<float>(float16::from_bits(0x3c00)) == 1.0f);
  CHECK(static_cast<float>(float16::from_bits(0x3555)) == 0.333251953125f);
  CHECK(static_cast<float>(float16::from_bits(0x7bff)) == 65504.0f);
  CHECK(static_cast<float>(float16::from_bits(0x0001)) == 0x1p-24f);
  CHECK(static_cast<float>(float16::from_bits(0x03ff)) == 1023 * 0x1p-24f);
  CHECK(static_cast<float>(float16::from_bits(0x0400)) == 0x1p-14f);
  CHECK(static_cast<float>(float16::from_bits(0x8001)) == -0x1p-24f);
  CHECK(std::signbit(static_cast<float>(float16::from_bits(0x8000))));
  CHECK(static_cast<float>(float16::from_bits(0x7c00)) == INFINITY);
  CHECK(std::isnan(static_cast<float>(float16::from_bits(0x7c01))));
  CHECK(std::isnan(static_cast<float>(float16::from_bits(0xfe00))));
}

TEST_CASE("every float16 pattern widens to the value its fields encode", "[types]") {
  std::uint32_t failures = 0;
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const double want = float16_value(bits);
    const float got = static_cast<float>(float16::from_bits(bits));
    const bool ok = std::isnan(want) ? std::isnan(got)
                                     : static_cast<double>(got) == want && std::signbit(got) == std::signbit(want);
    if (!ok && ++failures <= 3) {
      INFO("pattern 0x" << std::hex << b << ": got " << got << ", want " << want);
      CHECK(ok);
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("every bfloat16 pattern widens to the float with those upper bits", "[types]") {
  std::uint32_t failures = 0;
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto got =
        std::bit_cast<std::uint32_t>(static_cast<float>(bfloat16::from_bits(static_cast<std::uint16_t>(b))));
    const bool ok = got == b << 16;
    if (!ok && ++failures <= 3) {
      INFO("pattern 0x" << std::hex << b << " widens to 0x" << got);
      CHECK(ok);
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("every 16-bit pattern survives widen-then-narrow", "[types]") {
  check_round_trip_of_every_pattern<bfloat16>();
  check_round_trip_of_every_pattern<float16>();
}

TEST_CASE("rounding to nearest even around every 16-bit value", "[types]") {
  check_rounding_around_every_pattern<bfloat16>();
  check_rounding_around_every_pattern<float16>();
}

namespace {

/// Floats of every sign and exponent (subnormals, ±Inf and NaNs included), each with the
/// low halves that decide bfloat16's rounding: exact, just above, just below, at and just
/// past the tie, the largest. Every `step`-th upper half.
std::vector<float> rounding_cases(std::uint32_t step) {
  std::vector<float> values;
  for (std::uint32_t high = 0; high <= 0xffff; high += step) {
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      values.push_back(from_bits32(high << 16 | low));
    }
  }
  return values;
}

/// LayerNorm with γ = 0 writes β itself, each y = x̂·0 + β rounded once to H: so its rows must
/// hold H(β) bit for bit, whatever the active ISA rounds with. Zeros are compared by magnitude
/// (x̂·0 may be −0) and NaNs by being quiet NaNs (NaN payloads are not kept).
template <class H>
void check_outputs_round_like_the_type(std::size_t features, const std::vector<float>& betas) {
  std::size_t failures = 0;
  for (std::size_t from = 0; from < betas.size(); from += features) {
    LayerNorm<H> norm(features);
    std::fill(norm.gamma().begin(), norm.gamma().end(), 0.0f);
    for (std::size_t j = 0; j < features; ++j) norm.beta()[j] = betas[(from + j) % betas.size()];
    const std::size_t rows = 2;
    const std::vector<H> x = test_rows<H>(rows, features, 0, from + 1);
    std::vector<H> y(rows * features);
    norm.forward(x, y);
    for (std::size_t i = 0; i < rows * features; ++i) {
      const float beta = norm.beta()[i % features];
      const std::uint16_t got = y[i].bits, want = H(beta).bits;
      const bool ok = std::isnan(beta) ? is_quiet_nan_bits<H>(got)
                      : beta == 0    ? (got & 0x7fff) == 0
                                     : got == want;
      if (!ok && ++failures <= 3) {
        INFO(type_name<H>() << " at " << features << " features: beta 0x" << std::hex << std::bit_cast<std::uint32_t>(beta)
                            << " -> 0x" << got << ", want 0x" << want);
        CHECK(ok);
      }
    }
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("16-bit outputs round as bfloat16(float) and float16(float) do, bit for bit", "[types]") {
  INFO("ISA " << normkit::to_string(normkit::active_isa()));
  const std::vector<float> every_exponent = rounding_cases(1), some_exponents = rounding_cases(61);
  // Long rows store by the general path, short ones from registers, both with tails.
  check_outputs_round_like_the_type<bfloat16>(65536 + 13, every_exponent);
  check_outputs_round_like_the_type<bfloat16>(37, some_exponents);
  check_outputs_round_like_the_type<float16>(65536 + 13, every_exponent);
  check_outputs_round_like_the_type<float16>(37, some_exponents);
}
