// StripedLink: a Link over several network paths (paper 002, LA-MPI).
//
// Each path is one TCP connection between one local and one remote address, e.g. one
// per NIC. The messages of the link form one byte stream in which every byte has a
// 64-bit sequence number; the stream is cut into fragments of at most
// `max_fragment_bytes`, each carrying its sequence range and a checksum, and the
// fragments go out on whichever paths have room, so one large message uses every
// path. The receiver verifies each fragment, drops duplicates, delivers bytes in
// order and acknowledges (LIRS, LIDS, plus the ranges it holds beyond a gap); the
// sender keeps fragments until they are acknowledged and resends them on a time-out
// (truncated exponential back-off), on a negative acknowledgement (checksum failure),
// or at once on another path when their path fails. A failed path is reconnected in
// the background by the connecting side and rejoins. The link counts as closed only
// when every path is gone and none came back within `link_timeout`, so the loss of
// a NIC is never taken for the loss of the peer. docs/striping.md has the details.
//
// Like every Link, a StripedLink belongs to the thread of its io_context.
#pragma once

#include <boost/asio.hpp>
#include <spdlog/logger.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "canopy/result.h"
#include "transport/backoff.h"
#include "transport/checksum.h"
#include "transport/frame.h"
#include "transport/link.h"
#include "transport/stripe_pacing.h"
#include "transport/stripe_receive.h"
#include "transport/stripe_send.h"
#include "transport/stripe_wire.h"

namespace canopy::transport {

namespace asio = boost::asio;

struct StripedOptions {
  // Checked on every fragment, end to end. Chosen by the connecting side; the
  // accepting side takes it (and `reliable`, `max_fragment_bytes`) from the hello.
  ChecksumKind checksum = ChecksumKind::crc32c;
  // On: acknowledgements drive retransmission on time-outs and on negative
  // acknowledgements, and a corrupt fragment is resent. Off: no time-outs and no
  // resending of corrupt fragments — a checksum failure closes the link — but a
  // failed path's unacknowledged bytes still go out again on the others, so
  // fail-over stays lossless (docs/striping.md, "Reliability off").
  bool reliable = true;
  // Negative acknowledgements: a receiver that drops a corrupt fragment asks for it
  // at once instead of waiting for the sender's time-out (the paper relies on the
  // time-out alone; with this off, so does the link).
  bool nack = true;
  std::size_t max_fragment_bytes = 64 * 1024;
  // Unacknowledged bytes over all paths; also bounds what the receiver holds.
  std::size_t max_unacked_bytes = 16u << 20;
  // At most this much goes into one write on one path, so that the other paths and
  // the acknowledgements get their turn.
  std::size_t max_write_bytes = 1u << 20;
  // Each path reads into a buffer of this size (at least two fragments). Larger reads
  // mean fewer system calls, but this is memory per path of every link; 1 MiB
  // measured no cheaper per byte than 256 KiB on loopback.
  std::size_t receive_buffer_bytes = 256u << 10;
  Backoff retransmit{std::chrono::milliseconds(200), std::chrono::milliseconds(5000), 2.0};
  Backoff reconnect{std::chrono::milliseconds(100), std::chrono::milliseconds(2000), 2.0};
  // The receiver acknowledges once this many new bytes are delivered, or after
  // `ack_delay` (a reply carrying the acknowledgement in its header makes it moot).
  std::size_t ack_every_bytes = 256u << 10;
  std::chrono::milliseconds ack_delay{1};
  // A path with nothing to send for `keepalive` sends an acknowledgement; one that
  // has heard nothing for `path_silence` is declared failed.
  std::chrono::milliseconds keepalive{500};
  std::chrono::milliseconds path_silence{3000};
  // Every path down for this long, none reconnected: the link is closed.
  std::chrono::milliseconds link_timeout{5000};
  // Every path was closed by the peer's end (end of file or reset: its process
  // exited, or its kernel closed its sockets) and none came back: closed sooner.
  std::chrono::milliseconds peer_closed_grace{500};
  // Path hello and reply (both sides); flushing on close().
  std::chrono::milliseconds hello_timeout{5000};
  // Authenticates every path (stripe_wire.h): both sides must have the same MAC
  // (a Canopy node passes HMAC-SHA256 under the network's secret), or both none.
  PathMac path_mac;
  // A StripedAcceptor holds at most this many connections that have not yet shown
  // whether they are a striped path or a plain connection; one more is closed at
  // once (docs/protocol.md, "Resource bounds").
  std::size_t max_pending = 1024;
  FrameLimits limits;
  // Where the link logs path state changes, what it went through when it closes, and
  // fault injection; and where a StripedAcceptor logs the connections it refuses (its
  // links take its logger). Null: nowhere. The transport layer has no logger of its
  // own: a Canopy node passes the process's, a test or tool whatever it wants.
  std::shared_ptr<spdlog::logger> log;

  // Fault injection (docs/striping.md): this fraction of fragment transmissions has
  // one bit flipped after its checksum was computed, in a copy (the kept fragment
  // stays intact, as after corruption on a bus). Deterministic for a given seed.
  double corrupt_fraction = 0.0;
  std::uint64_t fault_seed = 1;
};

// One path, as the connecting side sees it.
struct PathEndpoints {
  std::string local_address;   // bound before connecting ("" = let the kernel choose)
  std::string remote_address;  // numeric IPv4 or IPv6 address
  std::uint16_t remote_port = 0;
};

// Paths between two hosts' address lists: the i-th local with the i-th remote
// address when the lists are equally long (one path per NIC pair: rails), every
// combination otherwise.
std::vector<PathEndpoints> paths_between(const std::vector<std::string>& local,
                                         const std::vector<std::string>& remote, std::uint16_t port);

enum class PathState : std::uint8_t {
  connecting,  // connecting side: TCP connect and hello under way
  live,        // carrying fragments
  suspect,     // a fragment timed out on it: no new fragments until it hears from the peer
  down,        // failed; reconnecting (connecting side) or waiting for the peer to (accepting side)
  closed,      // the link is closed
};
std::string_view to_string(PathState state);

struct PathStats {
  std::string local;              // address:port of this end
  std::string remote;             // address:port of the other end
  PathState state = PathState::down;
  std::uint64_t bytes_sent = 0;   // payload bytes written, resent ones included
  std::uint64_t bytes_acked = 0;  // payload bytes acknowledged, last sent on this path
  std::uint64_t bytes_received = 0;  // payload bytes read, duplicates included
  std::uint64_t fragments_sent = 0;
  std::uint64_t retransmissions = 0;     // fragments sent again on this path
  std::uint64_t checksum_failures = 0;   // fragments (or headers) read on it that failed
  std::uint64_t corruptions_injected = 0;
  std::uint64_t timeouts = 0;            // fragments last sent on it that timed out
  std::uint64_t failures = 0;            // times it went down
  std::uint64_t rejoins = 0;             // times it came back after going down
  double rate = 0;                       // acknowledged bytes per second (smoothed)
};

struct LinkStats {
  std::vector<PathStats> paths;
  std::size_t live_paths = 0;
  std::uint64_t messages_sent = 0, messages_received = 0;
  std::uint64_t bytes_sent = 0;          // stream bytes queued (frames with their headers)
  std::uint64_t bytes_delivered = 0;     // stream bytes delivered in order
  std::uint64_t retransmissions = 0;     // fragment transmissions after the first
  std::uint64_t timeouts = 0;            // fragments resent because their time-out passed
  std::uint64_t failovers = 0;           // fragments resent because their path failed
  std::uint64_t nacks_sent = 0, nacks_received = 0;
  std::uint64_t acks_sent = 0;           // acknowledgement frames (not counting headers)
  std::uint64_t duplicates = 0;          // fragments received twice and dropped
  std::uint64_t held = 0;                // fragments that arrived ahead of a gap
  std::uint64_t checksum_failures = 0;   // fragments dropped as corrupt
  std::uint64_t unacked_bytes = 0;       // now
  double round_trip_ms = 0;              // smoothed, from fragments acknowledged on their first transmission
  double retransmit_timeout_ms = 0;      // what a first transmission waits now
};

class StripedAcceptor;

class StripedLink final : public Link, public std::enable_shared_from_this<StripedLink> {
 public:
  using ConnectHandler = std::function<void(Result<std::shared_ptr<StripedLink>>)>;
  // Path state changes, for logs, demonstrations and tests: path index, new state,
  // and why.
  using PathObserver = std::function<void(std::size_t path, PathState state, std::string_view why)>;

  // Connecting side. Opens one TCP connection per path (binding the local address
  // first) and says hello on each. `handler` runs once, on the io_context's thread:
  // with the link as soon as one path is accepted (the others join when they are
  // up, and keep being retried in the background), or with an error naming every
  // path's failure if none could be set up. Call start() on the link before using it.
  static void async_connect(asio::io_context& io, std::vector<PathEndpoints> paths, StripedOptions options,
                            ConnectHandler handler);

  // The same, blocking the calling thread (each path's connect and hello bounded by
  // options.hello_timeout); for code that connects before running its loop. Paths
  // that fail are retried once the io_context runs.
  static Result<std::shared_ptr<StripedLink>> connect(asio::io_context& io, std::vector<PathEndpoints> paths,
                                                      StripedOptions options);

  ~StripedLink() override;

  // Link
  void send(capnp::MessageBuilder& message) override;
  // Flushes: closes once every byte sent was acknowledged (bounded by
  // options.hello_timeout), telling the peer with a bye on every path.
  void close(std::string_view reason) override;
  void detach() override;
  void abort(std::string_view reason) override;
  bool is_open() const override { return open_; }
  // What is held to be sent or acknowledged (back-pressure on the sending side; a
  // striped link does not pause reading: its reads carry the acknowledgements of
  // its own sends).
  std::size_t queued_bytes() const override { return stream_.held_bytes(); }
  const std::string& peer() const override { return peer_; }

  // Fault injection: closes path `index` abruptly (a reset, as if its NIC failed).
  // Its fragments go out on the other paths; the connecting side reconnects it.
  void drop_path(std::size_t index);
  // Fault injection: path `index` silently stops carrying anything either way, as a
  // cable pulled without any error would: what is written to it is dropped and what
  // arrives on it is left unread. Only time-outs can tell — fragments resent
  // elsewhere, the path suspect, then failed for silence — after which it is
  // reconnected (the new connection works).
  void blackhole_path(std::size_t index);
  void set_corrupt_fraction(double fraction) { options_.corrupt_fraction = fraction; }
  void set_path_observer(PathObserver observer) { path_observer_ = std::move(observer); }

  LinkStats stats() const;
  std::uint64_t link_id() const { return link_id_; }
  std::size_t path_count() const { return paths_.size(); }
  std::size_t live_paths() const;
  const StripedOptions& options() const { return options_; }

 private:
  void begin() override;
  friend class StripedAcceptor;
  struct Connection;
  struct Path;
  struct Handshake;
  enum class Side : std::uint8_t { connecting, accepting };

  StripedLink(asio::io_context& io, Side side, std::uint64_t link_id, StripedOptions options,
              std::size_t path_count);

  // Accepting side (StripedAcceptor): a link for the hello's link id, and a path
  // whose hello has been answered.
  static std::shared_ptr<StripedLink> create_accepted(asio::io_context& io, const PathHello& hello,
                                                      StripedOptions options, std::string peer);
  bool matches(const PathHello& hello) const;
  void attach(std::size_t index, asio::ip::tcp::socket socket);

  // Connecting side: one attempt at path `index`; `done` says whether it worked.
  void connect_path(std::size_t index,
                    std::function<void(const boost::system::error_code&, const std::string& error)> done);
  void schedule_reconnect(std::size_t index);
  PathHello hello_for(std::size_t index) const;

  // Paths
  void set_state(Path& path, PathState state, std::string_view why);
  void path_failed(Path& path, std::string reason, bool by_peer);
  void read_more(Path& path);
  void on_read(Path& path, const std::shared_ptr<Connection>& conn, const boost::system::error_code& ec,
               std::size_t n);
  // Returns false if the link closed or the path went down while handling it.
  bool handle_frame(Path& path, const std::shared_ptr<Connection>& conn, const FrameHeader& header,
                    const std::byte* payload);
  void on_acknowledgement(std::uint64_t lirs, std::uint64_t lids, std::span<const SeqRange> received);
  bool deliver_frames();

  // Sending
  void schedule_pump();
  void pump();
  bool write_batch(Path& path);
  void on_written(Path& path, const std::shared_ptr<Connection>& conn, const boost::system::error_code& ec);
  std::uint64_t budget(const Path& path) const;
  void release_acknowledged();
  void queue_ack(Path* preferred);
  void arm_retransmit_timer();
  Backoff retransmit_backoff() const;
  void on_retransmit_timer();

  // Periodic: keepalives, silent paths, rates.
  void arm_tick();
  void on_tick();
  void check_all_down();

  void maybe_finish_close();
  void finish(std::string reason, bool notify);

  void log_state(const Path& path, std::string_view why) const;
  spdlog::logger& logger() const { return *options_.log; }  // never null: see the constructor
  std::string describe(const Path& path) const;

  asio::io_context& io_;
  Side side_;
  std::uint64_t link_id_;
  StripedOptions options_;
  std::string peer_;
  std::vector<std::unique_ptr<Path>> paths_;
  PathObserver path_observer_;
  bool open_ = true;
  bool closing_ = false;
  bool bye_sent_ = false;
  bool half_closed_ = false;  // every bye written: each path sent its end of file
  bool ever_accepted_ = false;  // connecting side: a path was accepted (later hellos rejoin)
  bool announced_ = false;      // accepting side: handed to the acceptor's owner
  bool delivering_later_ = false;  // messages wait in reader_ for their next turn (deliver_frames)
  std::string close_reason_;

  SendStream stream_;
  SendWindow window_;
  Reassembler reassembler_;
  FrameReader reader_;
  std::multiset<std::uint64_t> writes_in_flight_;  // lowest seq of every write in flight

  // Acknowledgements
  std::uint64_t lids_announced_ = 0;  // the highest lids sent in any header
  std::uint64_t held_announced_ = 0;  // stats_.held when the last acknowledgement went out
  bool ack_timer_armed_ = false;
  std::vector<SeqRange> sack_scratch_;
  std::uint64_t peer_lirs_ = 0;
  // Round trip of fragments (write complete to first acknowledgement), RFC 6298 style.
  RoundTripEstimator round_trip_;

  std::size_t pump_start_ = 0;  // round-robin start among idle paths
  bool pump_posted_ = false;
  asio::steady_timer retransmit_timer_;
  std::optional<std::chrono::steady_clock::time_point> retransmit_armed_for_;
  asio::steady_timer ack_timer_;
  asio::steady_timer tick_timer_;
  asio::steady_timer down_timer_;     // every path down: closes the link when it fires
  bool down_timer_armed_ = false;
  asio::steady_timer close_timer_;    // bounds close()'s flush
  std::chrono::steady_clock::time_point last_rate_update_;

  std::mt19937_64 fault_rng_;
  LinkStats stats_;
};

// Accepting side: groups incoming connections by link id. Hand it every socket a
// listening acceptor yields; it reads the path hello and either creates a new
// StripedLink (handed to `on_link`, not yet started) or attaches the connection as a
// path — a reconnected one too — to the link it belongs to. A connection that does
// not start with a path hello goes to `on_plain` untouched (nothing consumed), so one
// listening port can serve plain TcpLinks and striped ones; without `on_plain` it is
// closed. All on the io_context's thread; the acceptor may be destroyed while
// handshakes are under way (they are abandoned) and before its links.
class StripedAcceptor {
 public:
  using LinkHandler = std::function<void(std::shared_ptr<StripedLink>)>;
  using PlainHandler = std::function<void(asio::ip::tcp::socket)>;

  // `options` gives the accepting side's timers, limits and logger; the checksum
  // kind, reliability and fragment size come from each link's hello.
  StripedAcceptor(asio::io_context& io, StripedOptions options, LinkHandler on_link,
                  PlainHandler on_plain = nullptr);
  ~StripedAcceptor();
  StripedAcceptor(const StripedAcceptor&) = delete;
  StripedAcceptor& operator=(const StripedAcceptor&) = delete;

  void take(asio::ip::tcp::socket socket);

  // Links still open that this acceptor created.
  std::size_t open_links() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace canopy::transport
