#!/usr/bin/env bash
# scripts/bench/io-probe/build.sh [OUT]: builds the I/O probe (io-probe.c) into OUT (default
# scripts/bench/io-probe/build/io-probe, gitignored with build/). With libxdp's and libbpf's headers (Debian
# libxdp-dev, libbpf-dev) it includes the AF_XDP mode; without them it builds the packet-socket modes only
# and says so. Not part of the daemons: docs/io-paths.md ("What was tried for the per-core path").
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/build/io-probe}
mkdir -p "$(dirname "$out")"
flags=(-O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
if [ -f /usr/include/xdp/xsk.h ] && [ -f /usr/include/bpf/libbpf.h ]; then
  cc "${flags[@]}" -DIO_PROBE_XDP -o "$out" "$here/io-probe.c" -lxdp -lbpf
  echo "io-probe: built $out (modes mmsg, txring, xdp)"
else
  cc "${flags[@]}" -o "$out" "$here/io-probe.c"
  echo "io-probe: built $out (modes mmsg, txring; no AF_XDP: apt-get install libxdp-dev libbpf-dev)"
fi
