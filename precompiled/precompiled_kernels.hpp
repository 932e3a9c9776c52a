// normkit's own programs (tests, benchmark, examples) compile the row kernels once, in the
// library normkit_precompiled_kernels, instead of once in every file that uses a norm: each of
// those files sees these explicit instantiation declarations and only calls the kernels.
// Users of normkit need none of this; the headers alone compile every kernel they use.
#pragma once

#include <normkit/normkit.hpp>

// KIND is `extern` for the declarations here and empty for the definitions in the
// precompiled/*.cpp files, one file per element type.
#define NORMKIT_PRECOMPILED_KERNELS_OF(KIND, NS, T)                                                      \
  KIND template void normkit::detail::NS::forward<normkit::detail::NS::LayerNormForward<T>, T>(         \
      const normkit::detail::ForwardRows<T>&, std::size_t, std::size_t);                                \
  KIND template void normkit::detail::NS::forward<normkit::detail::NS::RmsNormForward<T>, T>(           \
      const normkit::detail::ForwardRows<T>&, std::size_t, std::size_t);                                \
  KIND template void normkit::detail::NS::backward<normkit::detail::NS::LayerNormBackward<T>, T>(       \
      const normkit::detail::BackwardRows<T>&, std::size_t, std::size_t);                               \
  KIND template void normkit::detail::NS::backward<normkit::detail::NS::RmsNormBackward<T>, T>(         \
      const normkit::detail::BackwardRows<T>&, std::size_t, std::size_t);

#if NORMKIT_HAVE_AVX2
#define NORMKIT_PRECOMPILED_AVX2(KIND, T) NORMKIT_PRECOMPILED_KERNELS_OF(KIND, avx2, T)
#else
#define NORMKIT_PRECOMPILED_AVX2(KIND, T)
#endif
#if NORMKIT_HAVE_AVX512
#define NORMKIT_PRECOMPILED_AVX512(KIND, T) NORMKIT_PRECOMPILED_KERNELS_OF(KIND, avx512, T)
#else
#define NORMKIT_PRECOMPILED_AVX512(KIND, T)
#endif
#if NORMKIT_HAVE_NEON
#define NORMKIT_PRECOMPILED_NEON(KIND, T) NORMKIT_PRECOMPILED_KERNELS_OF(KIND, neon, T)
#else
#define NORMKIT_PRECOMPILED_NEON(KIND, T)
#endif

/// The kernels of element type T on every instruction set this build has.
#define NORMKIT_PRECOMPILED_KERNELS(KIND, T)                                                      \
  NORMKIT_PRECOMPILED_KERNELS_OF(KIND, scalar, T)                                                 \
  NORMKIT_PRECOMPILED_AVX2(KIND, T) NORMKIT_PRECOMPILED_AVX512(KIND, T) NORMKIT_PRECOMPILED_NEON(KIND, T)

// AVX512_BF16 has kernels of bfloat16 only (see with_active_kernels).
#if NORMKIT_HAVE_AVX512_BF16
#define NORMKIT_PRECOMPILED_AVX512_BF16(KIND) NORMKIT_PRECOMPILED_KERNELS_OF(KIND, avx512_bf16, normkit::bfloat16)
#else
#define NORMKIT_PRECOMPILED_AVX512_BF16(KIND)
#endif

NORMKIT_PRECOMPILED_KERNELS(extern, float)
NORMKIT_PRECOMPILED_KERNELS(extern, double)
NORMKIT_PRECOMPILED_KERNELS(extern, normkit::bfloat16)
NORMKIT_PRECOMPILED_AVX512_BF16(extern)
NORMKIT_PRECOMPILED_KERNELS(extern, normkit::float16)
