#include "tests/server/test_pki.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace convtune::testing {
namespace {

// Runs `command` in a shell, its output in `log`; false (with the output in
// *error) if it fails.
bool Run(const std::string& command, const std::string& log,
         std::string* error) {
  const std::string full = absl::StrCat(command, " > ", log, " 2>&1");
  if (std::system(full.c_str()) == 0) return true;
  *error = absl::StrCat(command, ": ", ReadText(log));
  return false;
}

// A P-256 key and a certificate signing request for `cn`.
std::string NewKeyAndRequest(const std::string& key, const std::string& csr,
                             const std::string& cn) {
  return absl::StrCat(
      "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-nodes -keyout ",
      key, " -out ", csr, " -subj /CN=", cn);
}

// Signs `csr` with the CA `ca` (ca.pem / ca.key) into `cert`, with the
// extensions in `ext`.
std::string Sign(const std::string& dir, const std::string& ca,
                 const std::string& csr, const std::string& cert,
                 const std::string& ext) {
  return absl::StrCat(
      "openssl x509 -req -in ", csr, " -CA ", dir, "/", ca, ".pem -CAkey ", dir,
      "/", ca, ".key -CAcreateserial -out ", cert, " -days 2 -extfile ", ext);
}

}  // namespace

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool MakeTestPki(const std::string& dir,
                 const std::vector<std::string>& clients, TestPki* pki,
                 std::string* error) {
  pki->dir = dir;
  const std::string log = dir + "/openssl.log";
  auto run = [&](const std::string& command) {
    return Run(command, log, error);
  };
  const std::string server_ext = dir + "/server.ext";
  const std::string client_ext = dir + "/client.ext";
  std::ofstream(server_ext) << "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                               "extendedKeyUsage=serverAuth\n";
  std::ofstream(client_ext) << "extendedKeyUsage=clientAuth\n";
  for (const char* ca : {"ca", "rogue-ca"}) {
    if (!run(absl::StrCat("openssl req -x509 -newkey ec -pkeyopt "
                          "ec_paramgen_curve:prime256v1 -nodes -keyout ",
                          dir, "/", ca, ".key -out ", dir, "/", ca,
                          ".pem -days 2 -subj /CN=convtune-test-", ca))) {
      return false;
    }
  }
  if (!run(NewKeyAndRequest(pki->server_key(), dir + "/server.csr",
                            "localhost")) ||
      !run(Sign(dir, "ca", dir + "/server.csr", pki->server_cert(),
                server_ext))) {
    return false;
  }
  for (const std::string& name : clients) {
    const std::string csr = dir + "/client-" + name + ".csr";
    if (!run(NewKeyAndRequest(pki->client_key(name), csr, name)) ||
        !run(Sign(dir, "ca", csr, pki->client_cert(name), client_ext))) {
      return false;
    }
  }
  const std::string csr = dir + "/client-rogue.csr";
  return run(NewKeyAndRequest(pki->client_key("rogue"), csr, "rogue")) &&
         run(Sign(dir, "rogue-ca", csr, pki->client_cert("rogue"), client_ext));
}

}  // namespace convtune::testing
