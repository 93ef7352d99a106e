#!/usr/bin/env bash
# 19-host-agent-restart: 200 long-lived keep-alive HTTP connections (each asks again every 200 ms until
# the scenario ends them after the restarts) run through both hosts while host1's agent is killed (SIGKILL: nothing saved, nothing cleaned up),
# left down for 2 s and started again; then stopped gracefully (SIGTERM) and started again. The agent's
# inbound NAT comes from the MUX's VXLAN packet plus policy, and its return path's flows from the flow
# snapshot its predecessor wrote (every second when they changed, and at SIGTERM; the lab gives it
# --state-dir; docs/reliability.md) and from the flow journal beside it (every new or changed flow,
# written at the end of the event-loop turn that made it), so the new process carries every connection
# the old one did, those opened in the second before the SIGKILL included: TCP retransmits what was lost
# in the gap (a backend's response included: its flow is known), and every connection completes on its
# backend, none reset. No backend segment ever re-learns a flow. The verifier prints per restarted agent
# the flows restored from the snapshot, replayed from the journal, and re-learned from a client.
# Server first: just before the SIGKILL, SLOW requests go out whose server answers SLOW_MS later (the
# client has nothing more to send: the server speaks first after the restart); each must be answered.
# While it is down, the captures show VXLAN reaching host1 and nothing reaching its backends. Its
# probes restart too: a restarted agent reports nothing down before its first failure
# (docs/probes.md), so new connections reach host1's backends at once after the start.
# With LAB_DAEMON_IO=ring LAB_HOST_WORKERS=2 the agents run 2 workers, each with its own flow snapshot and
# journal (host-agent-host1.wI.flows): the entries check adds up the workers' loads.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
VIP=203.0.113.10
HOST=host1
DOWN_S=${DOWN_S:-2}
SLOW=${SLOW:-16}
SLOW_MS=${SLOW_MS:-5000}
lab_setup_scenario sc19
lab_up
rc=0
lab_capture_start $HOST fab0 $HOST udp port 4789 >/dev/null
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" tcp port 80 >/dev/null; done

now_us() { printf '%s' "${EPOCHREALTIME/./}"; }
# the connections last until the scenario ends them (HOLD_END, after the restarts and the new
# connections), and a request waits up to 60 s: they outlive the restarts by construction, however
# long a restart takes on a busy machine (the waits are measured and printed)
sc_client client1 hold --url http://$VIP/health --connections 200 --duration-ms 300000 --end-file "$LAB_DIR/hold.end" --interval-ms 200 --timeout-ms 60000 \
  --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/hold.json" >"$LAB_DIR/hold.out" 2>&1 &
hold=$!
sleep 2

# restart SIGNAL: stops host1's agent with SIGNAL, waits DOWN_S after it has exited, starts it; appends
# "SIGNAL STOP_US GONE_US START_US READY_US" (signal sent, process gone, start, ready with policy)
restart() {
  local sig=$1 t_stop t_gone t_start t_ready
  t_stop=$(now_us)
  lab_host_agent_stop $HOST "$sig" || return 1
  t_gone=$(now_us)
  sleep "$DOWN_S"
  t_start=$(now_us)
  lab_host_agent_start $HOST || return 1
  t_ready=$(now_us)
  echo "$sig $t_stop $t_gone $t_start $t_ready" >>"$LAB_DIR/restarts.txt"
  echo "$HOST's agent: SIG$sig, gone $(( (t_gone - t_stop) / 1000 )) ms after the signal, down $(( (t_start - t_gone) / 1000 )) ms, then ready (policy applied) $(( (t_ready - t_start) / 1000 )) ms after its start"
}
: >"$LAB_DIR/restarts.txt"
# the server-first requests: opened just before the SIGKILL (the MUXes placed them: the SYNs went
# through), answered SLOW_MS after the request, across the restart
flows0=$(sc_mux_flows)
sc_client client1 http --url "http://$VIP/slow/$SLOW_MS" --count "$SLOW" --concurrency "$SLOW" --timeout-ms 60000 \
  --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/slow.json" >"$LAB_DIR/slow.out" 2>&1 &
slow=$!
sc_wait_for "the MUXes placed the $SLOW server-first requests' flows" 60 eval '[ "$(sc_mux_flows)" -ge $((flows0 + SLOW)) ]' || rc=1
restart KILL || rc=1
sleep 2
restart TERM || rc=1
# new connections right after the restart: host1's backends take their share at once
sc_client client1 http --url http://$VIP/ --count 400 --concurrency 4 --timeout-ms 5000 \
  --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/http.json" >"$LAB_DIR/http.out" 2>&1 || rc=1
sleep 1
touch "$LAB_DIR/hold.end"
wait "$hold" || rc=1
wait "$slow" || rc=1
cat "$LAB_DIR/hold.out" "$LAB_DIR/http.out" "$LAB_DIR/slow.out"
sc_counters $HOST "$LAB_DIR/counters-$HOST.json" || rc=1
lab_slbctl health --json >"$LAB_DIR/health.json" || rc=1
lab_capture_stop_all || rc=1
sc_verify host-restart --run "$LAB_DIR" --vip $VIP --port 80 --host $HOST --restarts "$LAB_DIR/restarts.txt" \
  --hold-json "$LAB_DIR/hold.json" --http-json "$LAB_DIR/http.json" --counters "$LAB_DIR/counters-$HOST.json" \
  --health "$LAB_DIR/health.json" --slow-json "$LAB_DIR/slow.json" --slow-ms "$SLOW_MS" || rc=1
exit "$rc"
