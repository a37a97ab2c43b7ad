#include "tests/support/certificates.h"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace streamcar::testing {
namespace {

void Run(const std::string& command) {
  if (std::system((command + " >/dev/null 2>&1").c_str()) != 0) {
    throw std::runtime_error("certificate generation failed: " + command);
  }
}

// A P-256 key and a certificate for `subject` signed by the CA in `dir` (or self-signed).
void Issue(const std::string& dir, const std::string& name, const std::string& subject,
           const std::string& san, const std::string& ca) {
  const std::string key = dir + "/" + name + ".key";
  const std::string cert = dir + "/" + name + ".crt";
  Run("openssl ecparam -name prime256v1 -genkey -noout -out " + key);
  if (ca.empty()) {
    Run("openssl req -x509 -new -key " + key + " -out " + cert + " -days 2 -subj /CN=" + subject);
    return;
  }
  const std::string ext = dir + "/" + name + ".ext";
  std::ofstream(ext) << "subjectAltName=" << san << "\nextendedKeyUsage=serverAuth,clientAuth\n";
  Run("openssl req -new -key " + key + " -out " + dir + "/" + name + ".csr -subj /CN=" + subject);
  Run("openssl x509 -req -in " + dir + "/" + name + ".csr -CA " + dir + "/" + ca + ".crt -CAkey " +
      dir + "/" + ca + ".key -CAcreateserial -out " + cert + " -days 2 -extfile " + ext);
}

}  // namespace

TestCertificates MakeTestCertificates(const std::string& dir) {
  Issue(dir, "ca", "streamcar-test-ca", "", "");
  Issue(dir, "other-ca", "someone-else", "", "");
  Issue(dir, "server", "localhost", "DNS:localhost,IP:127.0.0.1", "ca");
  Issue(dir, "client", "streamcar-client", "DNS:streamcar-client", "ca");
  return {dir + "/ca.crt",     dir + "/server.crt", dir + "/server.key",
          dir + "/client.crt", dir + "/client.key", dir + "/other-ca.crt"};
}

}  // namespace streamcar::testing
