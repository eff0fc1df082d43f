# rtce_testing.cmake — the shapes every test target here takes, written once:
#   rtce_add_gtest(<target> SOURCES ... [LIBS ...] [INCLUDES ...] [DEFINITIONS ...]
#                  [PROPERTIES <ctest properties>...])
#     a GoogleTest executable with the project's warnings, its cases discovered by CTest;
#   rtce_add_fuzzer(<name> SOURCES ... CORPUS <seed dir> MAX_LEN <bytes> [LIBS ...] [INCLUDES ...])
#     fuzz_<name>, a libFuzzer target built with ASan + UBSan (clang only; skipped with a
#     message otherwise), which CTest runs for RTCE_FUZZ_SECONDS on a copy of its seeds so
#     that runs never write into the source tree. Sources under test are listed in SOURCES
#     so that they, too, carry the sanitizers;
#   rtce_add_python_test(<name> <script> [ARGS ...] TIMEOUT <s> LABELS ... [PROPERTIES ...])
#     CTest <name>: Debian's /usr/bin/python3 running <script> (relative to the current source
#     folder) with ARGS, its TIMEOUT and LABELS (a list: LABELS integration netns), and any
#     other ctest properties (SKIP_RETURN_CODE 77, RUN_SERIAL TRUE, ...) from PROPERTIES;
#   rtce_sanitized_objects(<out-var> SOURCES ... [LIBS ...] [INCLUDES ...])
#     one object library per product source, compiled once with RTCE_SANITIZED_FLAGS (ASan +
#     UBSan, and libFuzzer's coverage without its main under clang), shared by every fuzzer
#     and sanitized test that links it; <out-var> names them. rtce_add_fuzzer does this with
#     every source of SOURCES outside tests/: a source that five fuzzers test is compiled once,
#     not five times, and a target still builds only the sources it lists.
include(GoogleTest)
set(RTCE_FUZZ_SECONDS 15 CACHE STRING "Seconds each fuzzer runs under CTest")
set(RTCE_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND RTCE_FUZZERS)
  set(RTCE_CAN_FUZZ ON)
else()
  set(RTCE_CAN_FUZZ OFF)
  message(STATUS "Fuzzers skipped: they need clang (configure with -DCMAKE_CXX_COMPILER=clang++)")
endif()

set(RTCE_SANITIZED_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
if(RTCE_CAN_FUZZ)
  list(PREPEND RTCE_SANITIZED_FLAGS -fsanitize=fuzzer-no-link)
endif()

function(rtce_sanitized_objects out)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  set(targets)
  foreach(src ${ARG_SOURCES})
    get_filename_component(src ${src} ABSOLUTE)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
    string(MAKE_C_IDENTIFIER "rtce_sanitized_${rel}" lib)
    if(NOT TARGET ${lib})
      add_library(${lib} OBJECT ${src})
      target_compile_options(${lib} PRIVATE ${RTCE_SANITIZED_FLAGS} ${RTCE_WARNINGS})
    endif()
    if(ARG_INCLUDES)
      target_include_directories(${lib} PRIVATE ${ARG_INCLUDES})
    endif()
    if(ARG_LIBS)
      target_link_libraries(${lib} PUBLIC ${ARG_LIBS})
    endif()
    list(APPEND targets ${lib})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(rtce_add_python_test name script)
  cmake_parse_arguments(ARG "" "TIMEOUT" "ARGS;LABELS;PROPERTIES" ${ARGN})
  add_test(NAME ${name} COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/${script} ${ARG_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}" ${ARG_PROPERTIES})
endfunction()

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
  set(own)
  set(under_test)
  foreach(src ${ARG_SOURCES})
    get_filename_component(src ${src} ABSOLUTE)
    string(FIND "${src}" "${PROJECT_SOURCE_DIR}/tests/" at)
    if(at EQUAL 0)
      list(APPEND own ${src})
    else()
      list(APPEND under_test ${src})
    endif()
  endforeach()
  add_executable(${target} ${own})
  target_include_directories(${target} PRIVATE ${ARG_INCLUDES})
  if(under_test)
    rtce_sanitized_objects(objects SOURCES ${under_test} INCLUDES ${ARG_INCLUDES} LIBS ${ARG_LIBS})
    target_link_libraries(${target} PRIVATE ${objects})
  endif()
  target_link_libraries(${target} PRIVATE ${ARG_LIBS})
  target_compile_options(${target} PRIVATE ${RTCE_FUZZ_FLAGS} ${RTCE_WARNINGS})
  target_link_options(${target} PRIVATE ${RTCE_FUZZ_FLAGS})
  add_test(NAME ${target}
           COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\" && cp \"$2\"/* \"$1\"/ && exec \"$3\" -max_total_time=$4 -max_len=$5 -print_final_stats=1 \"$1\""
                   fuzz ${CMAKE_CURRENT_BINARY_DIR}/corpus-${name} ${ARG_CORPUS} $<TARGET_FILE:${target}>
                   ${RTCE_FUZZ_SECONDS} ${ARG_MAX_LEN})
  set_tests_properties(${target} PROPERTIES TIMEOUT 120 LABELS fuzz)
endfunction()
