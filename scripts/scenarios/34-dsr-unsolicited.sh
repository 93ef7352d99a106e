#!/usr/bin/env bash
# 34-dsr-unsolicited (issue 16): the return path keeps state. h1vm1 sends, from its service ports (TCP 80,
# UDP 7), TCP SYN-ACKs, TCP data, TCP RSTs and UDP datagrams to client-side addresses that never
# contacted the VIP (client1's own address at port 5555, 198.51.100.200, client1's IPv6 address): 120
# frames injected on h1vm1's eth0 with the lab client's raw-socket tool, built with the project's packet
# builder (scripts/scenarios/lib/dsr-unsolicited.ts gen). Meanwhile 1,000 HTTP requests go through the
# VIP. What must hold, from the captures (decoded by slbx's codecs, recounted by tshark) and counters:
#   * all 120 frames reached host1's port (h1vm1's capture), none left host1: nothing to or from those
#     ports at the router's fabric side, at client1 or on host1's fabric interface;
#   * host1 counted each, exactly, as drop_out_dsr_unsolicited;
#   * the 1,000 requests all succeeded, their replies reached the router by DSR, none crossed a MUX.
# The injection starts once the MUXes placed 20 of the good requests' flows (evidence, not a pause). The
# frames go 20 ms apart: the host agent reads a port through a capture whose buffer holds about 69 such
# frames (docs/east-west.md), and a burst of 120 lost about half there, before the data plane saw them.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
VIP=203.0.113.10
HOST=host1
NIC=h1vm1
REQUESTS=${REQUESTS:-1000}
DU=("${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/dsr-unsolicited.js")
lab_setup_scenario sc34
lab_up
rc=0

port_mac=$(lab_exec "$HOST" cat "/sys/class/net/$NIC/address")
"${DU[@]}" gen --config "$LAB_DIR/config.yaml" --out "$LAB_DIR/unsolicited.pcap" --nic "$NIC" --port-mac "$port_mac" || exit 1

lab_capture_start router fab0 router-fab >/dev/null
lab_capture_start client1 eth0 client1 >/dev/null
lab_capture_start "$HOST" fab0 "$HOST" >/dev/null
lab_capture_start "$NIC" eth0 "$NIC" >/dev/null
for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" >/dev/null; done
sc_counters "$HOST" "$LAB_DIR/counters-$HOST-before.json" || rc=1

flows0=$(sc_mux_flows)
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 4 --timeout-ms 20000 \
  --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/http.json" >"$LAB_DIR/http.out" 2>&1 &
good=$!
sc_wait_for "20 of the good requests' flows placed by the MUXes" 120 eval '[ "$(sc_mux_flows)" -ge $((flows0 + 20)) ]' || rc=1
lab_exec "$NIC" "${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/client.js" inject --interface eth0 --in "$LAB_DIR/unsolicited.pcap" --gap-us 20000 || rc=1
wait "$good" || rc=1
cat "$LAB_DIR/http.out"

# every injected frame judged: host1's out_packets grew by at least the 120 injected frames plus the
# replies it sent, and drop_out_dsr_unsolicited stopped moving; read the counters once they are settled
judged() {
  sc_counters "$HOST" "$LAB_DIR/counters-$HOST-now.json" || return 1
  node -e 'const r=(f)=>JSON.parse(require("fs").readFileSync(f,"utf8")),a=r(process.argv[1]),b=r(process.argv[2]);process.exit((b.drop_out_dsr_unsolicited??0)-(a.drop_out_dsr_unsolicited??0)>=120?0:1)' \
    "$LAB_DIR/counters-$HOST-before.json" "$LAB_DIR/counters-$HOST-now.json"
}
sc_wait_for "$HOST judged the 120 unsolicited frames" 60 judged || rc=1
sc_wait_for "client1's connections to the VIP closed" 60 eval '[ -z "$(lab_exec client1 ss -Htn state established state syn-sent state fin-wait-1 state fin-wait-2 state close-wait state last-ack state closing dst $VIP)" ]' || rc=1
sc_counters "$HOST" "$LAB_DIR/counters-$HOST-after.json" || rc=1
lab_capture_stop_all || rc=1
"${DU[@]}" verify --run "$LAB_DIR" --nic "$NIC" --host "$HOST" --requests "$REQUESTS" || rc=1
exit "$rc"
