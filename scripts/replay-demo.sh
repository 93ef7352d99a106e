#!/usr/bin/env bash
# The offline demo: no namespaces, no root needed once set up. Generates client traffic for the lab
# config, runs it through the MUX data plane, the two host agents' inbound planes, and the backends'
# replies through the outbound plane, writing a pcap at each hop, and shows tshark's decode of each.
#   scripts/replay-demo.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
slbx_setup
out=${1:-runs/replay-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
cfg=examples/lab.yaml
node=(node --enable-source-maps)
"${node[@]}" dist/cli/gen-traffic.js --config "$cfg" --out "$out/1-client.pcap" --flows 8 --clients 4 >/dev/null
echo "== MUX mux1: client frames -> VXLAN"
"${node[@]}" dist/cli/replay.js --config "$cfg" --plane mux --node mux1 --in "$out/1-client.pcap" --out "$out/2-fabric.pcap"
for h in host1 host2; do
  echo "== host agent $h: VXLAN -> NAT -> backend ports"
  "${node[@]}" dist/cli/replay.js --config "$cfg" --plane host-in --node "$h" --in "$out/2-fabric.pcap" --out "$out/3-$h-ports.pcap"
  "${node[@]}" dist/cli/gen-traffic.js --config "$cfg" --kind replies --host "$h" --out "$out/4-$h-replies.pcap" --flows 2 --clients 2 >/dev/null
  echo "== host agent $h: backend replies -> direct server return from the VIP"
  "${node[@]}" dist/cli/replay.js --config "$cfg" --plane host-out --node "$h" --in "$out/4-$h-replies.pcap" --out "$out/5-$h-dsr.pcap"
done
if command -v tshark >/dev/null; then
  echo
  echo "== tshark: the first frames at each hop"
  for f in 1-client 2-fabric 3-host1-ports 5-host1-dsr; do
    echo "-- $f.pcap"
    tshark -r "$out/$f.pcap" -d udp.port==4789,vxlan -c 3 2>/dev/null | sed 's/^/   /'
  done
  echo "-- 2-fabric.pcap, VXLAN fields of the first frame"
  tshark -r "$out/2-fabric.pcap" -d udp.port==4789,vxlan -c 1 -T fields -e ip.src -e ip.dst -e udp.srcport -e udp.dstport -e vxlan.vni -E occurrence=a -E aggregator=, 2>/dev/null | sed 's/^/   ip.src (outer,inner) ip.dst (outer,inner) udp ports, vni: /'
fi
echo
echo "pcaps in $out"
