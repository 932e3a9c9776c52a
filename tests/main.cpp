// The test runner's main: honours NORMKIT_ISA (set per ctest test), skipping with exit code 77
// when this CPU cannot run the instruction set asked for, or lacks AVX512_BF16 where
// NORMKIT_AVX512_BF16=1 asks for its rounding, then runs the Catch2 session.
#if !defined(NORMKIT_CATCH2_V3)
#define CATCH_CONFIG_RUNNER  // Catch2 v2: compile the framework, without its main, into this file
#endif
#include "catch.hpp"  // v3: catch_all.hpp, which has Catch::Session too

#include <normkit/normkit.hpp>

#include <cstdlib>
#include <iostream>
#include <string_view>

int main(int argc, char* argv[]) {
  // normkit reads NORMKIT_ISA itself and, when the CPU lacks that ISA, runs another one: a
  // mismatch means the requested ISA cannot be tested on this machine.
  const std::string_view active = normkit::to_string(normkit::active_isa());
  const char* requested = std::getenv("NORMKIT_ISA");
  if (requested != nullptr && *requested != '\0' && active != requested) {
    std::cout << "normkit tests: ISA " << requested << " not supported on this CPU, skipping\n";
    return 77;
  }
  const char* bf16 = std::getenv("NORMKIT_AVX512_BF16");
  if (bf16 != nullptr && std::string_view(bf16) == "1" && !normkit::detail::avx512_bf16_rounding()) {
    std::cout << "normkit tests: AVX512_BF16 not supported on this CPU, skipping\n";
    return 77;
  }
  std::cout << "normkit tests: running on ISA " << active
            << (active == "avx512" && normkit::detail::avx512_bf16_rounding() ? " (AVX512_BF16 rounding)" : "") << '\n';
  return Catch::Session().run(argc, argv);
}
