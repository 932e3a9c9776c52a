// The row kernels of bfloat16 on every instruction set (see precompiled_kernels.hpp).
#include "precompiled_kernels.hpp"

NORMKIT_PRECOMPILED_KERNELS(, normkit::bfloat16)
NORMKIT_PRECOMPILED_AVX512_BF16()
