// Where an MRNet back-end in attach mode finds the network's attach file when nobody
// told it (docs/mrnet.md, "Attach mode"). MRNet's attach mode gives a back-end only
// its parent's host, port and rank; Canopy's back-ends must also prove they know the
// network's secret, which is in the attach file. The front-end of an open attach
// (no CANOPY_BACKENDS) therefore links the attach file, in a directory of the
// user's, under the name of each commnode back-ends join under, "HOST:PORT"; the
// back-end opens the link its arguments name. The directory is $CANOPY_ATTACH_DIR,
// else ~/.canopy/attach (made with mode 0700; on a shared file system on clusters),
// and only the user can read the files (0600): the trust is the user's own.
#pragma once

#include <string>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"

namespace MRN::layer {

// $CANOPY_ATTACH_DIR, else $HOME/.canopy/attach; empty if neither is known.
std::string attach_dir();

// Makes attach_dir() (mode 0700, best effort: it may be shared); its path, or an
// error if it is unknown or cannot be made.
canopy::Result<std::string> make_attach_dir();

// The name of commnode `host`:`port`'s link in attach_dir().
std::string attach_place(const std::string& host, const std::string& port);

// Makes attach_dir() (make_attach_dir()) and, for each commnode of `topology` with no
// commnode below it, links attach_place(its host, its port) to `attach_file` (by its
// name when it is in attach_dir(), as on a shared file system it is for every host;
// else by its absolute path); returns the links made, for remove_attach_places().
canopy::Result<std::vector<std::string>> make_attach_places(const canopy::Topology& topology,
                                                           const std::string& attach_file);

// Removes the links that still lead to `attach_file` (a later front-end may have
// taken a name over since).
void remove_attach_places(const std::vector<std::string>& places, const std::string& attach_file);

}  // namespace MRN::layer
