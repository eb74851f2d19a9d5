# seqflow_layer_tests(DIR [LIBRARIES targets...] [LINK third-party targets...]
#                     [CONCURRENCY sources...])
#
# The GoogleTest executables of tests/cpp/DIR/*.cc. They link LIBRARIES
# (default: the layer seqflow_DIR) and so compile against that layer's view:
# a test that includes a higher layer's header does not build. The sources
# named in CONCURRENCY start threads (their own, a service's, a background
# refit): they form seqflow_DIR_concurrency_tests, whose tests carry the ctest
# label `concurrency` that ThreadSanitizer runs; the others form
# seqflow_DIR_tests. Helpers shared by test modules live in tests/cpp/support.
#
# Every executable joins the targets seqflow_tests (all of them) and, with
# CONCURRENCY, seqflow_concurrency_tests, which the run script builds.
add_custom_target(seqflow_tests)
add_custom_target(seqflow_concurrency_tests)
set_property(GLOBAL PROPERTY SEQFLOW_TEST_DIRS "")

function(seqflow_layer_tests dir)
  cmake_parse_arguments(PARSE_ARGV 1 TESTS "" "" "LIBRARIES;LINK;CONCURRENCY")
  set_property(GLOBAL APPEND PROPERTY SEQFLOW_TEST_DIRS ${dir})
  if(NOT TESTS_LIBRARIES)
    set(TESTS_LIBRARIES seqflow_${dir})
  endif()
  file(GLOB sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/cpp/${dir}/*.cc")
  set(concurrency_sources "")
  foreach(source IN LISTS TESTS_CONCURRENCY)
    set(path "${PROJECT_SOURCE_DIR}/tests/cpp/${dir}/${source}")
    if(NOT path IN_LIST sources)
      message(FATAL_ERROR "seqflow_layer_tests(${dir}): CONCURRENCY names ${source}, which tests/cpp/${dir} lacks")
    endif()
    list(REMOVE_ITEM sources "${path}")
    list(APPEND concurrency_sources "${path}")
  endforeach()
  if(sources)
    seqflow_test_executable(seqflow_${dir}_tests "" ${sources})
  endif()
  if(concurrency_sources)
    # Every executable that may run under TSan takes the suppressions.
    seqflow_test_executable(seqflow_${dir}_concurrency_tests concurrency ${concurrency_sources}
                            "${PROJECT_SOURCE_DIR}/tests/cpp/support/tsan_suppressions.cc")
  endif()
endfunction()

# One executable of `sources` (label: empty or `concurrency`); reads
# TESTS_LIBRARIES and TESTS_LINK of the calling seqflow_layer_tests.
function(seqflow_test_executable target label)
  add_executable(${target} ${ARGN})
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}/tests/cpp/support")
  target_link_libraries(${target} PRIVATE ${TESTS_LIBRARIES} ${TESTS_LINK} GTest::gtest_main)
  # Only the libraries ship: in every build the test code itself compiles at
  # -O0 (optimizing GoogleTest's expansions took most of a Release test build),
  # and in unity batches of 8 files, each template and inline function then
  # generated once a batch instead of once a file (about half the compile
  # time). Helpers of two test files must not share a name: shared ones live
  # in tests/cpp/support. In a batch no file is the main file, so GCC would
  # warn on every use of a type from a file's anonymous namespace.
  target_compile_options(${target} PRIVATE -O0 $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  # GoogleTest and the standard headers every test file includes, parsed once
  # per executable instead of once per file.
  target_precompile_headers(${target} PRIVATE <gtest/gtest.h> <algorithm> <chrono> <functional> <map> <memory>
                            <optional> <set> <string> <thread> <vector>)
  target_compile_definitions(${target} PRIVATE SEQFLOW_PUBLIC_INCLUDE_DIR="${PROJECT_SOURCE_DIR}/include/seqflow"
                                               SEQFLOW_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
  add_dependencies(seqflow_tests ${target})
  if(label)
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${label})
    add_dependencies(seqflow_concurrency_tests ${target})
  else()
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()

# After the seqflow_layer_tests calls: fails on a test source that would build
# into no executable, one directly in tests/cpp or in a directory that no call
# names (tests/cpp/support holds helpers only).
function(seqflow_check_test_dirs)
  get_property(dirs GLOBAL PROPERTY SEQFLOW_TEST_DIRS)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}/tests/cpp"
       "${PROJECT_SOURCE_DIR}/tests/cpp/*.cc")
  foreach(source IN LISTS sources)
    get_filename_component(dir "${source}" DIRECTORY)
    if(NOT dir IN_LIST dirs AND NOT dir STREQUAL "support")
      message(FATAL_ERROR "tests/cpp/${source} is in no test executable: move it to its layer's directory")
    endif()
  endforeach()
endfunction()
