#!/usr/bin/env bash
# 39-snat-exhaustion-and-restarts (issue 15): outbound NAT under exhaustion and restarts, in the outbound
# lab (examples/lab-outbound.yaml) with h1vm1 in a rule of its own (203.0.113.201, at most 64 ports, 16
# preallocated; scripts/scenarios/lib/snat-restarts.ts config). The remote server runs in client1.
#   1. h1vm1 opens 80 concurrent connections (16 more than its cap): host1 asks the controller for ports
#      as they run out (demand, granted up to 64; the time from a demand to its ports being usable is
#      read from host1's /status), exactly 64 complete, 16 never connect and are counted
#      drop_out_snat_exhausted, none of the connected ones is reset.
#   2. The controller restarts: GET /v1/snat is the same before and after.
#   3. host1's agent restarts (SIGTERM, its flow snapshot kept) under 200 live connections of h1vm2 from
#      203.0.113.200: how many complete is reported; 20 new connections afterwards all complete.
#   4. host1's agent is killed (SIGKILL) under 100 live connections of h1vm2 opened after its last flow
#      snapshot (it was started with --flow-snapshot-ms 600000: its start's snapshot is its only one), and
#      started again: their flows come back from the flow journal (its /status: journal.snatRestored), and
#      all 100 complete, none reset or failed.
# Verified by scripts/scenarios/lib/snat-restarts.ts from the client tool's and the server's records,
# host1's counters and status, and the controller's GET /v1/snat. About 100-140 s (the lab's start most).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
CONNECTIONS=${CONNECTIONS:-80}
RESTART_CONNECTIONS=${RESTART_CONNECTIONS:-200}
KILL_CONNECTIONS=${KILL_CONNECTIONS:-100}
SERVER=198.51.100.10
SR=("${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/snat-restarts.js")
lab_setup_scenario sc39
cfg=$(mktemp --suffix .yaml)
"${SR[@]}" config --from examples/lab-outbound.yaml --out "$cfg"
lab_up --config "$cfg"
rm -f "$cfg"
rc=0
lab_snat_server_start client1
snat_json() { lab_slbctl --json snat >"$LAB_DIR/$1" || rc=1; }

# 1. exhaustion and ports on demand
snat_json snat-before.json
sc_counters host1 "$LAB_DIR/counters-host1-before.json" || rc=1
lab_snat_client h1vm1 --server "$SERVER" --tcp "$CONNECTIONS" --seconds 6 --ramp-ms 500 --timeout-ms 20000 \
  --json "$LAB_DIR/exhaust.json" >"$LAB_DIR/exhaust.out" 2>&1 || rc=1
tail -n 1 "$LAB_DIR/exhaust.out"
sc_counters host1 "$LAB_DIR/counters-host1-after.json" || rc=1
sc_status_field host1 snat >"$LAB_DIR/host1-snat.json" || rc=1
snat_json snat-after-demand.json

# 2. the controller restarts
snat_json snat-ctl-before.json
lab_controller_stop || rc=1
lab_controller_start || rc=1
snat_json snat-ctl-after.json

# 3. host1's agent restarts under live connections
lab_snat_client h1vm2 --server "$SERVER" --tcp "$RESTART_CONNECTIONS" --seconds 20 --ramp-ms 2000 --timeout-ms 20000 \
  --json "$LAB_DIR/restart.json" >"$LAB_DIR/restart.out" 2>&1 &
client=$!
sc_wait_for "$RESTART_CONNECTIONS connections established at the server" 60 \
  eval '[ "$(lab_exec client1 ss -Htn state established "( sport = :9000 )" | wc -l)" -ge '"$RESTART_CONNECTIONS"' ]' || rc=1
lab_host_agent_stop host1 || rc=1
lab_host_agent_start host1 || rc=1
wait "$client" || rc=1
tail -n 1 "$LAB_DIR/restart.out"
lab_snat_client h1vm2 --server "$SERVER" --tcp 20 --seconds 2 --json "$LAB_DIR/after-restart.json" >"$LAB_DIR/after-restart.out" 2>&1 || rc=1

# 4. host1's agent killed under live connections that only its flow journal knows: no snapshot after its start's
lab_host_agent_stop host1 || rc=1
LAB_FLOW_SNAPSHOT_MS=600000 lab_host_agent_start host1 || rc=1
lab_snat_client h1vm2 --server "$SERVER" --tcp "$KILL_CONNECTIONS" --seconds 12 --ramp-ms 1000 --timeout-ms 30000 \
  --json "$LAB_DIR/kill.json" >"$LAB_DIR/kill.out" 2>&1 &
client=$!
sc_wait_for "$KILL_CONNECTIONS connections established at the server" 60 \
  eval '[ "$(lab_exec client1 ss -Htn state established "( sport = :9000 )" | wc -l)" -ge '"$KILL_CONNECTIONS"' ]' || rc=1
sc_status_field host1 flowSnapshot >"$LAB_DIR/snapshot-before-kill.json" || rc=1
lab_host_agent_stop host1 KILL || rc=1
lab_host_agent_start host1 || rc=1
sc_status_field host1 flowSnapshot >"$LAB_DIR/snapshot-after-kill.json" || rc=1
wait "$client" || rc=1
tail -n 1 "$LAB_DIR/kill.out"

lab_snat_server_stop >/dev/null || rc=1
"${SR[@]}" verify --run "$LAB_DIR" --connections "$CONNECTIONS" --restart-connections "$RESTART_CONNECTIONS" \
  --kill-connections "$KILL_CONNECTIONS" || rc=1
exit "$rc"
