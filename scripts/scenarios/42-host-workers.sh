#!/usr/bin/env bash
# 42-host-workers (issue 19): the lab with --workers 2 on every host agent and every MUX (--io ring: the
# kernel steers both directions of each flow to one host worker by PACKET_FANOUT_CBPF, docs/io-paths.md).
#   1. Scenario 34's check: h1vm1 sends 120 unsolicited frames from its service ports while 300 requests
#      go through the VIP: none leaves host1 (router, client1 and host1's fabric captures), host1 counts
#      each, exactly, as drop_out_dsr_unsolicited; every request succeeds by direct server return.
#   2. Scenario 01's traffic and its verifier, unchanged: 1,000 HTTP requests, every packet followed
#      through the captures (MUX in, VXLAN out byte for byte, backend, direct server return).
#   3. Table changes under traffic: 1,500 requests run while a backend is drained (slbctl ... --wait:
#      every MUX acked) and a VIP is added (a new rule: a new generation for every host agent too); then
#      every worker of every MUX and host agent must show its daemon's generation (the host agents' past
#      the one before), every request succeeds, and 500 new connections made after that: none reaches
#      the drained backend.
#   Over phases 2 and 3: no reordering within a TCP flow, requests at the backends' ports and replies at
#   the client; both workers of every MUX and host agent carried frames; no backend reply of the traffic
#   was dropped as unsolicited (it reached the worker that learned its flow), no internal error.
#   /status eastWest counts the workers' return-path entries (their tables summed) and each worker holds some.
# Scenarios 11 and 17 run the same way: LAB_DAEMON_IO=ring LAB_MUX_WORKERS=2 LAB_HOST_WORKERS=2 scripts/scenarios/11-mux-crash.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
VIP=203.0.113.10
DRAIN=h2vm2
HOST=host1
NIC=h1vm1
LAB_DAEMON_IO=ring
LAB_MUX_WORKERS=2
LAB_HOST_WORKERS=2
DU=("${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/dsr-unsolicited.js")
lab_setup_scenario sc42
lab_up
rc=0

echo "--- 1. scenario 34's unsolicited frames, host agents with 2 workers"
U=$LAB_DIR/unsolicited
mkdir -p "$U/pcaps"
cp "$LAB_DIR/config.yaml" "$U/config.yaml"
port_mac=$(lab_exec "$HOST" cat "/sys/class/net/$NIC/address")
"${DU[@]}" gen --config "$LAB_DIR/config.yaml" --out "$U/unsolicited.pcap" --nic "$NIC" --port-mac "$port_mac" || exit 1
lab_capture_start router fab0 router-fab >/dev/null
lab_capture_start client1 eth0 client1 >/dev/null
lab_capture_start "$HOST" fab0 "$HOST" >/dev/null
lab_capture_start "$NIC" eth0 "$NIC" >/dev/null
for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" >/dev/null; done
sc_counters "$HOST" "$U/counters-$HOST-before.json" || rc=1
flows0=$(sc_mux_flows)
sc_client client1 http --url "http://$VIP/" --count 300 --concurrency 4 --timeout-ms 20000 \
  --source 198.51.100.10-198.51.100.41 --json "$U/http.json" >"$U/http.out" 2>&1 &
good=$!
sc_wait_for "20 of the good requests' flows placed by the MUXes" 120 eval '[ "$(sc_mux_flows)" -ge $((flows0 + 20)) ]' || rc=1
lab_exec "$NIC" "${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/client.js" inject --interface eth0 --in "$U/unsolicited.pcap" --gap-us 20000 || rc=1
wait "$good" || rc=1
judged() {
  sc_counters "$HOST" "$U/counters-$HOST-now.json" || return 1
  node -e 'const r=(f)=>JSON.parse(require("fs").readFileSync(f,"utf8")),a=r(process.argv[1]),b=r(process.argv[2]);process.exit((b.drop_out_dsr_unsolicited??0)-(a.drop_out_dsr_unsolicited??0)>=120?0:1)' \
    "$U/counters-$HOST-before.json" "$U/counters-$HOST-now.json"
}
sc_wait_for "$HOST judged the 120 unsolicited frames" 60 judged || rc=1
sc_wait_for "client1's connections to the VIP closed" 60 eval '[ -z "$(lab_exec client1 ss -Htn state established state syn-sent state fin-wait-1 state fin-wait-2 state close-wait state last-ack state closing dst $VIP)" ]' || rc=1
sc_counters "$HOST" "$U/counters-$HOST-after.json" || rc=1
lab_capture_stop_all || rc=1
mv "$LAB_DIR"/pcaps/*.pcap "$U/pcaps/"
"${DU[@]}" verify --run "$U" --nic "$NIC" --host "$HOST" --requests 300 || rc=1

echo "--- 2. scenario 01's checks, every MUX and host agent with 2 workers"
hosts=$(lab_nodes host)
for h in $hosts; do sc_counters "$h" "$LAB_DIR/counters-$h-before.json" || rc=1; done
sc_capture_path
sc_client client1 http --url http://$VIP/ --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/client-http.json" || rc=1
sleep 0.3   # as scenario 01: the last replies reach every capture
lab_capture_stop_all
cp "$LAB_DIR/pcaps/client1.pcap" "$LAB_DIR/pcaps/client1-path.pcap"
sc_verify north-south --run "$LAB_DIR" --vip $VIP --port 80 --requests "$REQUESTS" \
  --client-json "$LAB_DIR/client-http.json" --account "$LAB_DIR/account.json" || rc=1

echo "--- 3. a drain under traffic"
nics=$(lab_nodes nic)
for n in $nics; do lab_capture_start "$n" eth0 "$n-change" tcp port 80 >/dev/null; done
lab_capture_start client1 eth0 client1-change tcp port 80 >/dev/null
flows0=$(sc_mux_flows)
sc_client client1 http --url http://$VIP/ --count 1500 --concurrency 8 --json "$LAB_DIR/during.json" >"$LAB_DIR/during.out" 2>&1 &
client=$!
sc_wait_for "200 new flows through the MUXes" 60 eval '[ "$(sc_mux_flows)" -ge $((flows0 + 200)) ]' || rc=1
lab_slbctl backend drain web $DRAIN --wait >/dev/null || rc=1
echo "drained $DRAIN (every MUX acked)"
# a drain changes the MUXes' tables only; a new VIP's rule changes the host agents' too (their NAT rules)
declare -A hgen0
for h in $hosts; do hgen0[$h]=$(sc_status_field "$h" generation) || rc=1; done
lab_slbctl vip add 203.0.113.60 --protocol tcp --frontend-port 80 --backend-port 8001 --pool web --wait >/dev/null || rc=1
echo "added VIP 203.0.113.60 (a new rule for every host agent)"
# every worker of every MUX and host agent at its daemon's generation (shared status word, read by
# /status), and every host agent past the generation it had before the new VIP
workers_at_generation() {
  local n
  for n in $(lab_nodes mux) $hosts; do
    lab_daemon_status "$n" | node -e 'const s = JSON.parse(require("fs").readFileSync(0, "utf8"));
      process.exit((s.workers ?? []).length === 2 && s.generation > Number(process.argv[1]) &&
        s.workers.every((w) => w.alive && w.generation === s.generation) ? 0 : 1)' "${hgen0[$n]:-0}" || return 1
  done
}
sc_wait_for "every worker at its daemon's generation" 60 workers_at_generation || rc=1
during_rc=0
wait "$client" || during_rc=$?
[ "$during_rc" = 0 ] || { echo "FAIL requests across the drain: the client exited $during_rc"; tail -n 5 "$LAB_DIR/during.out"; rc=1; }
echo "--- 4. new connections after every worker acknowledged"
lab_capture_stop_all
for n in $nics; do lab_capture_start "$n" eth0 "$n-after" tcp port 80 >/dev/null; done
lab_capture_start client1 eth0 client1-after tcp port 80 >/dev/null
# from addresses the earlier runs did not use (a reused 4-tuple may still be in a MUX's flow table)
sc_client client1 http --url http://$VIP/ --count 500 --concurrency 8 --source 198.51.100.30-198.51.100.41 --json "$LAB_DIR/after.json" || rc=1
sleep 0.3
lab_capture_stop_all
statuses=() hstatuses=() cbefore=() cafter=()
for m in $(lab_nodes mux); do
  lab_daemon_status "$m" >"$LAB_DIR/status-$m.json"; statuses+=("$LAB_DIR/status-$m.json")
  lab_exec "$m" curl -s -m 2 "http://127.0.0.1:$LAB_MUX_STATUS_PORT/metrics" >"$LAB_DIR/metrics-$m.txt" || rc=1
done
for h in $hosts; do
  lab_daemon_status "$h" >"$LAB_DIR/status-$h.json"; hstatuses+=("$LAB_DIR/status-$h.json")
  sc_counters "$h" "$LAB_DIR/counters-$h-after.json" || rc=1
  cbefore+=("$LAB_DIR/counters-$h-before.json"); cafter+=("$LAB_DIR/counters-$h-after.json")
done
join() { local IFS=,; echo "$*"; }
before=() after=()
for n in $nics; do before+=("$n" "$n-change"); after+=("$n-after"); done
sc_verify workers --run "$LAB_DIR" --port 80 --drained $DRAIN --before "$(join "${before[@]}")" --after "$(join "${after[@]}")" \
  --status "$(join "${statuses[@]}")" || rc=1
sc_verify host-workers --run "$LAB_DIR" --status "$(join "${hstatuses[@]}")" --before "$(join "${cbefore[@]}")" \
  --after "$(join "${cafter[@]}")" --client-captures client1-path,client1-change,client1-after || rc=1
exit "$rc"
