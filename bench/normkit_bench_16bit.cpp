// Registers normkit_bench's bfloat16 and float16 benchmarks. A file of its own so that the build
// compiles it in parallel with normkit_bench.cpp: the kernels and peers of all four element
// types in one file take twice as long to compile.
#include "benchmarks.hpp"

namespace normkit_bench {

void register_16bit_types(std::span<const Shape> shapes) {
  register_type<normkit::bfloat16>(shapes);
  register_type<normkit::float16>(shapes);
}

}  // namespace normkit_bench
