// FUZZ_CHECK: an invariant of a fuzz target. A failure prints the condition
// (and FUZZ_CHECK_MSG a message) and traps, so libFuzzer keeps the input as a
// crash.
#ifndef BERTH_TESTS_FUZZ_FUZZ_CHECK_H_
#define BERTH_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <string>

#define FUZZ_CHECK_MSG(cond, msg)                                                          \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n%s\n", __FILE__, __LINE__, #cond, \
                   std::string(msg).c_str());                                              \
      __builtin_trap();                                                                    \
    }                                                                                      \
  } while (0)

#define FUZZ_CHECK(cond) FUZZ_CHECK_MSG(cond, "")

#endif  // BERTH_TESTS_FUZZ_FUZZ_CHECK_H_
