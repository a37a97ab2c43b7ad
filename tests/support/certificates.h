#pragma once
// Test certificates made with the openssl command: a CA, a server certificate for localhost and
// 127.0.0.1 signed by it, a client certificate signed by it, and an unrelated CA.

#include <string>

namespace streamcar::testing {

struct TestCertificates {
  std::string ca_cert;
  std::string server_cert, server_key;
  std::string client_cert, client_key;
  std::string other_ca_cert;  // trusts nothing the server presents
};

// Writes them into `dir`; throws when openssl fails.
TestCertificates MakeTestCertificates(const std::string& dir);

}  // namespace streamcar::testing
