# rtce_testing.cmake — the two shapes every test target here takes, written once:
#   rtce_add_gtest(<target> SOURCES ... [LIBS ...] [INCLUDES ...] [DEFINITIONS ...]
#                  [PROPERTIES <ctest properties>...])
#     a GoogleTest executable with the project's warnings, its cases discovered by CTest;
#   rtce_add_fuzzer(<name> SOURCES ... CORPUS <seed dir> MAX_LEN <bytes> [LIBS ...] [INCLUDES ...])
#     fuzz_<name>, a libFuzzer target built with ASan + UBSan (clang only; skipped with a
#     message otherwise), which CTest runs for RTCE_FUZZ_SECONDS on a copy of its seeds so
#     that runs never write into the source tree. Sources under test are listed in SOURCES
#     so that they, too, carry the sanitizers.
include(GoogleTest)
set(RTCE_FUZZ_SECONDS 15 CACHE STRING "Seconds each fuzzer runs under CTest")
set(RTCE_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND RTCE_FUZZERS)
  set(RTCE_CAN_FUZZ ON)
else()
  set(RTCE_CAN_FUZZ OFF)
  message(STATUS "Fuzzers skipped: they need clang (configure with -DCMAKE_CXX_COMPILER=clang++)")
endif()

function(rtce_add_gtest target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;INCLUDES;DEFINITIONS;PROPERTIES" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest_main)
  if(ARG_INCLUDES)
    target_include_directories(${target} PRIVATE ${ARG_INCLUDES})
  endif()
  if(ARG_DEFINITIONS)
    target_compile_definitions(${target} PRIVATE ${ARG_DEFINITIONS})
  endif()
  target_compile_options(${target} PRIVATE ${RTCE_WARNINGS})
  if(ARG_PROPERTIES)
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES ${ARG_PROPERTIES})
  else()
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()

function(rtce_add_fuzzer name)
  if(NOT RTCE_CAN_FUZZ)
    return()
  endif()
  cmake_parse_arguments(ARG "" "CORPUS;MAX_LEN" "SOURCES;LIBS;INCLUDES" ${ARGN})
  set(target fuzz_${name})
  add_executable(${target} ${ARG_SOURCES})
  target_include_directories(${target} PRIVATE ${ARG_INCLUDES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS})
  target_compile_options(${target} PRIVATE ${RTCE_FUZZ_FLAGS} ${RTCE_WARNINGS})
  target_link_options(${target} PRIVATE ${RTCE_FUZZ_FLAGS})
  add_test(NAME ${target}
           COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\" && cp \"$2\"/* \"$1\"/ && exec \"$3\" -max_total_time=$4 -max_len=$5 -print_final_stats=1 \"$1\""
                   fuzz ${CMAKE_CURRENT_BINARY_DIR}/corpus-${name} ${ARG_CORPUS} $<TARGET_FILE:${target}>
                   ${RTCE_FUZZ_SECONDS} ${ARG_MAX_LEN})
  set_tests_properties(${target} PROPERTIES TIMEOUT 120 LABELS fuzz)
endfunction()
