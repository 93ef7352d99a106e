#!/usr/bin/env bash
# 09-controller-restart: the controller is stopped (SIGTERM) and started again from its state file
# while 2,000 HTTP requests and 8 long-lived keep-alive connections (established before the restart,
# asking every 200 ms until the scenario ends them after it) run through the VIP. Each step waits for
# evidence, not for time: the 8 connections established (client1's sockets) and the MUXes' flow
# counters moved by 20 of the bulk's connections before the stop, and by 20 more before the start;
# once it is back, 200 more requests (new connections after the restart by construction, however
# far the bulk got meanwhile).
# Every request succeeds; the MUXes keep their tables (no policy re-applied: the same tables
# generation) and no flow moves (in the MUXes' captures every 5-tuple goes to one backend, the
# one that answered, before, while and after the controller is down); GET /v1/state is identical
# afterwards; every agent resyncs to the same generation.
# Then a live change through the API: `slbctl backend drain web h1vm1 --wait` is applied by every MUX
# (the time from the API call to the last MUX's ack is printed: the "policy change to last MUX"
# figure), after which no new connection reaches h1vm1 (its own capture has no SYN) and, undrained,
# it gets new connections again. Then 10 weight changes, each waited for: each is applied by every MUX,
# and every MUX must have held its watch open (a long poll) when each change was made: a change is
# pushed, never waits for a poll. The time from the API call to the last MUX's ack is measured, not
# asserted (its median printed and written to cp-propagation.json in the run folder): a wall-clock bound
# depends on the machine, and the bench report judges it (cp-propagation, 300 ms).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-2000}
SLOW=8
AFTER=200
BULK_BEFORE=${BULK_BEFORE:-20}   # new flows the MUXes must have placed before the controller is stopped
EVIDENCE_S=${EVIDENCE_S:-60}     # deadline for that evidence (generous: a loaded machine is slow, not wrong)
VIP=203.0.113.10
DRAIN=h1vm1
CP_CHANGES=${CP_CHANGES:-10}
lab_setup_scenario ctl-09
lab_up
R=$LAB_DIR
now_us() { printf '%s' "${EPOCHREALTIME/./}"; }
snapshot() {  # SUFFIX: the controller's state, health and the MUXes' own status
  lab_slbctl --json state >"$R/state-$1.json"
  lab_slbctl --json health >"$R/health-$1.json"
  local m
  for m in $(lab_nodes mux); do lab_daemon_status "$m" >"$R/$m-status-$1.json"; done
}
# waits until the host agents reported every probed (nic, probe) up (the probes settle after lab_up)
wait_health_up() {
  local i
  for i in $(seq 1 100); do
    lab_slbctl --json health | node -e 'let t="";process.stdin.on("data",d=>t+=d).on("end",()=>{const h=JSON.parse(t);process.exit(h.length>0&&h.every(x=>x.reported&&x.state==="up")?0:1)})' && return 0
    sleep 0.2
  done
  echo '[sc09] the probes did not all report up within 20 s:' >&2
  lab_slbctl health >&2
  return 1
}
rc=0

wait_health_up || rc=1
snapshot before
for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" >/dev/null; done
# the long-lived connections first, ended by the scenario once the controller is back (they outlive the
# restart by construction, however slow the machine), then the bulk once all of them are established
sc_client client1 hold --url "http://$VIP/" --connections "$SLOW" --duration-ms 300000 --interval-ms 200 --timeout-ms 15000 \
  --end-file "$R/slow-end" --json "$R/client-slow.json" >"$R/client-slow.out" 2>&1 &
slow=$!
sc_wait_for "$SLOW long-lived connections established" "$EVIDENCE_S" eval '[ "$(sc_established client1 "$VIP" 80)" -ge "$SLOW" ]' || rc=1
flows0=$(sc_mux_flows) || rc=1
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 4 --json "$R/client-http.json" >"$R/client-http.out" 2>&1 &
bulk=$!
sc_wait_for "$BULK_BEFORE new flows placed by the MUXes" "$EVIDENCE_S" eval '[ "$(sc_mux_flows)" -ge $(( ${flows0:-0} + BULK_BEFORE )) ]' || rc=1

flows1=$(sc_mux_flows) || rc=1
stop_us=$(now_us)
lab_controller_stop TERM
# traffic while it is down: the MUXes place BULK_BEFORE more new flows (the agents keep their policy)
sc_wait_for "$BULK_BEFORE new flows placed while the controller is down" "$EVIDENCE_S" eval '[ "$(sc_mux_flows)" -ge $(( ${flows1:-0} + BULK_BEFORE )) ]' || rc=1
lab_controller_start
start_us=$(now_us)
printf '[sc09] controller down for %d ms while traffic flowed\n' $(( (start_us - stop_us) / 1000 ))
sc_client client1 http --url "http://$VIP/" --count "$AFTER" --concurrency 4 --json "$R/client-after.json" >"$R/client-after.out" 2>&1 || rc=1
lab_slbctl wait --wait-s 15 || rc=1
lab_slbctl --json agents >"$R/agents-after.json"

wait "$bulk" || rc=1
touch "$R/slow-end"
wait "$slow" || rc=1
cat "$R/client-http.out" "$R/client-after.out" "$R/client-slow.out"
sleep 0.3 & wait $!
snapshot after
lab_capture_stop_all || rc=1

# a live change through the API, then new connections, from the client's other addresses: 5-tuples the
# MUXes have never seen (none can be mistaken for one of the 2,000 flows above they still remember)
lab_capture_start "$DRAIN" eth0 "$DRAIN-drained" >/dev/null
lab_slbctl --json backend drain web "$DRAIN" --wait >"$R/drain.json" || rc=1
sc_client client1 http --url "http://$VIP/" --count 300 --concurrency 8 --source 198.51.100.11-198.51.100.41 \
  --json "$R/client-drained.json" || rc=1
lab_capture_stop_all || rc=1
lab_slbctl backend undrain web "$DRAIN" --wait || rc=1
sc_client client1 http --url "http://$VIP/" --count 200 --concurrency 8 --source 198.51.100.11-198.51.100.41 \
  --json "$R/client-undrained.json" || rc=1

# the control-plane latency, sampled: CP_CHANGES weight changes of another backend (each rebuilds the
# pool's Maglev tables on every MUX), one after the other, each with --wait; the verifier reports the
# median of the controller's own figure (API call to the last MUX's ack). Before each change, the
# controller's view of the agents (GET /v1/agents) once every MUX holds its watch open again (up to
# EVIDENCE_S): the verifier checks that each change found every MUX waiting on a watch (a push)
for i in $(seq 1 "$CP_CHANGES"); do
  deadline=$(( $(now_us) + EVIDENCE_S * 1000000 ))
  while :; do
    lab_slbctl --json agents >"$R/cp-agents-$i.json" || rc=1
    node -e 'process.exit(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).every((a) => a.kind !== "mux" || a.watching >= 1) ? 0 : 1)' \
      "$R/cp-agents-$i.json" && break
    [ "$(now_us)" -lt "$deadline" ] || break
    sleep 0.05
  done
  lab_slbctl --json backend set web h1vm2 --weight $(( i % 2 == 1 ? 60 : 50 )) --wait >"$R/cp-change-$i.json" || rc=1
done

sc_verify controller-restart --run "$R" --requests "$REQUESTS" --after "$AFTER" --slow "$SLOW" --stop-us "$stop_us" --start-us "$start_us" \
  --drained "$DRAIN" --changes "$CP_CHANGES" || rc=1
exit "$rc"
