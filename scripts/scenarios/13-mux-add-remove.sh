#!/usr/bin/env bash
# 13-mux-add-remove: while 2,000 HTTP requests run (a new connection each) and 200 long-lived connections
# are open, a MUX joins (started: it announces the VIPs once it can forward, and the router adds it to
# the ECMP route) and another leaves gracefully (SIGTERM: it withdraws its VIPs, sends Cease, keeps
# forwarding for its grace, then stops). Zero failed requests, every long-lived connection completes on
# one backend; nothing reaches the leaving MUX after it stopped forwarding; the new one carried flows.
# Each step waits for evidence, not for time (the long-lived connections established, the MUXes' flow
# counters moving), and the long-lived connections are ended by the scenario after both changes, so
# they outlive them by construction.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/bgp.sh
REQUESTS=${REQUESTS:-2000}
VIP=203.0.113.10
ADD=mux3
REMOVE=mux1
lab_setup_scenario bgp-sc13
bgp_scenario_traps
lab_up --muxes 3
lab_mux_stop $ADD          # the MUX that will join: configured, its namespace up, its daemon not running
bgp_wait_hops $VIP 2
for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" dst host $VIP and tcp dst port 80 >/dev/null; done
rc=0
bgp_poll_start $VIP "$LAB_DIR/polls.txt"
HOLD=200
EVIDENCE_S=${EVIDENCE_S:-60}
sc_client client1 hold --url http://$VIP/health --connections "$HOLD" --duration-ms 300000 --interval-ms 200 --timeout-ms 10000 \
  --end-file "$LAB_DIR/hold-end" --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/hold.json" >"$LAB_DIR/hold.out" 2>&1 &
hold=$!
sc_wait_for "$HOLD long-lived connections established" "$EVIDENCE_S" eval '[ "$(sc_established client1 $VIP 80)" -ge "$HOLD" ]' || rc=1
first=()
for m in $(lab_nodes mux); do [ "$m" = "$ADD" ] || first+=("$m"); done
flows0=$(sc_mux_flows "${first[@]}") || rc=1
sc_client client1 http --url http://$VIP/ --count "$REQUESTS" --concurrency 4 --timeout-ms 5000 \
  --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/http.json" >"$LAB_DIR/http.out" 2>&1 &
client=$!
sc_wait_for "20 of the requests' flows placed" "$EVIDENCE_S" eval '[ "$(sc_mux_flows "${first[@]}")" -ge $(( ${flows0:-0} + 20 )) ]' || rc=1
t_add=$(bgp_now_us)
lab_mux_start $ADD || rc=1
echo "$ADD joined: in the router's route $(( ($(bgp_now_us) - t_add) / 1000 )) ms after its start"
sc_wait_for "$ADD placing new flows" "$EVIDENCE_S" eval '[ "$(sc_mux_flows $ADD)" -ge 10 ]' || rc=1
t_remove=$(bgp_now_us)
lab_mux_stop $REMOVE TERM || rc=1
echo "$REMOVE left: stopped $(( ($(bgp_now_us) - t_remove) / 1000 )) ms after SIGTERM; router: $(lab_router_nexthops $VIP | paste -sd' ' -)"
wait "$client" || rc=1
touch "$LAB_DIR/hold-end"
wait "$hold" || rc=1
cat "$LAB_DIR/http.out" "$LAB_DIR/hold.out"
bgp_poll_stop
lab_birdc show protocols all >"$LAB_DIR/bird-protocols-end.txt"
sc_counters $ADD "$LAB_DIR/counters-$ADD.json"
lab_capture_stop_all || rc=1
sc_verify mux-add-remove --run "$LAB_DIR" --vip $VIP --port 80 --added $ADD --removed $REMOVE --added-us "$t_add" --removed-us "$t_remove" \
  --http-json "$LAB_DIR/http.json" --hold-json "$LAB_DIR/hold.json" --bird-protocols "$LAB_DIR/bird-protocols-end.txt" \
  --counters-added "$LAB_DIR/counters-$ADD.json" || rc=1
exit "$rc"
