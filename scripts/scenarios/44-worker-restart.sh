#!/usr/bin/env bash
# 44-worker-restart (issue 19): a worker that dies is restarted without taking the others down. 2 MUXes,
# every MUX and host agent with --workers 2 (ring sockets) and --test-hooks. 100 long-lived keep-alive
# HTTP connections (each asks again every 200 ms) and a steady stream of new ones (40 a second) run through
# the VIP while MUX worker 0 of mux1 is killed (POST /test/workers/0/exit on its status endpoint: the
# thread exits, the daemon restarts it), then host agent worker 1 of host1. scripts/scenarios/lib/worker-restart.ts
# checks, from /status, GET /test/workers, /counters, the router's route polls, BIRD and the captures
# (slbx's codecs and tshark):
#   - each killed worker is back: 1 restart, a new thread, at its daemon's generation; the other worker
#     kept its thread and kept receiving; the daemon kept its PID; the router routed the VIP over both
#     MUXes in every poll (no withdrawal) and no BGP session was re-established;
#   - MUX: the dead worker's flows fall back to the Maglev choice: every long-lived connection completes on
#     its Maglev backend (computed from the config), none reset; 0 failed requests; no RST at the client;
#   - host agent (--state-dir, which the lab gives every host agent): the restarted worker reads its own
#     flow snapshot and journal and the other worker's (the flows steering gives it) before its first
#     frame, and in its regroup the other's journal again: it carries its flows (its dsr_flows_restored +
#     dsr_flows_replayed > 0, printed). While its sockets are gone the kernel's fanout group has one member
#     left, which gets every frame: it delivers the clients' segments of the dead worker's flows and records
#     them (dsr_flows_learned_midstream), and drops a backend's reply of such a flow whose client sent
#     nothing since the kill (drop_out_dsr_unsolicited); frames in the regroup's instant with no member are
#     dropped by the kernel. So backend segments lost at host1 are allowed only from the kill to the end of
#     the regroup, each through on a retransmission; after it drop_out_dsr_unsolicited does not move; no
#     connection stalls and nothing fails. SLOW server-first requests (/slow/SLOW_MS) go out just before
#     the host worker kill and are answered after its restart: each is answered, those steered to the
#     killed worker at host1 included (a worker restarted without its flows drops their answers: a stall);
#   - no reordering within a flow (replies at the client, requests at the backends).
# Usage: scripts/scenarios/44-worker-restart.sh  (MUX=mux1 HOST=host1 to pick the daemons)
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/bgp.sh
VIP=203.0.113.10
MUX=${MUX:-mux1}
HOST=${HOST:-host1}
CONNS=${CONNS:-100}
# server-first requests opened just before the host worker kill: the server answers SLOW_MS later, after the
# restart, and the client has nothing more to send (scenario 19's check, for a worker)
SLOW=${SLOW:-32}
SLOW_MS=${SLOW_MS:-4000}
lab_workers_env 2
LAB_TEST_HOOKS=1
lab_setup_scenario sc44
bgp_scenario_traps
# patient probes (as scenario 11): a probe starved by the loaded machine must not take a backend out of
# the Maglev table while the connections' backends are judged against it
CFG=$(mktemp --tmpdir slbx-sc44-XXXX.yaml)
sed 's/^    intervalMs: 1000 .*/    intervalMs: 2000\n    timeoutMs: 2000\n    downThreshold: 5/' examples/lab.yaml >"$CFG"
[ "$(grep -c '^    downThreshold: 5' "$CFG")" = 1 ] || { echo "FAIL could not derive the config with a patient http80 probe" >&2; exit 1; }
lab_up --muxes 2 --config "$CFG"
rm -f "$CFG"
bgp_wait_hops $VIP 2 60
rc=0
WR=$LAB_DIR/wr
mkdir -p "$WR"
: >"$WR/events.txt"

# worker_check NODE EXPR: EXPR holds over NODE's /status (s: the status, w: its workers)
worker_check() {
  lab_daemon_status "$1" | node -e 'const s = JSON.parse(require("fs").readFileSync(0, "utf8")), w = s.workers ?? [];
    process.exit(eval(process.argv[1]) ? 0 : 1)' "$2"
}

# kill_worker NODE WORKER: saves NODE's /status, thread ids and counters, kills the worker through the hook,
# waits until it is back (1 restart, alive at the daemon's generation), saves
# them all again; appends "KIND NODE WORKER KILL_US BACK_US PID_BEFORE PID_AFTER" to events.txt
kill_worker() {
  local node=$1 w=$2 kind daemon pid0 pid1 t_kill t_back
  kind=$(_lab_node_kind "$node")
  daemon=mux; [ "$kind" = host ] && daemon=host-agent
  pid0=$(_lab_daemon_pid "$daemon" "$node")
  lab_daemon_status "$node" >"$WR/$node-status-before.json"
  lab_worker_threads "$node" >"$WR/$node-threads-before.json" || { echo "FAIL $node: GET /test/workers (is --test-hooks on?)"; return 1; }
  sc_counters "$node" "$WR/$node-counters-kill.json"
  t_kill=$(sc_now_us)
  echo "$node: $(lab_worker_exit "$node" "$w" | tr -d ' \n')"
  # the restart is followed in the daemon's log, not by polling /status: reads then waited on the daemon's
  # main thread for the exiting worker's counters (under load 16 they held mux1's BGP keepalives past the
  # 3 s hold time). The pool no longer blocks (d22596c: awaited, until the worker's exit at most); the
  # log stays the cheaper witness on a loaded machine
  sc_wait_for "$node worker $w restarted (its log)" 60 \
    grep -q "\"event\":\"${kind}_worker_started\",\"worker\":$w,.*\"restarts\":1" "$LAB_DIR/logs/$node.log" || return 1
  sc_wait_for "$node worker $w alive at its daemon's generation" 60 \
    worker_check "$node" "w[$w]?.restarts === 1 && w[$w].alive && w[$w].generation === s.generation" || return 1
  # host agent: back means regrouped (every worker in its groups again, in index order): from then on the
  # restarted worker gets its flows' frames again, with the flows it restored
  if [ "$kind" = host ]; then
    sc_wait_for "$node workers regrouped (its log)" 60 \
      grep -q '"event":"host_workers_regrouped",.*"regroups":1[,}]' "$LAB_DIR/logs/$node.log" || return 1
  fi
  t_back=$(sc_now_us)
  sc_counters "$node" "$WR/$node-counters-back.json"
  lab_daemon_status "$node" >"$WR/$node-status-after.json"
  lab_worker_threads "$node" >"$WR/$node-threads-after.json"
  pid1=$(_lab_daemon_pid "$daemon" "$node")
  echo "$kind $node $w $t_kill $t_back $pid0 $pid1" >>"$WR/events.txt"
  echo "$node worker $w back $(( (t_back - t_kill) / 1000 )) ms after the kill"
  # the restarted host worker's flows, read from the state dir (--state-dir: its set and the others')
  [ "$kind" != host ] || node -e 'const w = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).workers?.[process.argv[2]]?.flowSnapshot;
    console.log(w == null ? "no flow snapshot in its /status" : `restored worker: dsr_flows_restored ${w.dsrRestored}, dsr_flows_replayed ${w.dsrReplayed} (caught up in the regroup ${w.dsrCaughtUp}), snat ${w.snatRestored}; sets read ${w.setsRead.join(" ")}`)' \
    "$WR/$node-status-after.json" "$w"
}

lab_capture_start client1 eth0 client1 tcp port 80 >/dev/null
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" tcp port 80 >/dev/null; done
bgp_poll_start $VIP "$WR/polls.txt"
lab_birdc show protocols >"$WR/bird-before.txt"
sc_counters "$HOST" "$WR/$HOST-counters-before.json"
# the connections last until the scenario ends them; a request waits up to 15 s (a worker is back in 3-5 s,
# loaded; the longest answer measured 1.8 s): only a stalled connection would time out, and none may
sc_client client1 hold --url http://$VIP/health --connections $CONNS --duration-ms 300000 --end-file "$WR/end" --interval-ms 200 --timeout-ms 15000 \
  --source 198.51.100.10-198.51.100.41 --json "$WR/hold.json" >"$WR/hold.out" 2>&1 &
hold=$!
sc_wait_for "$CONNS long-lived connections established" 60 eval '[ "$(sc_established client1 $VIP 80)" -ge $CONNS ]' || rc=1
sc_client client1 http --url http://$VIP/ --count 100000 --rate 40 --concurrency 8 --timeout-ms 15000 --end-file "$WR/end" \
  --source 198.51.100.10-198.51.100.41 --json "$WR/http.json" >"$WR/http.out" 2>&1 &
stream=$!
flows0=$(sc_mux_flows || echo 0)   # 0: a MUX that does not answer (the waits below then fail and say so)
sc_wait_for "100 connections of the stream placed" 60 eval '[ "$(sc_mux_flows)" -ge $((flows0 + 100)) ]' || rc=1
kill_worker "$MUX" 0 || rc=1
flows0=$(sc_mux_flows || echo 0)
sc_wait_for "100 more connections of the stream placed" 60 eval '[ "$(sc_mux_flows)" -ge $((flows0 + 100)) ]' || rc=1
flows0=$(sc_mux_flows || echo 0)
sc_client client1 http --url "http://$VIP/slow/$SLOW_MS" --count "$SLOW" --concurrency "$SLOW" --timeout-ms 20000 \
  --source 198.51.100.10-198.51.100.41 --json "$WR/slow.json" >"$WR/slow.out" 2>&1 &
slow=$!
# placed by the MUXes (the stream's flows count too), then a moment for the requests to follow their handshakes
sc_wait_for "the MUXes placed the $SLOW server-first requests' flows" 60 eval '[ "$(sc_mux_flows)" -ge $((flows0 + SLOW)) ]' || rc=1
sleep 0.5
kill_worker "$HOST" 1 || rc=1
flows0=$(sc_mux_flows || echo 0)
sc_wait_for "200 more connections of the stream placed" 60 eval '[ "$(sc_mux_flows)" -ge $((flows0 + 200)) ]' || rc=1
touch "$WR/end"
wait "$stream" || rc=1
wait "$hold" || rc=1
wait "$slow" || rc=1
tail -n 3 "$WR/hold.out" "$WR/http.out" "$WR/slow.out"
bgp_poll_stop
lab_birdc show protocols >"$WR/bird-after.txt"
sc_counters "$HOST" "$WR/$HOST-counters-after.json" || rc=1
lab_daemon_status "$HOST" >"$WR/$HOST-status-end.json"
lab_capture_stop_all || rc=1
sc_verify worker-restart --run "$LAB_DIR" --vip $VIP --port 80 --slow-ms "$SLOW_MS" || rc=1
exit "$rc"
