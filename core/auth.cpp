#include "core/auth.h"

#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

// Of libsodium, only HMAC-SHA-256 and crypto_verify_32: functions of their arguments
// alone, with one implementation each, chosen when libsodium was compiled. So no
// sodium_init(): its work is for the rest of the library (choosing among the
// implementations of other primitives by the CPU's features, seeding its random
// generator), and its CPUIDs are a trap to the hypervisor each on a virtual machine,
// a fortieth of a back-end's start-up CPU (docs/benchmarks.md, "A back-end's
// start"). Random bytes come from the kernel (transport/random.h), as libsodium's
// would.
#include <capnp/any.h>
#include <sodium.h>

#include "transport/random.h"

namespace canopy::core {

namespace {

template <std::size_t N>
std::array<std::uint8_t, N> random_bytes() {
  std::array<std::uint8_t, N> out;
  transport::random_fill(out.data(), out.size());  // the kernel's getrandom()
  return out;
}

// The bytes a proof is computed over: a label naming its purpose (so that a hello's
// proof can never serve as an acceptor's, or the reverse), then each part, every
// variable-length one preceded by its length, integers little-endian.
class Transcript {
 public:
  explicit Transcript(std::string_view label) { bytes(label.data(), label.size()); }
  void bytes(const void* data, std::size_t size) {
    u64(size);
    raw(data, size);
  }
  void data(capnp::Data::Reader d) { bytes(d.begin(), d.size()); }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  Proof sign(const Secret& secret) const {
    static_assert(kProofBytes == crypto_auth_hmacsha256_BYTES && kSecretBytes == crypto_auth_hmacsha256_KEYBYTES);
    Proof proof{};
    crypto_auth_hmacsha256(proof.data(), out_.data(), out_.size(), secret.data());
    return proof;
  }

 private:
  void raw(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    out_.insert(out_.end(), p, p + size);
  }
  std::vector<std::uint8_t> out_;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Secret new_secret() { return random_bytes<kSecretBytes>(); }
Nonce new_nonce() { return random_bytes<kNonceBytes>(); }

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::uint8_t b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

Result<Secret> parse_secret(std::string_view hex) {
  if (hex.size() != 2 * kSecretBytes) {
    return Error{"a network secret is " + std::to_string(2 * kSecretBytes) + " hex digits, not " +
                     std::to_string(hex.size()) + " characters",
                 ErrorKind::invalid_input};
  }
  Secret secret{};
  for (std::size_t i = 0; i < kSecretBytes; ++i) {
    const int hi = hex_digit(hex[2 * i]);
    const int lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return Error{"a network secret holds hex digits only", ErrorKind::invalid_input};
    secret[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return secret;
}

Result<Secret> secret_from_environment(std::chrono::milliseconds wait) {
  if (const char* hex = std::getenv(kEnvSecret); hex && *hex) {
    auto secret = parse_secret(hex);
    if (!secret) return Error{std::string(kEnvSecret) + ": " + secret.error(), ErrorKind::invalid_input};
    return secret;
  }
  const char* on_stdin = std::getenv(kEnvSecretOnStdin);
  if (!on_stdin || std::string_view(on_stdin) != "1") {
    return Error{std::string("neither ") + kEnvSecret + " nor " + kEnvSecretOnStdin +
                     "=1 is set: this program is part of a Canopy tree and must be started by a Canopy parent, "
                     "which passes the network's secret (docs/security.md)",
                 ErrorKind::invalid_input};
  }
  // One line, read a byte at a time so that nothing after it is taken from the
  // program's standard input.
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (line.size() <= 2 * kSecretBytes) {
    using std::chrono::duration_cast, std::chrono::milliseconds;
    const auto left = duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      return Error{std::string(kEnvSecretOnStdin) + "=1, but no secret arrived on standard input within " +
                       std::to_string(wait.count()) + " ms",
                   ErrorKind::invalid_input};
    }
    char c;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (c == '\n') break;
    line.push_back(c);
  }
  auto secret = parse_secret(line);
  if (!secret) return Error{"the secret on standard input: " + secret.error(), ErrorKind::invalid_input};
  return secret;
}

void erase_secret_from_environment() {
  const std::size_t name = std::strlen(kEnvSecret);
  std::vector<char*> texts;  // every copy: a variable can be in the block twice
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, kEnvSecret, name) == 0 && (*e)[name] == '=') texts.push_back(*e);
  }
  unsetenv(kEnvSecret);  // first: a wiped entry would no longer match the name
  for (char* text : texts) sodium_memzero(text, std::strlen(text));
}

Proof hello_proof(const Secret& secret, capnp::Data::Reader challenge, wire::Hello::Reader hello) {
  Transcript t("canopy-hello");
  t.data(challenge);
  t.data(hello.getNonce());
  t.u64(hello.getProtocolVersion());
  t.u64(hello.getNetworkId());
  t.u64(static_cast<std::uint64_t>(hello.getRole()));
  t.u64(hello.getRank());
  t.u64(hello.getIncarnation());
  t.u64(hello.getAdopt() ? 1 : 0);
  t.u64(hello.getEpoch());
  t.u64(hello.getStandby() ? 1 : 0);
  // An orphan's subtree and ancestors (protocol 15), in Cap'n Proto's canonical form:
  // an adopter grafts the subtree, so it is covered like every other field.
  if (hello.hasSubtree()) {
    const auto canonical = capnp::AnyStruct::Reader(hello.getSubtree()).canonicalize();
    t.bytes(canonical.begin(), canonical.size() * sizeof(capnp::word));
  } else {
    t.u64(0);
  }
  t.u64(hello.getAncestors().size());
  for (auto rank : hello.getAncestors()) t.u64(rank);
  return t.sign(secret);
}

Proof challenge_proof(const Secret& secret, capnp::Data::Reader hello_nonce, capnp::Data::Reader challenge,
                      Rank acceptor) {
  Transcript t("canopy-challenge");
  t.data(hello_nonce);
  t.data(challenge);
  t.u64(acceptor);
  return t.sign(secret);
}

transport::PathMac path_mac(const Secret& secret) {
  return [secret](std::span<const std::byte> input) {
    transport::PathTag tag;
    static_assert(sizeof(tag) == crypto_auth_hmacsha256_BYTES);
    crypto_auth_hmacsha256(reinterpret_cast<unsigned char*>(tag.data()),
                           reinterpret_cast<const unsigned char*>(input.data()), input.size(), secret.data());
    return tag;
  };
}

bool proof_matches(const Proof& expected, capnp::Data::Reader got) {
  return got.size() == expected.size() && crypto_verify_32(expected.data(), got.begin()) == 0;
}

}  // namespace canopy::core
