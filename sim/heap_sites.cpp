#include "sim/heap_sites.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "sim/heap_account.h"
#include "stack/proc_dwfl.h"
#include "stack/walker.h"

namespace canopy::sim {
namespace {

// "canopy::core::Node::start (node.cpp:42)" without the argument list, which
// demangled C++ names carry and which says nothing here.
std::string short_name(std::string frame) {
  for (std::size_t at; (at = frame.find("(anonymous namespace)")) != std::string::npos;) frame.replace(at, 21, "{anon}");
  const auto open = frame.find('(');
  const auto where = frame.rfind(" (");
  std::string name = open == std::string::npos ? frame : frame.substr(0, open);
  if (name.size() > 90) name = name.substr(0, 87) + "...";
  if (where != std::string::npos && where + 2 > open) name += frame.substr(where);
  return name;
}

bool is_canopy(const std::string& frame) { return frame.rfind("canopy::", 0) == 0; }
// The allocator and the tracer themselves: never a site.
bool is_allocator(const std::string& frame) {
  return frame.rfind("canopy::sim::", 0) == 0 && frame.find("heap_account") != std::string::npos;
}

}  // namespace

void print_heap_sites(std::FILE* out, const std::string& title) {
  struct Site {
    std::int64_t bytes = 0, blocks = 0;
  };
  // Collected first: naming frames allocates, which must not happen while the
  // table is walked.
  std::vector<LiveBlock> blocks;
  for_each_traced_block([&](const LiveBlock& b) { blocks.push_back(b); });
  auto dwfl = stack::report_process(getpid());
  if (!dwfl) {
    std::fprintf(out, "canopy-sim: heap sites: %s\n", dwfl.error().c_str());
    return;
  }
  std::unordered_map<void*, std::string> names;
  auto name_of = [&](void* pc) -> const std::string& {
    auto [it, fresh] = names.try_emplace(pc);
    // A return address: the call is the byte before it.
    if (fresh) it->second = stack::frame_name(dwfl->get(), reinterpret_cast<std::uint64_t>(pc) - 1, true);
    return it->second;
  };
  std::map<std::string, Site> sites;
  std::int64_t total = 0;
  for (const LiveBlock& b : blocks) {
    // The site: the first two Canopy frames above the allocator, and what they
    // called that allocated (a container's growth, make_shared, ...).
    std::string callee, key;
    int canopy_frames = 0;
    for (void* pc : b.stack) {
      if (pc == nullptr || canopy_frames == 2) break;
      const std::string& frame = name_of(pc);
      if (is_allocator(frame) || frame.rfind("operator new", 0) == 0 || frame.find("backtrace") != std::string::npos)
        continue;
      if (!is_canopy(frame)) {
        if (canopy_frames == 0 && callee.empty()) callee = short_name(frame);
        continue;
      }
      key += (canopy_frames++ ? "  <  " : "") + short_name(frame);
    }
    if (!callee.empty()) key += "  [" + callee + "]";
    auto& site = sites[key.empty() ? "(no Canopy frame)" : key];
    site.bytes += static_cast<std::int64_t>(b.size);
    ++site.blocks;
    total += static_cast<std::int64_t>(b.size);
  }
  std::vector<std::pair<std::string, Site>> sorted(sites.begin(), sites.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  std::fprintf(out, "canopy-sim: heap sites, %s: %lld bytes in %zu blocks\n", title.c_str(),
               static_cast<long long>(total), blocks.size());
  for (const auto& [key, site] : sorted) {
    std::fprintf(out, "%8lld %5lld  %s\n", static_cast<long long>(site.bytes), static_cast<long long>(site.blocks),
                 key.c_str());
  }
}

}  // namespace canopy::sim
