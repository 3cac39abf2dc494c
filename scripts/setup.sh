#!/usr/bin/env bash
# Sourced by main.sh and test.sh: installs what the build needs on a fresh Debian machine and
# sets the environment MPI jobs need here.
# - Open MPI (libopenmpi-dev, openmpi-bin) and libclang-dev, which rsmpi's bindings are
#   generated with. A shared-memory-only build needs none of them:
#   `cargo build --release -p taskbench --no-default-features` (see README).
# - Open MPI refuses to run as root unless told twice; these are its documented opt-ins.
command -v cargo >/dev/null || { echo "error: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }
need=()
command -v mpicc >/dev/null || need+=(libopenmpi-dev)
command -v mpirun >/dev/null || need+=(openmpi-bin)
# libclang.so itself: other packages bring libclang-cpp, which bindgen cannot use.
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing ${need[*]}"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null \
      || { echo "error: could not install ${need[*]} with apt-get" >&2; exit 1; }
  else
    echo "error: ${need[*]} missing; install them (Debian: apt-get install ${need[*]}) or build without MPI (--no-default-features)" >&2
    exit 1
  fi
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
