# Writes one Lua script as a C++ header (cmake -P; streamcar_embed_lua in CMakeLists.txt runs it
# at build time):
#   -DINPUT=<file.lua> -DOUTPUT=<file.lua.h> -DNAMESPACE=streamcar::redis::lua -DSYMBOL=kRetryClaim
# The header holds the file's bytes unchanged, as a string literal of \x escapes: Redis names a
# script by the SHA1 of its text (EVALSHA), so not a byte may move between the .lua file and what
# is sent, and escapes keep any byte (a quote, a backslash, UTF-8 in a comment) from meaning
# anything to the compiler.
cmake_minimum_required(VERSION 3.22)

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
# Thirty-two bytes a line: one literal each, which the compiler joins.
string(REPEAT "[0-9a-f]" 64 line_pattern)
string(REGEX REPLACE "(${line_pattern})" "\\1;" lines "${hex}")
set(literal "")
foreach(line IN LISTS lines)
  if(NOT line STREQUAL "")
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" line "${line}")
    string(APPEND literal "\n    \"${line}\"")
  endif()
endforeach()
if(literal STREQUAL "")
  set(literal " \"\"")
endif()

cmake_path(GET INPUT FILENAME name)
set(content "#pragma once
// Generated from ${name} by sidecar/embed_lua.cmake: the script's ${size} bytes, unchanged.

#include <string_view>

namespace ${NAMESPACE} {

inline constexpr std::string_view ${SYMBOL}(${literal},
    ${size});

}  // namespace ${NAMESPACE}
")
# Rewritten only when the script changed, so that an unchanged script rebuilds nothing.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" previous)
  if(previous STREQUAL content)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${content}")
