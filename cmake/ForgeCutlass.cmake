# CUTLASS's C++ headers (scripts/setup unpacks the pinned nvidia-cutlass wheel outside the clone;
# scripts/lib.sh's forge_cutlass_path says where). They are never compiled into Forge's own
# targets: the worker's compile pool passes FORGE_CUTLASS_INCLUDE to nvcc at run time, when it
# builds a CUTLASS candidate. Empty when the headers are missing: CUTLASS candidates then fail to
# compile with a clear reason, and the tests that compile them skip.
set(FORGE_CUTLASS_INCLUDE "" CACHE PATH "CUTLASS include directory (default: scripts/lib.sh forge_cutlass_path)/include")
if(NOT FORGE_CUTLASS_INCLUDE)
  execute_process(COMMAND bash -c "source '${PROJECT_SOURCE_DIR}/scripts/lib.sh' && forge_cutlass_path"
                  OUTPUT_VARIABLE _forge_cutlass OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(EXISTS "${_forge_cutlass}/include/cutlass/version.h")
    set(FORGE_CUTLASS_INCLUDE "${_forge_cutlass}/include" CACHE PATH "" FORCE)
  else()
    message(STATUS "CUTLASS headers not found at ${_forge_cutlass}/include (run scripts/setup)")
  endif()
endif()
