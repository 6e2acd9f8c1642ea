// Where one simulated process's heap goes (canopy-sim --heap-sites RANK): its live
// blocks grouped by the Canopy code that allocated them, largest first, named with
// libdwfl as `canopy stack` names frames (docs/simulation.md, "Where the bytes are").
#pragma once

#include <cstdio>
#include <string>

namespace canopy::sim {

// Writes the traced account's live blocks (sim/heap_account.h) to `out`, headed by
// `title`: one line per site, with its bytes and blocks.
void print_heap_sites(std::FILE* out, const std::string& title);

}  // namespace canopy::sim
