#!/usr/bin/env bash
# 10-ecmp-spread: 4 MUXes announce the VIP by BGP; the router (BIRD 2, merge paths) installs one ECMP
# route and hashes flows on their 5-tuple. Checked: the router's kernel FIB holds one route to the VIP with
# exactly one next hop per MUX, equal weights (ip -j route show in the router namespace). 2,000 UDP
# flows (a new source port each, 32 source addresses) all come back; each MUX carries at least 15 % of
# them; each flow reaches exactly one MUX, and exactly the backend Maglev chooses, the independent
# oracle's answer from the config alone (scripts/oracle), as the backends' captures show. BIRD's state
# (sessions, paths, AS path, next hops) is checked too; tshark recounts the captures. The router hashes
# the 5-tuple (scripts/lab/lib.sh): every flow reached the MUX `ip route get ... sport N dport M` names
# (the kernel's own answer for that 5-tuple), and a 5-tuple two sockets used reached one MUX.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/bgp.sh
FLOWS=${FLOWS:-2000}
VIP=203.0.113.10
lab_setup_scenario bgp-sc10
bgp_scenario_traps
lab_up --muxes 4
for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" dst host $VIP and udp dst port 7 >/dev/null; done
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" udp port 7 >/dev/null; done
lab_birdc show protocols >"$LAB_DIR/bird-protocols.txt"
lab_birdc show route all $VIP/32 >"$LAB_DIR/bird-route.txt"
lab_exec router ip -j -4 route show $VIP/32 >"$LAB_DIR/fib.json"
echo "router: $(lab_router_nexthops $VIP | paste -sd' ' -)"
rc=0
sc_client client1 udp --target $VIP:7 --flows "$FLOWS" --sources 198.51.100.10-198.51.100.41 --concurrency 64 --json "$LAB_DIR/udp.json" || rc=1
sleep 0.3
lab_capture_stop_all || rc=1
# the router's own choice for every flow: ip route get VIP from SRC iif br0 ipproto udp sport N dport 7
node -e '
  const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  for (const r of d.records) if (r.ok) console.log(`${r.sourceAddress} ${r.sourcePort}`);' "$LAB_DIR/udp.json" >"$LAB_DIR/route-get.in"
awk -v vip=$VIP '{ printf "route get %s from %s iif br0 ipproto udp sport %s dport 7\n", vip, $1, $2 }' "$LAB_DIR/route-get.in" \
  | lab_exec router ip -batch - | grep -v '^ ' | paste -d' ' "$LAB_DIR/route-get.in" - >"$LAB_DIR/route-get.txt"
sc_verify ecmp-spread --run "$LAB_DIR" --vip $VIP --port 7 --udp-json "$LAB_DIR/udp.json" --route-get "$LAB_DIR/route-get.txt" \
  --bird-protocols "$LAB_DIR/bird-protocols.txt" --bird-route "$LAB_DIR/bird-route.txt" --fib-json "$LAB_DIR/fib.json" --min-share 0.15 || rc=1
exit "$rc"
