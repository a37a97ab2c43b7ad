#pragma once
// The reason phrase of an HTTP status line (RFC 9110 section 15), for the admin server and the
// log API: one table, so both servers spell every status the same way.

namespace streamcar {

// "OK" for 200, ...; "Unknown" for a status neither server answers.
const char* HttpReasonPhrase(int status);

}  // namespace streamcar
