// The object that carries the test programs' precompiled header (tests/CMakeLists.txt,
// gradsync_test_pch); it has no code of its own.
