// The row kernels of float16 on every instruction set (see precompiled_kernels.hpp).
#include "precompiled_kernels.hpp"

NORMKIT_PRECOMPILED_KERNELS(, normkit::float16)
