# forge_library(NAME SOURCES ... DEPS ...): a static library target forge_NAME (alias forge::NAME).
function(forge_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PUBLIC_DEPS" ${ARGN})
  add_library(forge_${name} STATIC ${ARG_SOURCES})
  add_library(forge::${name} ALIAS forge_${name})
  target_include_directories(forge_${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(forge_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
  target_compile_options(forge_${name} PRIVATE -Wall -Wextra)
endfunction()

# forge_test(NAME SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s] [NEEDS_MODELS]): a GoogleTest binary
# whose tests ctest discovers. NEEDS_MODELS: the tests read the exported test models
# (tests/fixtures), from the directory in $FORGE_TEST_MODELS.
function(forge_test name)
  if(NOT FORGE_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "NEEDS_MODELS" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  # Tools the tests start (redis-server, promtool) are found on PATH or through FORGE_* variables
  # by tests/support (FindTool), not passed here: gtest_discover_tests flattens list properties.
  set(properties TIMEOUT ${ARG_TIMEOUT})
  if(ARG_LABELS)
    list(APPEND properties LABELS ${ARG_LABELS})
  endif()
  if(ARG_NEEDS_MODELS)
    list(APPEND properties FIXTURES_REQUIRED forge_models ENVIRONMENT FORGE_TEST_MODELS=${FORGE_TEST_MODELS_DIR})
  endif()
  gtest_discover_tests(${name} TEST_PREFIX "${name}." DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
    PROPERTIES ${properties})
endfunction()
