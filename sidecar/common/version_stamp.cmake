# Writes version.h (cmake -P): the version, the source revision and the build date.
#   -DTEMPLATE=version.h.in -DOUTPUT=.../version.h -DSOURCE_DIR=<checkout> -DVERSION=0.1.0
#   -DREVISION=<sha or empty>
# The revision is REVISION when given (the image build and scripts/release pass it), else
# `git rev-parse --short=12 HEAD` of SOURCE_DIR, else "unknown". The date is SOURCE_DATE_EPOCH's
# when that is set (reproducible builds: string(TIMESTAMP) honours it), else the time this
# revision was first stamped: a build of the same revision keeps the date it has, so the file's
# content, and with it every object that includes it, stays as it is.
# configure_file writes OUTPUT only when its content changes.
cmake_minimum_required(VERSION 3.22)

set(STREAMCAR_VERSION "${VERSION}")
set(STREAMCAR_REVISION "${REVISION}")
if(STREAMCAR_REVISION STREQUAL "")
  set(STREAMCAR_REVISION "unknown")
  find_program(GIT_EXECUTABLE git)
  if(GIT_EXECUTABLE AND EXISTS "${SOURCE_DIR}/.git")
    execute_process(
      COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
      OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE failed ERROR_QUIET)
    if(NOT failed AND head MATCHES "^[0-9a-f]+$")
      set(STREAMCAR_REVISION "${head}")
    endif()
  endif()
endif()
if(NOT STREAMCAR_REVISION MATCHES "^[A-Za-z0-9._+-]+$")
  message(FATAL_ERROR "STREAMCAR_REVISION must be letters, digits and ._+- (got '${STREAMCAR_REVISION}')")
endif()

string(TIMESTAMP STREAMCAR_BUILD_DATE "%Y-%m-%dT%H:%M:%SZ" UTC)
if("$ENV{SOURCE_DATE_EPOCH}" STREQUAL "" AND EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" stamped)
  if(stamped MATCHES "kVersion = \"([^\"]*)\".*kRevision = \"([^\"]*)\".*kBuildDate = \"([^\"]*)\"")
    if(CMAKE_MATCH_1 STREQUAL STREAMCAR_VERSION AND CMAKE_MATCH_2 STREQUAL STREAMCAR_REVISION)
      set(STREAMCAR_BUILD_DATE "${CMAKE_MATCH_3}")
    endif()
  endif()
endif()

configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
