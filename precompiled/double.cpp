// The row kernels of double on every instruction set (see precompiled_kernels.hpp).
#include "precompiled_kernels.hpp"

NORMKIT_PRECOMPILED_KERNELS(, double)
