# Build-wide checking options (docs/testing.md). Each applies to every target of the build,
# libraries included: a sanitizer only sees what was compiled with it, and TSan in particular
# reports false races on memory touched by uninstrumented code.
#
#   ORRERY_SANITIZE=address,undefined   ASan + UBSan; any UBSan report aborts the process
#   ORRERY_SANITIZE=thread              TSan (tests/sanitizers/tsan.supp lists what it cannot see)
#   ORRERY_THREAD_SAFETY=ON             clang's -Wthread-safety analysis as errors
#                                       (annotations: core/internal/thread_annotations.h)
#   ORRERY_BUILD_FUZZERS=ON             libFuzzer targets in fuzz/ (clang only); every library
#                                       gets coverage instrumentation (-fsanitize=fuzzer-no-link)
set(ORRERY_SANITIZE "" CACHE STRING "Sanitizers for the whole build: address,undefined | thread | empty")
option(ORRERY_THREAD_SAFETY "Clang thread-safety analysis (-Wthread-safety) as errors" OFF)
option(ORRERY_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)

if(ORRERY_SANITIZE)
  string(REPLACE "," ";" _orrery_sanitizers "${ORRERY_SANITIZE}")
  foreach(s IN LISTS _orrery_sanitizers)
    if(NOT s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "ORRERY_SANITIZE: unknown sanitizer '${s}' (address, undefined, thread, leak)")
    endif()
  endforeach()
  if("thread" IN_LIST _orrery_sanitizers AND "address" IN_LIST _orrery_sanitizers)
    message(FATAL_ERROR "ORRERY_SANITIZE: thread and address cannot be combined; use two builds")
  endif()
  set(_orrery_san_flags -fsanitize=${ORRERY_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _orrery_sanitizers)
    # A UBSan report is a failure, not a line in a log nobody reads.
    list(APPEND _orrery_san_flags -fno-sanitize-recover=undefined)
    # Without UBSan's check of calls through function pointers: clang 14 cannot emit a C++20
    # coroutine (orrery::Stream, orrery::Async) with it and coverage instrumentation together
    # ("Cannot represent a difference across sections").
    if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      list(APPEND _orrery_san_flags -fno-sanitize=function)
    endif()
  endif()
  add_compile_options(${_orrery_san_flags})
  add_link_options(-fsanitize=${ORRERY_SANITIZE})
  message(STATUS "Orrery: sanitizers ${ORRERY_SANITIZE} (${CMAKE_CXX_COMPILER_ID})")
endif()

# Instrumented tests run several times slower; the test helpers multiply their TIMEOUTs.
set(ORRERY_TEST_TIMEOUT_SCALE 1)
if(ORRERY_SANITIZE OR ORRERY_BUILD_FUZZERS)
  set(ORRERY_TEST_TIMEOUT_SCALE 3)
endif()

if(ORRERY_THREAD_SAFETY)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ORRERY_THREAD_SAFETY needs clang (CXX=clang++); ${CMAKE_CXX_COMPILER_ID} has no -Wthread-safety")
  endif()
  add_compile_options(-Wthread-safety -Werror=thread-safety)
endif()

if(ORRERY_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ORRERY_BUILD_FUZZERS needs clang (CXX=clang++): libFuzzer ships with it")
  endif()
  # Coverage feedback from the libraries the targets call into, not only from the targets.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
