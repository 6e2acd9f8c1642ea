#!/usr/bin/env bash
# Writes canopy(1) from the program's own help, so that the manual says what the
# program does: `canopy help` and `canopy help COMMAND` for every command, set in
# roff as they print, with the environment and where the documentation is.
#   tools/make_manpage.sh PATH/TO/canopy OUTPUT.1
set -euo pipefail
canopy="$1"
out="$2"
version="$("$canopy" --version)"
# roff: a backslash is \e; a line starting with . or ' would be a request.
escape() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
{
  echo ".TH CANOPY 1 \"\" \"$version\" \"User Commands\""
  echo ".SH NAME"
  echo "canopy \\- a fault-tolerant tree-based overlay network for HPC tools"
  echo ".SH SYNOPSIS"
  echo ".B canopy"
  echo "[\\fICOMMAND\\fR] [\\fIOPTIONS\\fR]"
  echo ".br"
  echo ".B canopy help"
  echo "[\\fICOMMAND\\fR]"
  echo ".SH DESCRIPTION"
  echo "Canopy launches a tree of communication processes and back-ends, streams data up"
  echo "through filters, and heals the tree when a process or a link fails. Without a"
  echo "command, \\fBcanopy\\fR runs \\fBcanopy run\\fR with its defaults."
  echo ".PP"
  echo ".nf"
  "$canopy" help | escape
  echo ".fi"
  echo ".SH COMMANDS"
  for command in run status stack topgen; do
    echo ".SS canopy $command"
    echo ".nf"
    "$canopy" help "$command" | escape
    echo ".fi"
  done
  cat <<'ROFF'
.SH EXIT STATUS
0 on success; 1 for a failure at run time (a launch that failed, a check that did not
pass); 2 for bad usage (a bad option, a bad topology file, a program that cannot be
found). \fBcanopy status\fR exits with 1 for a stale status file.
.SH ENVIRONMENT
.TP
.B CANOPY_LOG_DIR
One log file per process of the tree in this directory; without it nothing is logged.
.TP
.B CANOPY_LOG_LEVEL
trace, debug, info (the default), warn or error.
.TP
.B CANOPY_LOG_STDERR
1: log to standard error instead, for debugging.
.TP
.B CANOPY_COMMNODE
The commnode program (default: canopy-commnode beside canopy, else on PATH).
.SH FILES
The documentation is installed in \fIPREFIX/share/doc/canopy\fR: architecture.md,
fault-tolerance.md, filters.md, attach.md, stack.md, packaging.md and the others.
ROFF
} > "$out.tmp"
mv "$out.tmp" "$out"
