// The one compilation of the row kernels that every test file links against (see kernels.hpp).
#include "kernels.hpp"

NKTEST_EVERY_KERNEL()
