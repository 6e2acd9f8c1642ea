#!/usr/bin/env bash
# The ctest test `package`: an installed Canopy works for projects of their own.
#
#   tests/package/run.sh BUILD_DIR [cmake options for the consumer projects...]
#
# Installs BUILD_DIR (already built) into a temporary prefix with `cmake --install`,
# configures and builds tests/package and examples/ against it with
# find_package(Canopy) and CMAKE_PREFIX_PATH, builds tests/package/make with make and
# pkg-config (PKG_CONFIG_PATH), and runs their front-ends on small trees. The
# installed commnode is found as a user's program would find it: on PATH, from a path
# compiled in (by CMake or pkg-config), through $CANOPY_COMMNODE, or, for the
# installed `canopy`, beside the program.
#
# Every step runs within what is left of a time budget ($CANOPY_PACKAGE_TEST_BUDGET
# seconds, default 540, below the test's TIMEOUT of 600), so that the temporary
# directory is always removed and no process is left behind. Builds use
# $CANOPY_PACKAGE_TEST_JOBS parallel jobs (default 2).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
source_dir="$(cd "$here/../.." && pwd)"
if (($# < 1)); then
  echo "usage: $0 BUILD_DIR [cmake options...]" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
shift
jobs="${CANOPY_PACKAGE_TEST_JOBS:-2}"
unset CANOPY_COMMNODE  # each run below says how it finds the commnode
deadline=$((SECONDS + ${CANOPY_PACKAGE_TEST_BUDGET:-540}))

work="$(mktemp -d "${TMPDIR:-/tmp}/canopy-package.XXXXXX")"
prefix="$work/prefix"
on_exit() {
  local status=$?
  # Nothing started from the temporary prefix or builds may outlive the test.
  local left
  left="$(pgrep -f "$work/" || true)"
  if [ -n "$left" ]; then
    echo "package test: processes left behind:" >&2
    ps -o pid,args -p "${left//$'\n'/,}" >&2 || true
    kill -9 $left 2>/dev/null || true
    status=1
  fi
  rm -rf "$work"
  exit "$status"
}
trap on_exit EXIT

# step DESCRIPTION COMMAND...: runs COMMAND within the time left, and says how long it took.
step() {
  local what="$1" left=$((deadline - SECONDS)) start=$SECONDS
  shift
  if ((left <= 0)); then
    echo "package test: out of time before: $what" >&2
    exit 1
  fi
  echo "== $what"
  if ! timeout --kill-after=5 "$left" "$@"; then
    echo "package test: FAILED: $what" >&2
    exit 1
  fi
  echo "   ($((SECONDS - start)) s)"
}

step "install $build into $prefix" cmake --install "$build" --prefix "$prefix"
# Include paths of the source tree (the source root for "core/...", "transport/..."
# headers, the generated schema's directory) are for this tree's own targets only:
# the installed package must name no directory of the source or build tree.
step "the installed package names no path of the source or build tree" \
  bash -c '! grep -rnF -e "$1" -e "$2" "$3"' _ "$source_dir" "$build" "$prefix/lib/cmake/Canopy"

# Lean by default (CANOPY_INSTALL_DEBUG_INFO=split; docs/packaging.md, "Debug
# information"): no installed program or library carries debug sections; each
# program's are in .debug/ beside it, named by its debuglink and found from there
# (an address of main resolves to its source line); the static libraries as built are
# under lib/debug/. Skipped for a build configured with =keep.
if grep -q '^CANOPY_INSTALL_DEBUG_INFO:STRING=split' "$build/CMakeCache.txt"; then
  step "installed without debug information, kept apart" bash -c '
    prefix=$1
    for file in "$prefix"/bin/canopy "$prefix"/bin/canopy-commnode "$prefix"/lib/libcanopy_frontend.a \
                "$prefix"/lib/libcanopy_mrnet.so; do
      if readelf -S -W "$file" | grep -q "\.debug_"; then echo "$file carries debug sections"; exit 1; fi
    done
    [ -f "$prefix/lib/debug/libcanopy_frontend.a" ] || { echo "no lib/debug/libcanopy_frontend.a"; exit 1; }
    readelf -S -W "$prefix/lib/debug/libcanopy_frontend.a" | grep -q "\.debug_line" ||
      { echo "lib/debug/libcanopy_frontend.a has no line tables"; exit 1; }
    [ "$(readelf --string-dump=.gnu_debuglink "$prefix/bin/canopy" | grep -o "canopy\.debug")" = canopy.debug ] ||
      { echo "bin/canopy names no canopy.debug"; exit 1; }
    main=$(readelf -s -W "$prefix/bin/.debug/canopy.debug" | awk "\$8 == \"main\" { print \$2; exit }")
    line=$(eu-addr2line -e "$prefix/bin/canopy" "0x$main")
    case $line in *tools/canopy.cpp:*) ;; *) echo "main of bin/canopy resolves to \"$line\""; exit 1 ;; esac' _ "$prefix"
fi

# The manual, written from canopy's help, has every command; the docs come along.
step "man page and docs installed" bash -c '
  for command in run status stack topgen; do
    grep -q "^\.SS canopy $command\$" "$1/share/man/man1/canopy.1" || { echo "no canopy $command in canopy.1"; exit 1; }
  done
  grep -q -- "--dashboard" "$1/share/man/man1/canopy.1" || { echo "canopy.1 lacks --dashboard"; exit 1; }
  for doc in README.md architecture.md filters.md packaging.md fault-tolerance.md; do
    [ -f "$1/share/doc/canopy/$doc" ] || { echo "no share/doc/canopy/$doc"; exit 1; }
  done' _ "$prefix"

for project in package examples; do
  src="$here"
  [ "$project" = examples ] && src="$source_dir/examples"
  step "configure $src against the installed package" \
    cmake -S "$src" -B "$work/$project" -DCMAKE_PREFIX_PATH="$prefix" "$@"
  step "build $project" cmake --build "$work/$project" -j "$jobs"
done

# package_backend is linked with canopy_lean_program (docs/packaging.md): it needs
# libc only (neither it nor Canopy calls into libm), unless the installed libraries
# are sanitized (then canopy_lean_program changes nothing). So do mrnet_be_lean and
# int_add_backend_lightweight_lean, below.
lean=1
grep -q "^CANOPY_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" && lean=0
if [ "$lean" = 1 ]; then
  step "package_backend, a lean back-end, needs libc only" \
    "$source_dir/tests/lean_backend.sh" --libc-only "$work/package/package_backend"
  # With the installed layout of the functions a back-end runs, where the tool's
  # toolchain takes it (cmake/CanopyLean.cmake): Canopy's functions, not the tool's
  # own (compiled as the tool compiles them, its main() stays where it is).
  if grep -q "^CANOPY_LEAN_HOT_LAYOUT:INTERNAL=1" "$work/package/CMakeCache.txt"; then
    step "package_backend's Canopy code is laid out as the installed backend_hot_functions.ld says" \
      "$source_dir/tests/lean_layout.sh" --only 6canopy "$work/package/package_backend" \
      "$prefix/lib/cmake/Canopy/backend_hot_functions.ld"
  else
    echo "== (the tool's linker takes no layout script: not checked)"
  fi
else
  echo "== (a sanitized build: no back-end is lean)"
fi

# The pkg-config files (docs/packaging.md) find the prefix from their own place
# (${pcfiledir}): they name no absolute path, of the trees or of the prefix.
step "the pkg-config files name no absolute path" \
  bash -c '! grep -rnF -e "$1" -e "$2" -e "$3" "$3/lib/pkgconfig"' _ "$source_dir" "$build" "$prefix"
# A Makefile project builds with make and pkg-config only, using the compiler Canopy
# was built with (a plugin must: docs/filters.md).
cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")"
cc="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")"
mkdir "$work/make"
step "build tests/package/make with make and pkg-config" \
  env PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
  make -C "$work/make" -f "$here/make/Makefile" -j "$jobs" CXX="${cxx:-c++}"

# A user program finds canopy-commnode on PATH...
step "package_frontend (commnode from PATH)" \
  env PATH="$prefix/bin:$PATH" "$work/package/package_frontend"
# ...or with the path the package gives it at build time...
step "package_frontend (commnode path compiled in)" \
  "$work/package/package_frontend" --compiled-in-commnode
# ...(the Makefile project's, from pkg-config --variable=commnode canopy)...
step "package_frontend built with make (commnode path from pkg-config compiled in)" \
  "$work/make/package_frontend" --compiled-in-commnode
# ...or through $CANOPY_COMMNODE...
step "integer_addition (commnode from CANOPY_COMMNODE)" \
  env CANOPY_COMMNODE="$prefix/bin/canopy-commnode" \
  "$work/examples/integer_addition/integer_addition_frontend" --tree b:2^2
step "integer_union" \
  env PATH="$prefix/bin:$PATH" \
  "$work/examples/integer_union/integer_union_frontend" --tree b:2^2 --waves 8 --record "$work/record"
step "stack_merge" \
  env PATH="$prefix/bin:$PATH" \
  "$work/examples/stack_merge/stack_merge_frontend" --tree b:2x3 --output "$work/stack_merge.dot"
# ...and the installed programs find it beside themselves.
step "installed canopy run (commnode beside it)" \
  "$prefix/bin/canopy" run --tree b:2^2 --waves 3 --interval 0

# MRNet's API (docs/mrnet.md): an MRNet-style front-end, back-end and filter function
# built with find_package(Canopy) and with make + pkg-config, run on a topology in
# MRNet's format. The commnode and the filter plug-in are found from where
# libcanopy_mrnet.so is installed, wherever the tool is.
printf 'localhost:0 => localhost:1 localhost:2 ;\nlocalhost:1 => localhost:3 localhost:4 ;\n' > "$work/mrnet.top"
step "configure tests/package/mrnet against the installed package" \
  cmake -S "$here/mrnet" -B "$work/mrnet-cmake" -DCMAKE_PREFIX_PATH="$prefix" "$@"
step "build the MRNet-style programs with CMake" cmake --build "$work/mrnet-cmake" -j "$jobs"
mkdir "$work/mrnet-make"
step "build the MRNet-style programs with make and pkg-config" \
  env PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
  make -C "$work/mrnet-make" -f "$here/mrnet/Makefile" -j "$jobs" CXX="${cxx:-c++}" CC="${cc:-cc}"
# A Makefile written as MRNet's examples' are, unchanged, with Canopy's stand-in for
# MRNet's conf/Makefile.examples (the variables it expects). Its sources sit beside it
# as in the source tree (int_add_frontend.cpp includes ../../mrnet/...).
mk_src="$work/mk/package/mrnet"
mkdir -p "$mk_src" "$work/mk/mrnet" "$work/mrnet-mk"
cp "$here/mrnet/int_add_frontend.cpp" "$here/mrnet/int_add_backend_lightweight.c" "$source_dir/tests/mrnet/mrnet_be.cpp" \
  "$source_dir/tests/mrnet/mrnet_tool_filter.cpp" "$source_dir/tests/mrnet/mrnet_test_protocol.h" "$mk_src/"
cp "$source_dir/tests/mrnet/mrnet_test_protocol.h" "$work/mk/mrnet/"
cp "$here/mrnet/Makefile.mrnet-style" "$mk_src/Makefile"
step "build an MRNet-style Makefile unchanged with share/canopy/mrnet-examples.mk" \
  make -C "$mk_src" -f "$prefix/share/canopy/mrnet-examples.mk" -j "$jobs" CXX="${cxx:-c++}" CC="${cc:-cc}"
for program in bin/int_add_frontend bin/mrnet_be bin/int_add_backend_lightweight lib/mrnet_tool_filter.so; do
  ln -s "$mk_src/$program" "$work/mrnet-mk/$(basename "$program")"
done
# The lean MRNet back-ends, C++ and lightweight C (CMake only); they run below like
# the others.
if [ "$lean" = 1 ]; then
  step "mrnet_be_lean, a lean MRNet back-end, needs libc only" \
    "$source_dir/tests/lean_backend.sh" --libc-only "$work/mrnet-cmake/mrnet_be_lean"
  step "int_add_backend_lightweight_lean, a lean lightweight C back-end, needs libc only" \
    "$source_dir/tests/lean_backend.sh" --libc-only "$work/mrnet-cmake/int_add_backend_lightweight_lean"
  # The MRNet layer's functions a back-end runs are in the layout too.
  if grep -q "^CANOPY_LEAN_HOT_LAYOUT:INTERNAL=1" "$work/mrnet-cmake/CMakeCache.txt"; then
    step "mrnet_be_lean's Canopy and MRNet-layer code is laid out as the installed backend_hot_functions.ld says" \
      "$source_dir/tests/lean_layout.sh" --only '6canopy|3MRN' "$work/mrnet-cmake/mrnet_be_lean" \
      "$prefix/lib/cmake/Canopy/backend_hot_functions.ld"
  fi
fi
for kind in cmake make mk; do
  backends="mrnet_be int_add_backend_lightweight"
  [ "$kind" = cmake ] && backends="$backends mrnet_be_lean int_add_backend_lightweight_lean"
  for backend in $backends; do
    step "MRNet-style integer addition with $backend, built with $kind" \
      env -u CANOPY_COMMNODE "$work/mrnet-$kind/int_add_frontend" "$work/mrnet.top" \
      "$work/mrnet-$kind/$backend" "$work/mrnet-$kind/mrnet_tool_filter.so" "$work/mrnet-$kind"
  done
done

echo "package test passed"
