// The handshake's proofs and the secret's ways into a process (core/auth.h,
// docs/security.md), and a child's standard input as ChildProcess::spawn gives it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <capnp/message.h>

#include "core/auth.h"
#include "transport/random.h"
#include "core/process.h"

namespace {

using namespace canopy::core;
using namespace std::chrono_literals;

struct HelloMessage {
  capnp::MallocMessageBuilder builder;
  canopy::wire::Hello::Builder hello = builder.initRoot<canopy::wire::Hello>();
  Nonce nonce = new_nonce();
  HelloMessage() {
    hello.setProtocolVersion(canopy::wire::PROTOCOL_VERSION);
    hello.setNetworkId(0x1234);
    hello.setRole(canopy::wire::Role::BACKEND);
    hello.setRank(5);
    hello.setIncarnation(2);
    hello.setAdopt(true);
    hello.setEpoch(3);
    hello.setPid(77);
    hello.setNonce(as_data(nonce));
  }
};

// Any change to what the hello says, to either nonce or to the secret gives another
// proof: a proof cannot be moved to another hello, connection or tree.
TEST(Auth, TheHelloProofCoversEveryFieldBothNoncesAndTheSecret) {
  const Secret secret = new_secret();
  const Nonce challenge = new_nonce();
  HelloMessage m;
  const Proof base = hello_proof(secret, as_data(challenge), m.hello.asReader());
  EXPECT_EQ(base, hello_proof(secret, as_data(challenge), m.hello.asReader())) << "not deterministic";
  EXPECT_TRUE(proof_matches(base, as_data(base)));

  auto differs = [&](const char* what, auto change) {
    HelloMessage other;
    other.hello.setNonce(as_data(m.nonce));
    change(other.hello);
    EXPECT_NE(base, hello_proof(secret, as_data(challenge), other.hello.asReader())) << what;
  };
  differs("version", [](auto h) { h.setProtocolVersion(h.getProtocolVersion() + 1); });
  differs("network id", [](auto h) { h.setNetworkId(0x1235); });
  differs("role", [](auto h) { h.setRole(canopy::wire::Role::COMMNODE); });
  differs("rank", [](auto h) { h.setRank(6); });
  differs("incarnation", [](auto h) { h.setIncarnation(3); });
  differs("adopt", [](auto h) { h.setAdopt(false); });
  differs("epoch", [](auto h) { h.setEpoch(4); });
  differs("hello nonce", [](auto h) { h.setNonce(as_data(new_nonce())); });
  {
    HelloMessage same;
    same.hello.setNonce(as_data(m.nonce));
    same.hello.setPid(78);  // for logs only
    EXPECT_EQ(base, hello_proof(secret, as_data(challenge), same.hello.asReader())) << "pid is not covered";
  }
  EXPECT_NE(base, hello_proof(secret, as_data(new_nonce()), m.hello.asReader())) << "challenge";
  EXPECT_NE(base, hello_proof(new_secret(), as_data(challenge), m.hello.asReader())) << "secret";
}

TEST(Auth, TheChallengesProofIsNotAHelloProofAndCoversTheAcceptorsRank) {
  const Secret secret = new_secret();
  const Nonce a = new_nonce(), c = new_nonce();
  const Proof accepted = challenge_proof(secret, as_data(c), as_data(a), 1000001);
  EXPECT_NE(accepted, challenge_proof(secret, as_data(c), as_data(a), 1000002));
  EXPECT_NE(accepted, challenge_proof(secret, as_data(a), as_data(c), 1000001)) << "nonces swapped";
  EXPECT_NE(accepted, challenge_proof(new_secret(), as_data(c), as_data(a), 1000001));
}

TEST(Auth, AProofOfTheWrongSizeNeverMatches) {
  const Proof p = new_nonce();
  EXPECT_FALSE(proof_matches(p, as_data(std::span(p).first(31))));
  EXPECT_FALSE(proof_matches(p, capnp::Data::Reader()));
  Proof q = p;
  q[31] ^= 1;
  EXPECT_FALSE(proof_matches(p, as_data(q)));
}

TEST(Auth, SecretsAndNoncesAreFreshAndTheHexRoundTrips) {
  EXPECT_NE(new_secret(), new_secret());
  EXPECT_NE(new_nonce(), new_nonce());
  const Secret s = new_secret();
  const std::string hex = to_hex(s);
  ASSERT_EQ(hex.size(), 64u);
  auto back = parse_secret(hex);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, s);
  std::string upper = hex;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(ch));
  EXPECT_TRUE(parse_secret(upper));
  EXPECT_FALSE(parse_secret(hex.substr(1)));
  EXPECT_FALSE(parse_secret(hex + "0"));
  EXPECT_EQ(parse_secret(std::string(64, 'z')).error(), "a network secret holds hex digits only");
}

// Sets or unsets the secret variables for one test, and puts them back.
class SecretEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv(kEnvSecret);
    unsetenv(kEnvSecretOnStdin);
  }
  void TearDown() override {
    unsetenv(kEnvSecret);
    unsetenv(kEnvSecretOnStdin);
    if (saved_stdin_ >= 0) {
      dup2(saved_stdin_, STDIN_FILENO);
      close(saved_stdin_);
    }
  }
  // Standard input becomes a pipe holding `text` (its write end closed if `close`).
  void stdin_from(const std::string& text, bool close_it = true) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    saved_stdin_ = dup(STDIN_FILENO);
    ASSERT_EQ(write(p[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    dup2(p[0], STDIN_FILENO);
    close(p[0]);
    if (close_it) {
      close(p[1]);
    } else {
      writer_ = p[1];
    }
  }
  int saved_stdin_ = -1;
  int writer_ = -1;
};

TEST_F(SecretEnvironment, FromTheVariable) {
  const Secret s = new_secret();
  setenv(kEnvSecret, to_hex(s).c_str(), 1);
  auto got = secret_from_environment();
  ASSERT_TRUE(got) << got.error();
  EXPECT_EQ(*got, s);
  setenv(kEnvSecret, "12", 1);
  EXPECT_EQ(secret_from_environment().error(), "CANOPY_SECRET: a network secret is 64 hex digits, not 2 characters");
}

TEST_F(SecretEnvironment, NeitherSetNamesBoth) {
  auto got = secret_from_environment();
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().find("neither CANOPY_SECRET nor CANOPY_SECRET_ON_STDIN=1 is set"), std::string::npos)
      << got.error();
}

// One line is taken from standard input, nothing after it.
TEST_F(SecretEnvironment, FromStandardInputOneLineOnly) {
  const Secret s = new_secret();
  stdin_from(to_hex(s) + "\nthe program's own input\n");
  setenv(kEnvSecretOnStdin, "1", 1);
  auto got = secret_from_environment();
  ASSERT_TRUE(got) << got.error();
  EXPECT_EQ(*got, s);
  char rest[64] = {};
  const ssize_t n = read(STDIN_FILENO, rest, sizeof rest - 1);
  EXPECT_EQ(std::string(rest, n > 0 ? n : 0), "the program's own input\n");
}

TEST_F(SecretEnvironment, FromStandardInputBoundedInTime) {
  stdin_from("", false);  // open, silent
  setenv(kEnvSecretOnStdin, "1", 1);
  auto got = secret_from_environment(100ms);
  close(writer_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), "CANOPY_SECRET_ON_STDIN=1, but no secret arrived on standard input within 100 ms");
}

// What ChildProcess::spawn puts on a child's standard input is all it reads there.
TEST(ChildProcessInput, TheChildReadsExactlyTheGivenInput) {
  boost::asio::io_context io;
  auto child = ChildProcess::spawn(io, {"/bin/sh", "-c", "read a; read b && exit 3; test \"$a\" = hello"}, {},
                                   "hello\n");
  ASSERT_TRUE(child) << child.error();
  int status = -1;
  (*child)->watch([&](int s) { status = s; });
  io.run_for(10s);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child read something else, or more";
  // A bulk launch's table (docs/launch.md) is read whole, up to 60,000 bytes; more is
  // refused.
  auto big = ChildProcess::spawn(io, {"/bin/sh", "-c", "test \"$(wc -c)\" -eq 50000"}, {}, std::string(50000, 'x'));
  ASSERT_TRUE(big) << big.error();
  status = -1;
  (*big)->watch([&](int s) { status = s; });
  io.restart();
  io.run_for(10s);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child did not read all 50,000 bytes";
  EXPECT_FALSE(ChildProcess::spawn(io, {"/bin/true"}, {}, std::string(60001, 'x')));
}

}  // namespace

// Secrets and nonces come from the kernel (transport/random.h), not libsodium's
// generator: two draws differ, and none is left zero.
TEST(Auth, SecretsAndNoncesAreFreshRandomBytes) {
  const Secret a = new_secret();
  const Secret b = new_secret();
  EXPECT_NE(a, b);
  EXPECT_NE(a, Secret{});
  EXPECT_NE(new_nonce(), new_nonce());
  EXPECT_NE(canopy::transport::random_u64(), canopy::transport::random_u64());
}
