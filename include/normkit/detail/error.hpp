// How normkit reports bad arguments: std::invalid_argument, or a message and abort() when
// exceptions are off (NORMKIT_NO_EXCEPTIONS, or -fno-exceptions).
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if !defined(NORMKIT_NO_EXCEPTIONS) && \
    !(defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND))
#define NORMKIT_NO_EXCEPTIONS
#endif

namespace normkit::detail {

[[noreturn]] inline void fail(const std::string& message) {
#ifdef NORMKIT_NO_EXCEPTIONS
  std::fprintf(stderr, "%s\n", message.c_str());
  std::abort();
#else
  throw std::invalid_argument(message);
#endif
}

/// "name = value", for messages that name the sizes involved.
inline std::string show(const char* name, std::size_t value) {
  return std::string(name) + " = " + std::to_string(value);
}

}  // namespace normkit::detail
