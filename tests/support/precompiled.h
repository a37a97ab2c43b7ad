// The headers that most test sources include, compiled once per build (tests/CMakeLists.txt,
// STREAMCAR_TEST_PCH) instead of once per source: gtest and the standard library are most of a
// test object's compile time at -O0. Only system headers belong here: a project header would
// recompile every suite whenever it changed.
#pragma once

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
