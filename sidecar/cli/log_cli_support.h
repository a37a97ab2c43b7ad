#pragma once
// What `produce`, `read` and `tail` share (SPEC 10): the stream's settings from `streams:`, a
// Redis session, the archive of an archived stream, and how an entry is printed.

#include <memory>
#include <optional>
#include <string>

#include "sidecar/cli/args.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/config/config.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/redis/session.h"

namespace streamcar::cli {

// The settings of `name` under `streams:`; a stream not listed there gets the defaults (produce
// allowed, no max_len, no notify, no archive): the CLI is an operator's tool for any stream.
config::LogStream LogStreamOf(const config::Config& config, const std::string& name);

// How the log commands reach Redis (SPEC 8: every mode): the url's options, with the topology
// attached when redis.mode is not standalone and the deployment turns out to be a cluster or
// Sentinel (resolved once, within a few connect timeouts). On failure prints the error and sets
// *exit_code to 1 (2 for a configuration the servers refuse, such as a database on a cluster).
std::optional<redis::ConnectionOptions> LogRedisOptionsOrReport(const config::Config& config,
                                                                int* exit_code);

// A connected session (one attempt, connect_timeout) on `options`; on failure prints the error and
// sets *exit_code to 1.
std::unique_ptr<redis::Session> SessionOrReport(const redis::ConnectionOptions& options,
                                                redis::RedisHealth* health, int* exit_code);

// The archive of `stream` when it has archive: true (else null, *exit_code untouched); on
// failure to open it prints the error, sets *exit_code to 1 and returns null.
std::unique_ptr<log::ArchiveStore> ArchiveOrReport(const config::Config& config,
                                                   const config::LogStream& stream, int* exit_code);

// One line for people: "<id>  <RFC 3339 time of the id>  field=value ..."; names and values
// printable (control bytes and non-UTF-8 escaped), quoted when they hold a blank, a quote, an
// '=' or nothing.
std::string EntryLine(const StreamEntry& entry);

}  // namespace streamcar::cli
