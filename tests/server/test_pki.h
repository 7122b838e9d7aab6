// Certificates for tests of convtuned's TLS listener, made with the openssl
// command line in a folder: a CA with a server certificate for localhost
// (and 127.0.0.1) and client certificates by name, and a second, unrelated
// CA with a client certificate of its own. Not thread-safe.
#ifndef CONVTUNE_TESTS_SERVER_TEST_PKI_H_
#define CONVTUNE_TESTS_SERVER_TEST_PKI_H_

#include <string>
#include <vector>

namespace convtune::testing {

struct TestPki {
  std::string dir;
  // ca.pem; server.pem and server.key (CN localhost).
  std::string ca() const { return dir + "/ca.pem"; }
  std::string server_cert() const { return dir + "/server.pem"; }
  std::string server_key() const { return dir + "/server.key"; }
  // client-NAME.pem and client-NAME.key, signed by ca.pem, CN NAME.
  std::string client_cert(const std::string& name) const {
    return dir + "/client-" + name + ".pem";
  }
  std::string client_key(const std::string& name) const {
    return dir + "/client-" + name + ".key";
  }
  // rogue-ca.pem, and client-rogue.pem / .key signed by it (CN rogue).
  std::string rogue_ca() const { return dir + "/rogue-ca.pem"; }
};

// Makes the certificates in `dir` (which must exist), with a client
// certificate for each of `clients`. False, with what failed in *error,
// when openssl is missing or fails.
bool MakeTestPki(const std::string& dir,
                 const std::vector<std::string>& clients, TestPki* pki,
                 std::string* error);

// The whole file, "" if it cannot be read.
std::string ReadText(const std::string& path);

}  // namespace convtune::testing

#endif  // CONVTUNE_TESTS_SERVER_TEST_PKI_H_
