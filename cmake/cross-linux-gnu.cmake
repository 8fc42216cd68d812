# Toolchain file for cross builds to another Linux CPU with Debian's cross compilers
# (gcc-<gnu-triple>, g++-<gnu-triple>) and qemu-user to run the tests:
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/cross-linux-gnu.cmake \
#         -DTVMRT_TARGET=aarch64-unknown-linux-gnu
#
# TVMRT_TARGET is the Rust target triple (aarch64-unknown-linux-gnu,
# armv7-unknown-linux-gnueabihf, riscv64gc-unknown-linux-gnu); this file derives the GNU triple,
# the compilers, CMAKE_SYSTEM_PROCESSOR and the emulator ctest runs the programs under
# (qemu-<cpu>-static or qemu-<cpu>, with the cross C library's sysroot as its -L prefix).
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TVMRT_TARGET)
if(NOT TVMRT_TARGET)
  message(FATAL_ERROR "cross-linux-gnu.cmake: set -DTVMRT_TARGET=<rust target triple>")
endif()

if(TVMRT_TARGET MATCHES "^armv7-unknown-linux-gnueabihf$")
  set(tvmrt_gnu arm-linux-gnueabihf)
  set(tvmrt_cpu armv7l)
  set(tvmrt_qemu arm)
elseif(TVMRT_TARGET MATCHES "^riscv64gc-unknown-linux-gnu$")
  set(tvmrt_gnu riscv64-linux-gnu)
  set(tvmrt_cpu riscv64)
  set(tvmrt_qemu riscv64)
elseif(TVMRT_TARGET MATCHES "^([a-z0-9_]+)-unknown-linux-(gnu[a-z]*)$")
  set(tvmrt_gnu "${CMAKE_MATCH_1}-linux-${CMAKE_MATCH_2}")
  set(tvmrt_cpu "${CMAKE_MATCH_1}")
  set(tvmrt_qemu "${CMAKE_MATCH_1}")
else()
  message(FATAL_ERROR "cross-linux-gnu.cmake: no GNU toolchain known for ${TVMRT_TARGET}")
endif()

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${tvmrt_cpu})
set(CMAKE_C_COMPILER ${tvmrt_gnu}-gcc)
set(CMAKE_CXX_COMPILER ${tvmrt_gnu}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${tvmrt_gnu})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)

find_program(TVMRT_QEMU NAMES qemu-${tvmrt_qemu}-static qemu-${tvmrt_qemu})
if(TVMRT_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${TVMRT_QEMU};-L;/usr/${tvmrt_gnu}")
endif()
