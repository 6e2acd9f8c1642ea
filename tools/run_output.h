// What the front-end commands of canopy (run, attach-frontend) print while a tree
// runs: events as text or JSON lines, counts and rank lists, and the waits and the
// interrupt flag they share. The status file and the dashboard hear of every event.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "canopy/frontend.h"
#include "status_file.h"

namespace canopy::tools {

using Clock = std::chrono::steady_clock;

// The signal that interrupted the command (SIGINT, SIGTERM), 0 while none has.
extern std::atomic<int> g_signal;
// Sets g_signal on SIGINT and SIGTERM, instead of dying: the command shuts its tree
// down and says why. A second signal ends the process at once, and so does the first
// after kStopLimit: a signal always ends the command.
void catch_interrupts();
inline constexpr std::chrono::seconds kStopLimit{20};

double seconds_since(Clock::time_point t);
// `s` as a JSON string, quotes included.
std::string json_string(const std::string& s);
// "1 back-end", "16 back-ends".
std::string count(std::size_t n, const std::string& noun);
// "[1, 2]"
std::string rank_list(const std::vector<Rank>& ranks);
// An event as one line of text ("failure of 7: ...").
std::string event_text(const Event& e);
// Prints every event that has arrived (failures, adoptions, recoveries, views), keeps
// the status file and the dashboard current, and returns the events for the
// workload to act on.
std::vector<Event> print_events(Network& net, bool jsonl, StatusWriter& status);
// Sleeps until a packet or an event is ready, or `timeout` has passed.
void wait_for_packet_or_event(const Network& net, std::chrono::milliseconds timeout);

}  // namespace canopy::tools
