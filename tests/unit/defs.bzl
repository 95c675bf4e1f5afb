"""berth_unit_tests: one cc_test per *_test.cc of the package, and their suite.

The Bazel side of CMake's berth_unit_test (the top CMakeLists.txt): each
test links the unit it names in `deps` and the shared test helpers.
`data` and `local_defines` map a test's name to what only it needs.
"""

def berth_unit_tests(deps, data = {}, local_defines = {}, unit_of = {}, tags = {}):
    """Declares the tests and the package's `unit_tests` suite.

    Args:
      deps: what every test of the package links.
      data: test name -> runfiles it reads.
      local_defines: test name -> defines it is compiled with.
      unit_of: test name -> the one library it tests, when the package's
        tests do not share one (it is added to `deps`).
      tags: test name -> its tags (e.g. "no-sandbox").
    """
    tests = [f[:-len(".cc")] for f in native.glob(["*_test.cc"])]
    for t in tests:
        native.cc_test(
            name = t,
            srcs = [t + ".cc"],
            data = data.get(t, []),
            local_defines = local_defines.get(t, []),
            tags = tags.get(t, []),
            deps = deps + ([unit_of[t]] if t in unit_of else []) + [
                "//tests/unit:unit_test_util",
                "//third_party:gtest_main",
            ],
        )
    native.test_suite(
        name = "unit_tests",
        tests = [":" + t for t in tests],
    )
