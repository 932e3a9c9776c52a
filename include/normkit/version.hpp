// The normkit version, as macros for the preprocessor and constants for code.
#pragma once

#define NORMKIT_VERSION_MAJOR 0
#define NORMKIT_VERSION_MINOR 1
#define NORMKIT_VERSION_PATCH 0
#define NORMKIT_VERSION_STRING "0.1.0"

namespace normkit {
inline constexpr int version_major = NORMKIT_VERSION_MAJOR;
inline constexpr int version_minor = NORMKIT_VERSION_MINOR;
inline constexpr int version_patch = NORMKIT_VERSION_PATCH;
}  // namespace normkit
