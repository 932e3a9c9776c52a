// Includes Catch2 whichever major version the build found (tests/CMakeLists.txt defines
// NORMKIT_CATCH2_V3 for v3), and lets tests spell Approx either way: Approx or Catch::Approx.
#pragma once

#if defined(NORMKIT_CATCH2_V3)
#include <catch2/catch_all.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
namespace Catch {
using Detail::Approx;
}  // namespace Catch
#endif
