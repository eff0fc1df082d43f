// openssl_interop_test.cpp — our DTLS client against `openssl s_server -dtls1_2 -use_srtp`
// over loopback UDP: a stack with its own datagram BIO, MTU handling and key export. The
// server prints its exported EXTRACTOR-dtls_srtp material, which must equal the keys we
// split per RFC 5764 4.2.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fake_wall_clock.h"
#include "transceiver/dtls/dtls_transport.h"

extern char** environ;

namespace rtce {
namespace {

std::string hex(const std::vector<uint8_t>& bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

// A child process with its stdin held open (s_server stops at stdin EOF) and stdout piped.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, out[1], 2);
    posix_spawn_file_actions_addclose(&actions, in[1]);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    fcntl(stdout_, F_SETFL, O_NONBLOCK);
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    ::close(stdin_);
    ::close(stdout_);
  }
  bool running() const { return pid_ > 0; }
  // Everything printed so far.
  const std::string& output() {
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(stdout_, buffer, sizeof(buffer))) > 0) output_.append(buffer, static_cast<size_t>(n));
    return output_;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1;
  std::string output_;
};

bool wait_for(const std::function<bool()>& condition, Nanos timeout) {
  const Nanos deadline = monotonic_now() + timeout;
  while (!condition()) {
    if (monotonic_now() > deadline) return false;
    poll(nullptr, 0, 10);
  }
  return true;
}

TEST(OpenSslInterop, ClientHandshakesWithOpenSslServerAndKeysMatchItsExport) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0)
    GTEST_FAIL() << "no openssl command (scripts/install-deps.sh installs openssl)";
  auto dir = std::filesystem::temp_directory_path() / ("rtce_dtls_interop_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  std::string make_cert =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=s_server"
      " -days 1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(make_cert.c_str()), 0);
  auto server_identity = DtlsContext::load(cert, key);  // only for its fingerprint

  int sock = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr*>(&local), sizeof(local)), 0);
  // A free port for the server: bind one, release it, hand it over.
  int probe = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t server_len = sizeof(server);
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&server), sizeof(server)), 0);
  getsockname(probe, reinterpret_cast<sockaddr*>(&server), &server_len);
  ::close(probe);
  const std::string port = std::to_string(ntohs(server.sin_port));

  Child s_server({"openssl",
                  "s_server",
                  "-dtls1_2",
                  "-accept",
                  "127.0.0.1:" + port,
                  "-cert",
                  cert,
                  "-key",
                  key,
                  "-use_srtp",
                  "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80",
                  "-verify",
                  "1",
                  "-keymatexport",
                  "EXTRACTOR-dtls_srtp",
                  "-keymatexportlen",
                  "56",
                  "-naccept",
                  "1",
                  "-mtu",
                  "1200"});
  ASSERT_TRUE(s_server.running());
  ASSERT_TRUE(wait_for([&] { return s_server.output().find("ACCEPT") != std::string::npos; }, 10'000'000'000))
      << s_server.output();

  std::optional<SrtpKeys> keys;
  std::string failure;
  size_t largest = 0;
  DtlsTransport::Callbacks callbacks;
  callbacks.send = [&](std::span<const uint8_t> d) {
    largest = std::max(largest, d.size());
    sendto(sock, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&server), sizeof(server));
  };
  callbacks.on_connected = [&](const SrtpKeys& k) { keys = k; };
  callbacks.on_failed = [&](std::string_view reason) { failure = reason; };
  auto client_identity = DtlsContext::generate();
  DtlsTransport client(client_identity, DtlsTransport::Role::client,
                       server_identity->fingerprint_sha256_bytes(), callbacks);
  testing::set_fake_now(monotonic_now());
  client.start(monotonic_now());
  const bool done = wait_for(
      [&] {
        uint8_t buffer[2048];
        ssize_t n;
        while ((n = recv(sock, buffer, sizeof(buffer), MSG_DONTWAIT)) > 0) {
          testing::set_fake_now(monotonic_now());
          client.handle_datagram(std::span<const uint8_t>(buffer, static_cast<size_t>(n)), monotonic_now());
        }
        testing::set_fake_now(monotonic_now());
        client.on_timer(monotonic_now());
        return client.state() != DtlsTransport::State::connecting &&
               s_server.output().find("Keying material: ") != std::string::npos;
      },
      10'000'000'000);
  ::close(sock);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(done) << failure << "\n" << s_server.output();
  ASSERT_TRUE(keys) << failure;
  EXPECT_EQ(keys->profile, SrtpProfile::aead_aes_128_gcm);
  EXPECT_NE(s_server.output().find("SRTP_AEAD_AES_128_GCM"), std::string::npos) << s_server.output();
  EXPECT_LE(largest, 1200u);
  // RFC 5764 4.2: client key | server key | client salt | server salt.
  const auto& client_key_salt = keys->local_key_salt;
  const auto& server_key_salt = keys->remote_key_salt;
  std::vector<uint8_t> material(client_key_salt.begin(), client_key_salt.begin() + 16);
  material.insert(material.end(), server_key_salt.begin(), server_key_salt.begin() + 16);
  material.insert(material.end(), client_key_salt.begin() + 16, client_key_salt.end());
  material.insert(material.end(), server_key_salt.begin() + 16, server_key_salt.end());
  EXPECT_NE(s_server.output().find("Keying material: " + hex(material)), std::string::npos)
      << hex(material) << "\n"
      << s_server.output();
}

}  // namespace
}  // namespace rtce
