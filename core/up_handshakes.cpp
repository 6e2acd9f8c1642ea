#include "core/up_handshakes.h"

#include "core/auth.h"
#include "core/codec.h"
#include "core/log.h"

namespace canopy::core {

void UpHandshakes::begin(const std::shared_ptr<transport::Link>& link, std::uint32_t incarnation, bool adopt,
                         bool standby, std::optional<Rank> acceptor, const std::vector<Service*>& services,
                         const std::function<void(wire::Hello::Builder)>& fill) {
  auto message = std::make_unique<capnp::MallocMessageBuilder>();
  auto h = message->initRoot<wire::Hello>();
  init_hello(h, self_, incarnation);
  h.setAdopt(adopt);
  h.setStandby(standby);
  for (Service* service : services) service->fill_hello(h);
  if (fill) fill(h);
  h.setNonce(as_data(new_nonce()));
  Message hello(self_);
  hello.body().setHello(h.asReader());
  link->send(hello.builder());
  by_link_[link.get()] = Handshake{link, acceptor, std::move(message)};
}

bool UpHandshakes::on_message(const transport::Link* raw, wire::Message::Reader msg) {
  auto handshake = by_link_.find(raw);
  if (handshake == by_link_.end()) return true;
  auto link = handshake->second.link.lock();
  if (!link) {
    finish(handshake);
    return false;
  }
  auto body = msg.getBody();
  auto fail = [&](const std::string& why) {
    log().warn("closing the link to {}: {}", link->peer(), why);
    finish(handshake);
    link->close(why);
    return false;
  };
  if (body.isShutdown()) return true;
  if (!body.isChallenge()) return fail("it sent a message before proving it knows the network's secret");
  const Rank acceptor = msg.getSenderRank();
  if (handshake->second.acceptor && acceptor != *handshake->second.acceptor) {
    return fail("rank " + std::to_string(acceptor) + " answered for " + std::to_string(*handshake->second.acceptor));
  }
  auto hello = handshake->second.hello->getRoot<wire::Hello>().asReader();
  auto challenge = body.getChallenge();
  if (challenge.getNonce().size() != kNonceBytes ||
      !proof_matches(challenge_proof(self_.secret, hello.getNonce(), challenge.getNonce(), acceptor),
                     challenge.getProof())) {
    return fail("it could not prove it knows the network's secret (authentication failed)");
  }
  Message proof(self_);
  proof.body().initHelloProof().setProof(as_data(hello_proof(self_.secret, challenge.getNonce(), hello)));
  link->send(proof.builder());
  finish(handshake);
  return false;
}

void UpHandshakes::finish(ByLink::iterator handshake) {
  by_link_.erase(handshake);
  // Most processes make one handshake, with their parent: the table's buckets go
  // with it (104 bytes in every process).
  if (by_link_.empty()) ByLink().swap(by_link_);
}

}  // namespace canopy::core
