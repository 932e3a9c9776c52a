// Instruction sets: which ones this CPU and this build support, which one normkit uses, and
// how to override the choice (the NORMKIT_ISA environment variable, or set_isa()).
#pragma once

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "detail/error.hpp"
#include "detail/targets.hpp"

#if NORMKIT_TARGET_ATTRIBUTES
#include <cpuid.h>
#endif

namespace normkit {

/// An instruction set normkit has kernels for. `avx2` means AVX2 with FMA; `avx512` means
/// AVX-512 F, BW, VL and DQ; `neon` means AArch64 Advanced SIMD; `scalar` runs everywhere.
enum class isa { scalar, avx2, avx512, neon };

/// "scalar", "avx2", "avx512" or "neon".
constexpr std::string_view to_string(isa which) noexcept {
  switch (which) {
    case isa::avx2: return "avx2";
    case isa::avx512: return "avx512";
    case isa::neon: return "neon";
    case isa::scalar: break;
  }
  return "scalar";
}

namespace detail {

#if NORMKIT_TARGET_ATTRIBUTES
/// F16C (float16 conversions) came with every AVX2 CPU, but is checked rather than assumed;
/// clang 14's __builtin_cpu_supports does not know its name, so CPUID leaf 1 is read directly.
inline bool has_f16c() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

/// The family of an AMD CPU as CPUID leaf 1 gives it, base plus extended (0x19 for Zen 3 and
/// Zen 4, 0x1A for Zen 5), or 0 for any other CPU: for the tuning that differs between them.
inline unsigned amd_family() noexcept {
#if NORMKIT_TARGET_ATTRIBUTES
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // "AuthenticAMD", four letters each in EBX, EDX and ECX, lowest byte first.
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0 || ebx != 0x68747541u || edx != 0x69746e65u ||
      ecx != 0x444d4163u) {
    return 0;
  }
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
  const unsigned base = (eax >> 8) & 0xfu;
  return base == 0xfu ? base + ((eax >> 20) & 0xffu) : base;
#else
  return 0;
#endif
}

/// The L1 data cache of an AMD CPU in KiB (CPUID leaf 8000_0005h, ECX bits 31–24), or 0 on
/// other CPUs, whose leaf 8000_0005h is reserved.
inline unsigned amd_l1d_kib() noexcept {
#if NORMKIT_TARGET_ATTRIBUTES
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (amd_family() == 0 || __get_cpuid(0x80000005u, &eax, &ebx, &ecx, &edx) == 0) return 0;
  return ecx >> 24;
#else
  return 0;
#endif
}

inline bool cpu_has(isa which) noexcept {
  switch (which) {
    case isa::scalar: return true;
    case isa::avx2:
#if NORMKIT_HAVE_AVX2 && NORMKIT_TARGET_ATTRIBUTES
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
#else
      return NORMKIT_HAVE_AVX2 != 0;  // compiled in only when the flags already require it
#endif
    case isa::avx512:
#if NORMKIT_HAVE_AVX512 && NORMKIT_TARGET_ATTRIBUTES
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
      return NORMKIT_HAVE_AVX512 != 0;
#endif
    case isa::neon: return NORMKIT_HAVE_NEON != 0;
  }
  return false;
}

#if NORMKIT_HAVE_AVX512_BF16 && NORMKIT_TARGET_ATTRIBUTES
/// AVX512_BF16: CPUID leaf 7, subleaf 1 (which subleaf 0's EAX must list), EAX bit 5; read
/// directly, as for F16C.
inline bool has_avx512_bf16() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0 || eax < 1) return false;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 5)) != 0;
}
#endif

/// Whether bfloat16 rows on isa::avx512 round with AVX512_BF16's instruction (see
/// arch/avx512_bf16.hpp): where the CPU has it, unless the environment variable
/// NORMKIT_AVX512_BF16=0 asks for the software rounding of AVX-512 CPUs without it, so that one
/// machine can test both (1 or unset: the instruction where there is one; other values are
/// reported on stderr and ignored, as NORMKIT_ISA's). The results are the same bit for bit;
/// only the speed differs.
inline bool avx512_bf16_rounding() noexcept {
  static const bool use = [] {
#if NORMKIT_HAVE_AVX512_BF16
    const char* requested = std::getenv("NORMKIT_AVX512_BF16");
    if (requested != nullptr && std::string_view(requested) == "0") return false;
    if (requested != nullptr && *requested != '\0' && std::string_view(requested) != "1") {
      std::fprintf(stderr, "normkit: NORMKIT_AVX512_BF16=%s is neither 0 nor 1; ignored\n", requested);
    }
#if NORMKIT_TARGET_ATTRIBUTES
    return cpu_has(isa::avx512) && has_avx512_bf16();
#else
    return true;  // compiled in only when the flags already require it
#endif
#else
    return false;
#endif
  }();
  return use;
}

struct supported_list {
  std::array<isa, 4> items{};
  std::size_t size = 0;
};

inline const supported_list& supported() noexcept {
  static const supported_list list = [] {
    supported_list l;
    for (isa which : {isa::avx512, isa::avx2, isa::neon, isa::scalar}) {
      if (cpu_has(which)) l.items[l.size++] = which;
    }
    return l;
  }();
  return list;
}

inline bool is_supported(isa which) noexcept {
  const supported_list& l = supported();
  for (std::size_t i = 0; i < l.size; ++i) {
    if (l.items[i] == which) return true;
  }
  return false;
}

/// The best supported ISA, unless NORMKIT_ISA names another supported one. A name that is
/// unknown or unsupported here is reported on stderr and ignored rather than fatal, so that
/// one environment can drive programs on several machines.
inline isa initial_isa() noexcept {
  const isa best = supported().items[0];
  const char* requested = std::getenv("NORMKIT_ISA");
  if (requested == nullptr || *requested == '\0') return best;
  for (isa which : {isa::scalar, isa::avx2, isa::avx512, isa::neon}) {
    if (to_string(which) == requested) {
      if (is_supported(which)) return which;
      std::fprintf(stderr, "normkit: NORMKIT_ISA=%s is not supported on this CPU; using %s\n",
                   requested, std::string(to_string(best)).c_str());
      return best;
    }
  }
  std::fprintf(stderr,
               "normkit: NORMKIT_ISA=%s is not one of scalar, avx2, avx512, neon; using %s\n",
               requested, std::string(to_string(best)).c_str());
  return best;
}

inline std::atomic<isa>& active_isa_slot() noexcept {
  static std::atomic<isa> slot{initial_isa()};
  return slot;
}

}  // namespace detail

/// The instruction sets this CPU and this build can run, best first, scalar last.
inline std::span<const isa> supported_isas() noexcept {
  const detail::supported_list& l = detail::supported();
  return {l.items.data(), l.size};
}

/// The instruction set the kernels run on: chosen on first use (see NORMKIT_ISA).
inline isa active_isa() noexcept { return detail::active_isa_slot().load(std::memory_order_relaxed); }

/// Runs every later call on `which`. Throws std::invalid_argument if it is not supported here.
inline void set_isa(isa which) {
  if (!detail::is_supported(which)) {
    detail::fail(std::string("normkit::set_isa: ") + std::string(to_string(which)) +
                 " is not supported on this CPU or in this build");
  }
  detail::active_isa_slot().store(which, std::memory_order_relaxed);
}

}  // namespace normkit
