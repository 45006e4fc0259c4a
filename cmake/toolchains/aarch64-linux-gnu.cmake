# Cross-compiling hylens for 64-bit Arm Linux on a Debian x86-64 machine (scripts/test-aarch64.sh):
# Debian's aarch64-linux-gnu cross compilers, the arm64 libraries of the multiarch packages, and
# QEMU user-mode emulation to run what is built (ctest runs each test through it).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries from the arm64 multiarch directory /usr/lib/aarch64-linux-gnu
# (CMAKE_LIBRARY_ARCHITECTURE); headers (arch-independent: xtensor, doctest, nlohmann_json,
# CLI11) and CMake package files from /usr as usual.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Debian installs the package files of the header-only xsimd and xtensor under the build
# machine's multiarch directory; the targets they define only name /usr/include.
set(xsimd_DIR /usr/lib/x86_64-linux-gnu/cmake/xsimd CACHE PATH "")
set(xtensor_DIR /usr/lib/x86_64-linux-gnu/cmake/xtensor CACHE PATH "")
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# The arm64 C library of the multiarch packages (libc6:arm64) is the one the binaries load;
# pointing QEMU at the cross toolchain's copy instead (-L /usr/aarch64-linux-gnu) mixes the two
# and hangs at start-up.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
# g++ notes on aarch64 that GCC 10.1 changed how some structs are passed (-Wpsabi): about
# mixing objects built by GCC before 10.1, which a from-source build does not.
set(CMAKE_CXX_FLAGS_INIT "-Wno-psabi")
