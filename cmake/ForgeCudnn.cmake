# cuDNN 9 and the cuDNN frontend, for the cudnn_conv family's executor (worker/library/cudnn_conv)
# and nothing else: the coordinator never links or includes them.
#
# cuDNN comes with torch: the pip wheel's nvidia/cudnn (headers and libcudnn.so.9) in the Python
# environment ForgeTorch.cmake found, next to torch's own folder. libcudnn.so.9 is a small
# dispatcher that opens its engine libraries at first use and needs no CUDA driver to load, so it
# is linked directly (with an RPATH), like cuBLASLt.
#
# The frontend is header-only (scripts/setup unpacks the pinned nvidia-cudnn-frontend wheel
# outside the clone; scripts/lib.sh's forge_cudnn_frontend_path says where). Its headers pull in
# nlohmann json and cost seconds per translation unit: keep them in as few as possible.
#
# Defines FORGE_CUDNN_FRONTEND_INCLUDE and, when both are found, the target forge::cudnn_frontend
# (FORGE_HAVE_CUDNN is ON); without them the targets that need it are skipped with a message.
set(FORGE_CUDNN_FRONTEND_INCLUDE "" CACHE PATH
    "cuDNN frontend include directory (default: scripts/lib.sh forge_cudnn_frontend_path)/include")
if(NOT FORGE_CUDNN_FRONTEND_INCLUDE)
  execute_process(COMMAND bash -c "source '${PROJECT_SOURCE_DIR}/scripts/lib.sh' && forge_cudnn_frontend_path"
                  OUTPUT_VARIABLE _forge_cudnn_fe OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(EXISTS "${_forge_cudnn_fe}/include/cudnn_frontend.h")
    set(FORGE_CUDNN_FRONTEND_INCLUDE "${_forge_cudnn_fe}/include" CACHE PATH "" FORCE)
  else()
    message(STATUS "cuDNN frontend headers not found at ${_forge_cudnn_fe}/include (run scripts/setup)")
  endif()
endif()

set(FORGE_HAVE_CUDNN OFF)
if(FORGE_WITH_TORCH AND FORGE_TORCH_DIR AND FORGE_CUDNN_FRONTEND_INCLUDE)
  file(REAL_PATH ${FORGE_TORCH_DIR}/../nvidia/cudnn _forge_cudnn_root)
  if(EXISTS ${_forge_cudnn_root}/include/cudnn.h AND EXISTS ${_forge_cudnn_root}/lib/libcudnn.so.9)
    add_library(forge_cudnn_frontend INTERFACE)
    add_library(forge::cudnn_frontend ALIAS forge_cudnn_frontend)
    target_include_directories(forge_cudnn_frontend SYSTEM INTERFACE
      ${FORGE_CUDNN_FRONTEND_INCLUDE} ${_forge_cudnn_root}/include)
    # The frontend calls the CUDA runtime (memsets, events) itself: the static one, so nothing
    # more has to be found at run time; it uses the device's primary context, as Forge's
    # driver-API code and cuDNN do.
    target_link_libraries(forge_cudnn_frontend INTERFACE CUDA::toolkit CUDA::cudart_static
      ${_forge_cudnn_root}/lib/libcudnn.so.9)
    set_target_properties(forge_cudnn_frontend PROPERTIES
      INTERFACE_LINK_OPTIONS "-Wl,-rpath,${_forge_cudnn_root}/lib")
    set(FORGE_HAVE_CUDNN ON)
    message(STATUS "Forge: cuDNN from ${_forge_cudnn_root}, frontend from ${FORGE_CUDNN_FRONTEND_INCLUDE}")
  else()
    message(STATUS "cuDNN not found in ${_forge_cudnn_root} (torch's nvidia-cudnn wheel): no cudnn_conv executor")
  endif()
endif()
