# Finds every external dependency. A missing one stops configuration with the command that fixes it.
set(FORGE_SETUP_HINT "run scripts/setup (it installs every Debian package and the Python environment)")

macro(forge_require_package name)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "Forge needs ${name} (${FORGE_DEP_${name}}), which was not found: ${FORGE_SETUP_HINT}.")
  endif()
endmacro()

set(FORGE_DEP_Threads "pthreads")
set(FORGE_DEP_Protobuf "Debian: libprotobuf-dev protobuf-compiler")
set(FORGE_DEP_gRPC "Debian: libgrpc++-dev protobuf-compiler-grpc")
set(FORGE_DEP_absl "Debian: libabsl-dev")
set(FORGE_DEP_spdlog "Debian: libspdlog-dev")
set(FORGE_DEP_hiredis "Debian: libhiredis-dev")
set(FORGE_DEP_civetweb "Debian: libcivetweb-dev")
set(FORGE_DEP_OpenSSL "libcrypto 3 for SHA-256; Debian: libssl-dev")
set(FORGE_DEP_xgboost "the learned performance model's learner; Debian: libxgboost-dev")
set(FORGE_DEP_GTest "Debian: libgtest-dev libgmock-dev")
set(FORGE_DEP_CUDAToolkit "the CUDA 13 toolkit at /usr/local/cuda, or set CUDAToolkit_ROOT")

forge_require_package(Threads)
forge_require_package(Protobuf)
forge_require_package(gRPC CONFIG)
forge_require_package(absl CONFIG)
forge_require_package(spdlog CONFIG)
forge_require_package(OpenSSL 3.0 COMPONENTS Crypto)

# Debian's civetweb CMake config names a /usr/bin/civetweb it does not ship; find the library directly.
find_path(FORGE_CIVETWEB_INCLUDE civetweb.h)
find_library(FORGE_CIVETWEB_LIBRARY civetweb)
if(NOT FORGE_CIVETWEB_INCLUDE OR NOT FORGE_CIVETWEB_LIBRARY)
  message(FATAL_ERROR "Forge needs civetweb (${FORGE_DEP_civetweb}), not found: ${FORGE_SETUP_HINT}.")
endif()
add_library(forge_civetweb INTERFACE)
target_include_directories(forge_civetweb SYSTEM INTERFACE ${FORGE_CIVETWEB_INCLUDE})
target_link_libraries(forge_civetweb INTERFACE ${FORGE_CIVETWEB_LIBRARY})

# XGBoost 1.7 through its C API (xgboost/c_api.h): the learned performance model
# (compiler/cost/learned). Debian's CMake config, like civetweb's, names a binary the package does
# not ship (/usr/bin/xgboost), so the library and header are found directly.
find_path(FORGE_XGBOOST_INCLUDE xgboost/c_api.h)
find_library(FORGE_XGBOOST_LIBRARY xgboost)
if(NOT FORGE_XGBOOST_INCLUDE OR NOT FORGE_XGBOOST_LIBRARY)
  message(FATAL_ERROR "Forge needs XGBoost (${FORGE_DEP_xgboost}), not found: ${FORGE_SETUP_HINT}.")
endif()
add_library(forge_xgboost INTERFACE)
target_include_directories(forge_xgboost SYSTEM INTERFACE ${FORGE_XGBOOST_INCLUDE})
target_link_libraries(forge_xgboost INTERFACE ${FORGE_XGBOOST_LIBRARY})

# Debian's hiredis 0.14 ships a CMake config without an imported target; use pkg-config.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(hiredis QUIET IMPORTED_TARGET hiredis)
endif()
if(NOT hiredis_FOUND)
  message(FATAL_ERROR "Forge needs hiredis (${FORGE_DEP_hiredis}) and pkg-config, not found: ${FORGE_SETUP_HINT}.")
endif()

# cairo draws the plots of `forge results` (text through fontconfig and FreeType, in DejaVu Sans).
pkg_check_modules(cairo QUIET IMPORTED_TARGET cairo)
if(NOT cairo_FOUND)
  message(FATAL_ERROR "Forge's plots need cairo (Debian: libcairo2-dev, and fonts-dejavu-core for their font), not found: ${FORGE_SETUP_HINT}.")
endif()

find_program(FORGE_PROTOC protoc)
find_program(FORGE_GRPC_CPP_PLUGIN grpc_cpp_plugin)
if(NOT FORGE_PROTOC OR NOT FORGE_GRPC_CPP_PLUGIN)
  message(FATAL_ERROR "Forge needs protoc and grpc_cpp_plugin (Debian: protobuf-compiler protobuf-compiler-grpc): ${FORGE_SETUP_HINT}.")
endif()

if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
forge_require_package(CUDAToolkit)

if(FORGE_BUILD_TESTS)
  forge_require_package(GTest)
  find_program(FORGE_REDIS_SERVER redis-server)
  find_program(FORGE_PROMTOOL promtool)
  if(NOT FORGE_REDIS_SERVER OR NOT FORGE_PROMTOOL)
    message(FATAL_ERROR "Forge's tests need redis-server and promtool (Debian: redis-server prometheus): ${FORGE_SETUP_HINT}.")
  endif()
endif()

include(ForgeTorch)
include(ForgeCutlass)
include(ForgeCudnn)
