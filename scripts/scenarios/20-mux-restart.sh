#!/usr/bin/env bash
# 20-mux-restart: 2 MUXes. 300 long-lived keep-alive HTTP connections (each asks again every 200 ms until
# the scenario ends them, 3 s after the restarted MUX is back in the route) and 5,000 new connections (two at a time, spanning the restart) run while mux1 is restarted: SIGTERM (it withdraws its VIPs,
# sends Cease, keeps forwarding for its grace, then stops), 2 s down, started again (it announces once
# it can forward, and the router adds it back to the ECMP route). Zero failed requests; every connection
# stays on the backend the Maglev table names; the restarted MUX, whose flow table starts empty, carries
# connections opened before its restart again (the router's hash-threshold multipath moves some back
# to it) and new ones. The times of the withdrawal and the rejoin come from route polls every ~10 ms.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/bgp.sh
VIP=203.0.113.10
MUX=mux1
DOWN_S=${DOWN_S:-2}
lab_setup_scenario bgp-sc20
bgp_scenario_traps
lab_up --muxes 2
bgp_wait_hops $VIP 2
for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" dst host $VIP and tcp dst port 80 >/dev/null; done
rc=0
bgp_poll_start $VIP "$LAB_DIR/polls.txt"
# the connections last until the scenario ends them (3 s after mux1 is back in the route), and a
# request waits up to 60 s: they outlive the restart by construction, however long it takes on a busy
# machine (the times are measured and printed)
sc_client client1 hold --url http://$VIP/health --connections 300 --duration-ms 300000 --end-file "$LAB_DIR/hold.end" --interval-ms 200 --timeout-ms 60000 \
  --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/hold.json" >"$LAB_DIR/hold.out" 2>&1 &
hold=$!
sleep 0.5
sc_client client1 http --url http://$VIP/ --count 5000 --concurrency 2 --timeout-ms 5000 \
  --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/http.json" >"$LAB_DIR/http.out" 2>&1 &
client=$!
sleep 2
t_stop=$(bgp_now_us)
lab_mux_stop $MUX TERM || rc=1
t_gone=$(bgp_now_us)
echo "$MUX stopped $(( (t_gone - t_stop) / 1000 )) ms after SIGTERM; router: $(lab_router_nexthops $VIP | paste -sd' ' -)"
sleep "$DOWN_S"
t_start=$(bgp_now_us)
lab_mux_start $MUX || rc=1
t_ready=$(bgp_now_us)
echo "$MUX started: in the router's route again $(( (t_ready - t_start) / 1000 )) ms after its start"
echo "TERM $t_stop $t_gone $t_start $t_ready" >"$LAB_DIR/restarts.txt"
sleep 3
touch "$LAB_DIR/hold.end"
wait "$client" || rc=1
wait "$hold" || rc=1
cat "$LAB_DIR/http.out" "$LAB_DIR/hold.out"
bgp_poll_stop
lab_birdc show protocols all >"$LAB_DIR/bird-protocols-end.txt"
sc_counters $MUX "$LAB_DIR/counters-$MUX.json" || rc=1
lab_capture_stop_all || rc=1
sc_verify mux-restart --run "$LAB_DIR" --vip $VIP --port 80 --mux $MUX --restarts "$LAB_DIR/restarts.txt" --polls "$LAB_DIR/polls.txt" \
  --hold-json "$LAB_DIR/hold.json" --http-json "$LAB_DIR/http.json" --counters "$LAB_DIR/counters-$MUX.json" \
  --bird-protocols "$LAB_DIR/bird-protocols-end.txt" || rc=1
exit "$rc"
