#pragma once
// Blocking socket I/O with deadlines for the API server's connection threads.

#include <string>
#include <string_view>

#include "sidecar/common/clock.h"

namespace streamcar::log {

enum class ReadResult { kData, kClosed, kTimeout };

// Appends what arrives (up to `limit` bytes in one call) to *in, waiting until `deadline`.
ReadResult ReadSome(int fd, std::string* in, size_t limit, SteadyTime deadline);

// Sends all of `data` by `deadline`; false when the peer is gone or too slow.
bool SendAll(int fd, std::string_view data, SteadyTime deadline);

// True when the peer closed its side or the connection failed (checked without waiting; bytes
// the peer sent meanwhile are read and dropped).
bool PeerGone(int fd);

// After an answer that ends the connection: half-close, then drain what the client still sends
// for up to `linger`, so the answer is not destroyed by a reset.
void CloseGracefully(int fd, Millis linger);

}  // namespace streamcar::log
