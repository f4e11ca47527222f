# LibTorch from the project's Python environment (torch==2.11.0, C++11 ABI).
# Only the CPU libraries are linked (libtorch_cpu, libc10): the reference interpreter calls ATen
# on the CPU, and the GPU machine brings its own CUDA build of the same version.
# Targets that include LibTorch headers are few on purpose: they cost ~20 s each to compile.
option(FORGE_WITH_TORCH "Build the parts that link LibTorch" ON)
set(FORGE_PYTHON "" CACHE FILEPATH "Python of the Forge environment (default: scripts/pyenv-path)")

if(FORGE_WITH_TORCH)
  if(NOT FORGE_PYTHON)
    execute_process(COMMAND ${PROJECT_SOURCE_DIR}/scripts/pyenv-path
                    OUTPUT_VARIABLE _forge_pyenv OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(FORGE_PYTHON "${_forge_pyenv}/bin/python" CACHE FILEPATH "" FORCE)
  endif()
  execute_process(COMMAND ${FORGE_PYTHON} -c "import torch,os;print(os.path.dirname(torch.__file__));print(torch.__version__)"
                  OUTPUT_VARIABLE _forge_torch RESULT_VARIABLE _forge_torch_rc OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  if(NOT _forge_torch_rc EQUAL 0)
    message(FATAL_ERROR "Forge needs torch in its Python environment (${FORGE_PYTHON}): ${FORGE_SETUP_HINT}, "
                        "or configure with -DFORGE_WITH_TORCH=OFF to build without the ATen parts.")
  endif()
  string(REPLACE "\n" ";" _forge_torch "${_forge_torch}")
  list(GET _forge_torch 0 FORGE_TORCH_DIR)
  list(GET _forge_torch 1 FORGE_TORCH_VERSION)
  if(NOT FORGE_TORCH_VERSION MATCHES "^2\\.11\\.")
    message(WARNING "Forge is pinned to torch 2.11 (the GPU machine's); found ${FORGE_TORCH_VERSION}")
  endif()
  add_library(forge_libtorch_cpu INTERFACE)
  add_library(forge::libtorch_cpu ALIAS forge_libtorch_cpu)
  # torch/include also ships an old protobuf's headers (google/), which would shadow Debian's in
  # every file that includes generated forge.v1 messages; expose the rest through links.
  set(_forge_torch_include ${PROJECT_BINARY_DIR}/libtorch_include)
  file(REMOVE_RECURSE ${_forge_torch_include})
  file(MAKE_DIRECTORY ${_forge_torch_include})
  file(GLOB _forge_torch_entries RELATIVE ${FORGE_TORCH_DIR}/include ${FORGE_TORCH_DIR}/include/*)
  list(REMOVE_ITEM _forge_torch_entries google)
  foreach(_entry IN LISTS _forge_torch_entries)
    file(CREATE_LINK ${FORGE_TORCH_DIR}/include/${_entry} ${_forge_torch_include}/${_entry} SYMBOLIC)
  endforeach()
  target_include_directories(forge_libtorch_cpu SYSTEM INTERFACE
    ${_forge_torch_include} ${FORGE_TORCH_DIR}/include/torch/csrc/api/include)
  target_compile_definitions(forge_libtorch_cpu INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
  target_link_libraries(forge_libtorch_cpu INTERFACE
    ${FORGE_TORCH_DIR}/lib/libtorch_cpu.so ${FORGE_TORCH_DIR}/lib/libc10.so)
  set_target_properties(forge_libtorch_cpu PROPERTIES INTERFACE_LINK_OPTIONS "-Wl,-rpath,${FORGE_TORCH_DIR}/lib")
  message(STATUS "Forge: LibTorch ${FORGE_TORCH_VERSION} (CPU libraries) from ${FORGE_TORCH_DIR}")

  # The CUDA libraries of the same build (the pip wheel is the cu130 one), for the worker's ATen
  # baseline on the GPU. libtorch_cuda finds cudart, cuBLAS, cuDNN and the rest in the pip nvidia
  # packages through its own $ORIGIN RPATH, and opens the driver only at first use: binaries that
  # link it still start on machines without a GPU. Nothing calls into libtorch_cuda by name (its
  # kernels register with the dispatcher from static initializers), so it is linked with
  # --no-as-needed, which Debian's compiler otherwise applies and would drop it. c10/cuda's inline
  # code calls the CUDA runtime directly: the cudart linked is the one libtorch_cuda loads.
  file(REAL_PATH ${FORGE_TORCH_DIR}/../nvidia/cu13/lib _forge_torch_nvidia_lib)
  if(EXISTS ${FORGE_TORCH_DIR}/lib/libtorch_cuda.so AND EXISTS ${FORGE_TORCH_DIR}/lib/libc10_cuda.so
     AND EXISTS ${_forge_torch_nvidia_lib}/libcudart.so.13)
    add_library(forge_libtorch_cuda INTERFACE)
    add_library(forge::libtorch_cuda ALIAS forge_libtorch_cuda)
    target_link_libraries(forge_libtorch_cuda INTERFACE forge::libtorch_cpu CUDA::toolkit
      "-Wl,--no-as-needed" ${FORGE_TORCH_DIR}/lib/libtorch_cuda.so ${FORGE_TORCH_DIR}/lib/libc10_cuda.so
      "-Wl,--as-needed" ${_forge_torch_nvidia_lib}/libcudart.so.13)
    set_target_properties(forge_libtorch_cuda PROPERTIES
      INTERFACE_LINK_OPTIONS "-Wl,-rpath,${_forge_torch_nvidia_lib}")
    message(STATUS "Forge: LibTorch CUDA libraries from ${FORGE_TORCH_DIR}")
  endif()
endif()
