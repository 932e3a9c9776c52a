// The row kernels of every instruction set and element type, compiled once for the whole test
// binary (in kernels.cpp) instead of once per test file: explicit instantiation declarations.
#pragma once

#include <normkit/normkit.hpp>

// KIND is `extern` for the declarations here and empty for the definitions in kernels.cpp.
#define NKTEST_KERNELS_OF(KIND, NS, T)                                                                   \
  KIND template void normkit::detail::NS::forward<normkit::detail::NS::LayerNormForward<T>, T>(         \
      const normkit::detail::ForwardRows<T>&, std::size_t, std::size_t);                                \
  KIND template void normkit::detail::NS::forward<normkit::detail::NS::RmsNormForward<T>, T>(           \
      const normkit::detail::ForwardRows<T>&, std::size_t, std::size_t);                                \
  KIND template void normkit::detail::NS::backward<normkit::detail::NS::LayerNormBackward<T>, T>(       \
      const normkit::detail::BackwardRows<T>&, std::size_t, std::size_t);                               \
  KIND template void normkit::detail::NS::backward<normkit::detail::NS::RmsNormBackward<T>, T>(         \
      const normkit::detail::BackwardRows<T>&, std::size_t, std::size_t);

#define NKTEST_KERNELS_IN(KIND, NS)            \
  NKTEST_KERNELS_OF(KIND, NS, float)           \
  NKTEST_KERNELS_OF(KIND, NS, double)          \
  NKTEST_KERNELS_OF(KIND, NS, normkit::bfloat16) \
  NKTEST_KERNELS_OF(KIND, NS, normkit::float16)

#if NORMKIT_HAVE_AVX2
#define NKTEST_KERNELS_AVX2(KIND) NKTEST_KERNELS_IN(KIND, avx2)
#else
#define NKTEST_KERNELS_AVX2(KIND)
#endif
#if NORMKIT_HAVE_AVX512
#define NKTEST_KERNELS_AVX512(KIND) NKTEST_KERNELS_IN(KIND, avx512)
#else
#define NKTEST_KERNELS_AVX512(KIND)
#endif
// AVX512_BF16 has kernels of bfloat16 only (see with_active_kernels).
#if NORMKIT_HAVE_AVX512_BF16
#define NKTEST_KERNELS_AVX512_BF16(KIND) NKTEST_KERNELS_OF(KIND, avx512_bf16, normkit::bfloat16)
#else
#define NKTEST_KERNELS_AVX512_BF16(KIND)
#endif
#if NORMKIT_HAVE_NEON
#define NKTEST_KERNELS_NEON(KIND) NKTEST_KERNELS_IN(KIND, neon)
#else
#define NKTEST_KERNELS_NEON(KIND)
#endif

#define NKTEST_EVERY_KERNEL(KIND) \
  NKTEST_KERNELS_IN(KIND, scalar)                                                                \
  NKTEST_KERNELS_AVX2(KIND) NKTEST_KERNELS_AVX512(KIND) NKTEST_KERNELS_AVX512_BF16(KIND) NKTEST_KERNELS_NEON(KIND)

NKTEST_EVERY_KERNEL(extern)
