// Authentication of every connection of a tree (docs/security.md).
//
// Each network has a secret of 32 random bytes, chosen by the front-end and given to
// every process it starts in the environment (CANOPY_SECRET, hex) or, for a process
// started on another host through a launcher, on its standard input
// (CANOPY_SECRET_ON_STDIN=1), never on a command line; attached back-ends read it
// from the attach file, which the front-end creates readable by its owner only.
//
// The handshake, on every connection (plain or striped, launch, adoption, attach).
// The connecting side speaks first (the listener tells plain from striped
// connections by their first bytes):
//   connector -> Hello {fields, nonce C}
//   acceptor  -> Challenge {nonce A, proof = HMAC(secret, "canopy-challenge" C A acceptor-rank)}
//   connector -> HelloProof {proof = HMAC(secret, "canopy-hello" A C fields)}
// A fresh A on every connection makes a captured HelloProof useless on any other;
// the connector's fresh C does the same for the acceptor's proof, which it checks
// before it proves anything itself. Both sides prove they know the secret without
// sending it; the labels keep either proof from ever serving as the other.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <capnp/common.h>

#include "canopy/result.h"
#include "canopy/topology.h"
#include "canopy.capnp.h"
#include "transport/stripe_wire.h"

namespace canopy::core {

inline constexpr std::size_t kSecretBytes = 32;
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;  // HMAC-SHA256

using Secret = std::array<std::uint8_t, kSecretBytes>;
using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;

inline constexpr const char* kEnvSecret = "CANOPY_SECRET";                  // 64 hex digits
inline constexpr const char* kEnvSecretOnStdin = "CANOPY_SECRET_ON_STDIN";  // "1": one hex line on stdin

// From the operating system's random source (getrandom()); aborts the process if it
// has none, as nothing here could be trusted without one.
Secret new_secret();
Nonce new_nonce();

std::string to_hex(std::span<const std::uint8_t> bytes);
// Exactly 64 hex digits; the error says what is wrong, never echoing the text.
Result<Secret> parse_secret(std::string_view hex);
// The secret the launching parent passed: CANOPY_SECRET, or, with
// CANOPY_SECRET_ON_STDIN=1, the first line of standard input (waited for up to
// `wait`). The error names the variables to set.
Result<Secret> secret_from_environment(std::chrono::milliseconds wait = std::chrono::seconds(10));
// Removes CANOPY_SECRET from this process's environment and wipes its text: unsetenv
// alone leaves the text where /proc/PID/environ still shows it (the kernel reads the
// block the process started with). Not thread-safe, as setenv is not: call it before
// starting threads.
void erase_secret_from_environment();

// The connector's proof over the acceptor's nonce, the hello's nonce and its fields
// (`pid` is left out, being only for logs).
Proof hello_proof(const Secret& secret, capnp::Data::Reader challenge, wire::Hello::Reader hello);
// The acceptor's proof over the hello's nonce, its own nonce and its rank.
Proof challenge_proof(const Secret& secret, capnp::Data::Reader hello_nonce, capnp::Data::Reader challenge,
                      Rank acceptor);
// The MAC that authenticates every path of a striped link (transport/stripe_wire.h):
// HMAC-SHA256 under the secret. The transport layer has no key of its own.
transport::PathMac path_mac(const Secret& secret);

// Constant-time comparison; false for a proof of the wrong size.
bool proof_matches(const Proof& expected, capnp::Data::Reader got);

inline capnp::Data::Reader as_data(std::span<const std::uint8_t> bytes) {
  return capnp::Data::Reader(bytes.data(), bytes.size());
}

}  // namespace canopy::core
