#!/usr/bin/env bash
# 09-controller-restart: the controller is stopped (SIGTERM) and started again from its state file
# while 2,000 HTTP requests and 8 slow ones (established before the restart, answered after it) run
# through the VIP. Every request succeeds; the MUXes keep their tables (no policy re-applied: the same
# tables generation) and no flow moves (in the MUXes' captures every 5-tuple goes to one backend, the
# one that answered, before, while and after the controller is down); GET /v1/state is identical
# afterwards; every agent resyncs to the same generation.
# Then a live change through the API: `slbctl backend drain web h1vm1 --wait` is applied by every MUX
# (the time from the API call to the last MUX's ack is printed: the "policy change to last MUX"
# figure), after which no new connection reaches h1vm1 (its own capture has no SYN) and, undrained,
# it gets new connections again. Then 10 weight changes, each waited for: the median time from the API
# call to the last MUX's ack must be at most 300 ms, and every MUX must have held its watch open (a long
# poll) when each change was made: a change is pushed, never waits for a poll.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-2000}
SLOW=8
SLOW_MS=4000
VIP=203.0.113.10
DRAIN=h1vm1
CP_CHANGES=${CP_CHANGES:-10}
CP_MEDIAN_MS=${CP_MEDIAN_MS:-300}
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
sc_client client1 http --url "http://$VIP/slow/$SLOW_MS" --count "$SLOW" --concurrency "$SLOW" --timeout-ms 15000 \
  --json "$R/client-slow.json" >"$R/client-slow.out" 2>&1 &
slow=$!
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 4 --json "$R/client-http.json" >"$R/client-http.out" 2>&1 &
bulk=$!
sleep 0.7 & wait $!

stop_us=$(now_us)
lab_controller_stop TERM
sleep 0.3 & wait $!   # the agents notice, keep their policy and retry
lab_controller_start
start_us=$(now_us)
printf '[sc09] controller down for %d ms while traffic flowed\n' $(( (start_us - stop_us) / 1000 ))
lab_slbctl wait --wait-s 15 || rc=1
lab_slbctl --json agents >"$R/agents-after.json"

wait "$bulk" || rc=1
wait "$slow" || rc=1
cat "$R/client-http.out" "$R/client-slow.out"
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
# pool's Maglev tables on every MUX), one after the other, each with --wait; the verifier takes the
# median of the controller's own figure (API call to the last MUX's ack) against CP_MEDIAN_MS. Before
# each change, the controller's view of the agents (GET /v1/agents) once every MUX holds its watch open
# again (up to 5 s): the verifier checks that each change found every MUX waiting on a watch (a push)
for i in $(seq 1 "$CP_CHANGES"); do
  deadline=$(( $(now_us) + 5000000 ))
  while :; do
    lab_slbctl --json agents >"$R/cp-agents-$i.json" || rc=1
    node -e 'process.exit(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).every((a) => a.kind !== "mux" || a.watching >= 1) ? 0 : 1)' \
      "$R/cp-agents-$i.json" && break
    [ "$(now_us)" -lt "$deadline" ] || break
    sleep 0.05
  done
  lab_slbctl --json backend set web h1vm2 --weight $(( i % 2 == 1 ? 60 : 50 )) --wait >"$R/cp-change-$i.json" || rc=1
done

sc_verify controller-restart --run "$R" --requests "$REQUESTS" --slow "$SLOW" --stop-us "$stop_us" --start-us "$start_us" \
  --drained "$DRAIN" --changes "$CP_CHANGES" --max-median-ms "$CP_MEDIAN_MS" || rc=1
exit "$rc"
