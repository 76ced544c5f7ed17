// Where this build's tree is: the source dir, the test data, the build dir.
//
// Contract: the absolute paths of the tree that built the tests, fixed at
// configure time. They are compiled into one translation unit
// (build_paths.cc) and nowhere else, so that every other object file is the
// same whichever folder the tree was cloned into, and a fresh clone's build
// hits the compile cache (docs/PERFORMANCE.md "Build and test times").
// The returned strings live for the whole program.
#pragma once

namespace npuprof::build_paths {

const char* SourceDir();    // the checkout (where CMakeLists.txt is)
const char* TestDataDir();  // SourceDir()/tests/data
const char* BinaryDir();    // the CMake build dir
const char* CmakeCommand();  // the cmake that configured the build
const char* SimDirFromBindir();  // the installed simulator, relative to the installed binary's dir

}  // namespace npuprof::build_paths
