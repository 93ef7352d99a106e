#!/usr/bin/env bash
# 23-backend-removed: a backend removed from its pool is gone, and so are its connections; a drained one
# is the graceful way out (scenario 08). 120 long-lived keep-alive connections (each asks again every
# 200 ms for 20 s: paced, so they outlive the change by construction) run to the 4 backends; h2vm1 is
# removed from the pool through the API (slbctl backend del web h2vm1 --wait). What must happen, checked
# connection by connection from the captures (every MUX's VXLAN, every backend's eth0, the client's
# eth0; tshark recounts), the client's records and the MUXes' counters:
#   * each connection that was on h2vm1 is re-placed by the MUX at its next packet onto one other
#     backend of the new table, which has no such connection and resets it: the client sees the reset
#     (ECONNRESET) within one request, instead of waiting on a backend that may no longer exist;
#     the MUXes' flow_replaced grows by exactly the number of those connections;
#   * no packet reaches h2vm1 once every MUX applied the change, and no new connection ever does;
#   * every connection on the other backends completes, on its backend, untouched.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
VIP=203.0.113.10
REMOVED=h2vm1
CONNECTIONS=${CONNECTIONS:-120}
HOLD_MS=${HOLD_MS:-20000}
lab_setup_scenario sc23
lab_up
for n in h1vm1 h1vm2 h2vm1 h2vm2; do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 20; done
hc_wait_mux_candidates web/http80 h1vm1,h1vm2,h2vm1,h2vm2 20 >/dev/null
rc=0
for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" udp port 4789 >/dev/null; done
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" tcp port 80 >/dev/null; done
lab_capture_start client1 eth0 client1 tcp port 80 >/dev/null

# the long-lived connections, all opened at once; they run for HOLD_MS whatever happens meanwhile
sc_client client1 hold --url "http://$VIP/health" --connections "$CONNECTIONS" --duration-ms "$HOLD_MS" --interval-ms 200 \
  --timeout-ms 15000 --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/hold.json" >"$LAB_DIR/hold.out" 2>&1 &
hold=$!
# every connection open and answered a few times (checked again from the records): each of client1's
# sockets to the VIP has received at least 6 data segments (an answer takes one or two), within 60 s
answered() { lab_exec client1 ss -Htni state established "( dport = :80 )" dst "$VIP" | grep -o 'data_segs_in:[0-9]*' | awk -F: '$2 >= 6 { n++ } END { print n + 0 }'; }
sc_wait_for "$CONNECTIONS connections answered at least 3 times" 60 eval '[ "$(answered)" -ge "$CONNECTIONS" ]' || rc=1

for m in $(lab_nodes mux); do sc_counters "$m" "$LAB_DIR/counters-$m-before.json" || rc=1; done
change_us=$(hc_now_us)
lab_slbctl --json backend del web "$REMOVED" --wait >"$LAB_DIR/del.json" || rc=1
applied_us=$(hc_now_us)
echo "$change_us $applied_us" >"$LAB_DIR/change-us.txt"  # for re-running the verifier on this run
printf '[sc23] %s removed from pool web; every agent applied it %d ms after the call\n' "$REMOVED" $(( (applied_us - change_us) / 1000 ))

# the hold client exits 1 when a connection failed, as those on the removed backend must: the verifier
# checks that status against the records
hold_status=0
wait "$hold" || hold_status=$?
cat "$LAB_DIR/hold.out"
for m in $(lab_nodes mux); do sc_counters "$m" "$LAB_DIR/counters-$m-after.json" || rc=1; done

# new connections, from the client's addresses: none may reach the removed backend
sc_client client1 http --url "http://$VIP/" --count 400 --concurrency 8 --source 198.51.100.10-198.51.100.41 \
  --json "$LAB_DIR/new.json" || rc=1
lab_capture_stop_all || rc=1

sc_verify backend-removed --run "$LAB_DIR" --vip "$VIP" --port 80 --removed "$REMOVED" --change-us "$change_us" \
  --applied-us "$applied_us" --connections "$CONNECTIONS" --hold-status "$hold_status" || rc=1
exit "$rc"
