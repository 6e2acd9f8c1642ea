// Where the front-end finds the programs it starts: the commnode beside the running
// executable (or as the user says), a back-end by an absolute path or on $PATH.
#pragma once

#include <string>

namespace canopy::frontend {

// The directory of the running executable ("" if it cannot be read).
std::string self_directory();
// Resolves the commnode program: an explicit path, $CANOPY_COMMNODE, a sibling of
// the running executable, or a bare name for PATH.
std::string find_commnode(const std::string& given);
// Whether `name` (no '/') is an executable in a directory of $PATH.
bool on_path(const std::string& name);
// Makes a program path absolute so children started elsewhere find it; bare names
// are left for PATH.
std::string absolute_program(const std::string& program);

}  // namespace canopy::frontend
