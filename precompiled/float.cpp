// The row kernels of float on every instruction set (see precompiled_kernels.hpp).
#include "precompiled_kernels.hpp"

NORMKIT_PRECOMPILED_KERNELS(, float)
