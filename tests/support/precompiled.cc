// The object that builds the test suites' precompiled header (tests/CMakeLists.txt).
