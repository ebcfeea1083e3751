# How test binaries become ctest entries: one entry per gtest case, so a
# failure names its test and `ctest -j` spreads the cases over the cores.
# Cases are listed when ctest runs (PRE_TEST), not when the build runs, so a
# build never executes a test binary.
#
# Every case is its own process. What was once shared by a whole binary's
# run is shared by the ctest run instead: the cache directory Morpheus
# compiles into (clang's bitcode, the cost model's calibration), made empty by
# the fixture test `test_run_cache` before the first case and removed after
# the last (tests/support/PrivateCacheDirectory.h). Kernel cases make their
# own uniquely named namespaces, veths and pins, so they run side by side.
include(GoogleTest)

set(MORPHEUS_TEST_RUN_CACHE ${CMAKE_BINARY_DIR}/test-run-cache)

# morpheus_add_gtests(<target> [KERNEL] [RESOURCE_LOCK <name>])
#   KERNEL: the binary's main is KernelTestMain (exit 77 = skipped without
#   root); RESOURCE_LOCK: cases that must not run beside each other.
function(morpheus_add_gtests target)
  cmake_parse_arguments(ARG "KERNEL" "RESOURCE_LOCK" "" ${ARGN})
  set(properties FIXTURES_REQUIRED test_run_cache
      ENVIRONMENT MORPHEUS_TEST_RUN_CACHE=${MORPHEUS_TEST_RUN_CACHE})
  if(ARG_KERNEL)
    list(APPEND properties LABELS kernel SKIP_RETURN_CODE 77)
  else()
    list(APPEND properties LABELS unit)
  endif()
  if(ARG_RESOURCE_LOCK)
    list(APPEND properties RESOURCE_LOCK ${ARG_RESOURCE_LOCK})
  endif()
  # Test code is compiled without optimization: it is half of what the
  # build compiles and takes twice as long at -O2 (gtest's templates), while
  # what the tests exercise, the product libraries, keeps the build's -O2.
  target_compile_options(${target} PRIVATE -O0)
  gtest_discover_tests(${target} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
    TEST_PREFIX "${target}:" PROPERTIES ${properties})
endfunction()

function(morpheus_add_test_run_cache)
  add_test(NAME test_run_cache_setup COMMAND /bin/sh -c
    "rm -rf '${MORPHEUS_TEST_RUN_CACHE}' && mkdir -m 700 '${MORPHEUS_TEST_RUN_CACHE}'")
  add_test(NAME test_run_cache_cleanup COMMAND ${CMAKE_COMMAND} -E
    rm -rf ${MORPHEUS_TEST_RUN_CACHE})
  set_tests_properties(test_run_cache_setup PROPERTIES FIXTURES_SETUP test_run_cache)
  set_tests_properties(test_run_cache_cleanup PROPERTIES FIXTURES_CLEANUP test_run_cache)
endfunction()
