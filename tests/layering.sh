#!/usr/bin/env bash
# The layers of docs/architecture.md, checked on the sources' #include lines:
#   - transport/ includes nothing of core/, services/, membership/ or frontend/;
#   - core/ includes no service (services/, membership/);
#   - a service (services/, membership/) sees the node through
#     core/service_context.h, never core/node.h (services/runtime.* puts the node
#     and its services together, and may);
#   - a service never kills a process nor closes a child's link itself: it asks the
#     node (ServiceContext::cut_child, cut_parent);
#   - one way to dial a process of the tree: core/dial.h (a node's first
#     connection, to the parent its launcher named, is the one other in core/);
#   - no include circle among the project's own headers.
#   tests/layering.sh SOURCE_DIR
# Prints each breach with its file and line; fails if there is any.
set -uo pipefail  # not -e: a grep that finds nothing is the good case
shopt -s lastpipe  # breach, last in its pipeline, counts in this shell, not a subshell
export LC_ALL=C
[ $# -eq 1 ] || { echo "usage: $0 SOURCE_DIR" >&2; exit 2; }
cd "$1"
dirs=(backend-lib commnode core filters frontend include membership mrnet services stack topology tools transport)
breaches=0

breach() {  # what, then grep -n lines
  local what=$1 hits
  hits=$(cat)
  [ -z "$hits" ] && return 0
  echo "FAIL: $what:" >&2
  echo "$hits" | sed 's/^/  /' >&2
  breaches=$((breaches + 1))
}

sources() { find "$@" -type f \( -name '*.h' -o -name '*.cpp' \) 2>/dev/null | sort; }

grep -nE '#include "(core|services|membership|frontend)/' $(sources transport) /dev/null |
  breach "transport/ includes a layer above it"
grep -nE '#include "(services|membership)/' $(sources core) /dev/null |
  breach "core/ includes a service"
grep -nE '#include "core/node\.h"' $(sources services membership | grep -v '^services/runtime\.') /dev/null |
  breach "a service includes core/node.h (it gets a core::ServiceContext)"
grep -nE -e '->kill\(|\.link->(close|abort)|\blink(->|\.)abort(_with)?\(' \
  $(sources services membership | grep -v '^services/runtime\.') /dev/null |
  grep -v 'step->kill' | breach "a service kills a process or closes a peer's link itself"
grep -nE 'async_connect|connect_tcp\(' $(sources core services membership | grep -v '^core/dial\.cpp') /dev/null |
  grep -v 'core/node.cpp:.*connect_tcp(io_, parent\.address' | breach "a connection dialled other than by core/dial.h"

# Include edges between the project's own files, resolved as the build resolves
# them (from the source root, or include/ for the public headers), for tsort.
edges=$(for f in $(sources "${dirs[@]}"); do
  sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
    if [ -f "$inc" ]; then echo "$f $inc"; elif [ -f "include/$inc" ]; then echo "$f include/$inc"; fi
  done
done)
if ! out=$(echo "$edges" | tsort 2>&1 >/dev/null); then
  echo "$out" | grep -v '^tsort: -: input contains a loop:$' | breach "an include circle"
fi

[ "$breaches" -eq 0 ] && echo "layering: $(echo "$edges" | wc -l) include edges, no breach"
exit $((breaches > 0))
