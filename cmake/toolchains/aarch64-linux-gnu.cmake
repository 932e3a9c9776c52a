# Cross-compiles for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu; executables (and so
# ctest's tests) run under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)

# Target libraries and headers come only from the cross sysroot. CMake package files may come
# from the build machine too: header-only packages such as Debian's catch2 are
# architecture-independent but installed under /usr.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# Such packages' headers live in the build machine's /usr/include, which the cross compiler does
# not search (and CMake never passes as -I). -idirafter searches it last, so it can never shadow
# a header of the target's own C or C++ library.
set(CMAKE_CXX_FLAGS_INIT "-idirafter /usr/include")
