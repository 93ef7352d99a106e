#!/usr/bin/env bash
# 37-eight-muxes (issue 18, point 4): one controller's limit, 8 MUXes live (docs/config.md: a ninth is
# refused). The router (BIRD 2, merge paths limit 16) holds one ECMP route with 8 next hops. 4,000 new
# HTTP connections (one request each, 32 source addresses): every one answered, by the backend Maglev
# chooses (the independent oracle), and each MUX carries at least 8 % of them (12.5 % is the even
# share), counted per MUX from the MUXes' captures (the MUX with a connection's first packet; tshark
# recounts the SYNs). TCP, not one-datagram UDP flows: a lost datagram is a failed flow, and the host
# agents' capture of a backend's port loses frames on a loaded machine without counting them
# (docs/east-west.md, Bench; measured here: 37-74 of 4,000 echoes lost in one burst). Meanwhile 400
# long-lived keep-alive HTTP connections (each asks again every 500 ms) are held through four steps:
#   1. kill -9 mux3 (its BGP session dies with the process),
#   2. SIGSTOP mux6 (BIRD's hold timer, 3 s in the lab, drops it),
#   3. SIGCONT mux6 (it finds its session expired, reconnects and announces again),
#   4. mux3 started again (no flow state: the same Maglev tables place the connections it gets).
# After each step, once the router's route says so, the scenario records `ip -j route` in the router
# namespace and BIRD's `show route all` and `show protocols`; the verifier checks each against the live
# set it derives from the steps (not from the route): exactly the live MUXes, equal weights, a path and
# an Established session from each live MUX only. Zero failed connections (client records: every one
# completed, none reset, each answered by one backend, the oracle's, every request answered); from the
# captures, connections that were on mux3 and on mux6 moved to the others at their step, and the
# restarted mux3 carried held connections again. Each step waits for evidence (the route, every
# connection answered twice since), never for a fixed time.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
# 8 MUXes, 2 host agents and a controller start at once: on a loaded 2-core machine (load average 49
# measured) they are not all ready within lib.sh's default 20 s; readiness is evidence, not a verdict
export LAB_READY_TIMEOUT_S=${LAB_READY_TIMEOUT_S:-120}
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/bgp.sh
FLOWS=${FLOWS:-4000}
CONNS=${CONNS:-400}
VIP=203.0.113.10
KILLED=mux3
STOPPED=mux6
EVIDENCE_S=${EVIDENCE_S:-90}
lab_setup_scenario bgp-sc37
bgp_scenario_traps
rc=0
T0=$(bgp_now_us)
at() { echo "[+$(( ($(bgp_now_us) - T0) / 1000000 )) s] $*"; }

# The lab's http80 probe made patient (as in 11): the held connections need a stable pool, and a probe
# starved by a loaded machine would move the Maglev table under them (the verifier names it if so).
CFG_DIR=$(_lab_dir_of "$LAB_NAME").cfg
mkdir -p "$CFG_DIR"
CFG=$CFG_DIR/lab-patient-probes.yaml
sed 's/^    intervalMs: 1000 .*/    intervalMs: 2000\n    timeoutMs: 2000\n    downThreshold: 5/' examples/lab.yaml >"$CFG"
[ "$(grep -c '^    downThreshold: 5' "$CFG")" = 1 ] || { echo "FAIL could not derive the config with a patient http80 probe" >&2; exit 1; }

t_boot=$(bgp_now_us)
lab_up --muxes 8 --config "$CFG"
at "lab with 8 MUXes up in $(( ($(bgp_now_us) - t_boot) / 1000 )) ms"
t_start=$(bgp_now_us)
for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" dst host $VIP and tcp dst port 80 >/dev/null; done
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" tcp port 80 >/dev/null; done

pa_of() { _lab_plan_line mux "$1" | awk '{ print $3 }'; }
# the PAs of every MUX but those named, sorted, comma-separated
live_pas() {
  local m out=()
  for m in $(lab_nodes mux); do [[ " $* " == *" $m "* ]] || out+=("$(pa_of "$m")"); done
  printf '%s\n' "${out[@]}" | sort | paste -sd, -
}
route_is() { [ "$(lab_router_nexthops $VIP | paste -sd, -)" = "$1" ]; }
# step NAME DEAD...: wait until the router's route is exactly the live MUXes, then record the router's
# kernel route and BIRD's view (the verifier judges them; this wait only paces the scenario)
step() {
  local name=$1; shift
  local want; want=$(live_pas "$@")
  sc_wait_for "the router's route to $VIP over exactly the live MUXes ($want)" "$EVIDENCE_S" route_is "$want" || rc=1
  lab_exec router ip -j -4 route show $VIP/32 >"$LAB_DIR/step-$name-fib.json"
  lab_birdc show route all $VIP/32 >"$LAB_DIR/step-$name-route.txt"
  lab_birdc show protocols >"$LAB_DIR/step-$name-protocols.txt"
  echo "$name $(bgp_now_us)" >>"$LAB_DIR/steps.txt"
  at "step $name: router $(lab_router_nexthops $VIP | wc -l) next hops"
}
segs_in() { lab_exec client1 ss -Htni state established "( dport = :80 )" dst "$VIP" | grep -o 'data_segs_in:[0-9]*' | cut -d: -f2; }
snapshot() { segs_in | sort -n | tail -n 1; }
answered_since() { local base=$1 n=$2 min; min=$(segs_in | sort -n | head -n 1); [ -n "$min" ] && [ "$min" -ge $((base + n)) ]; }
all_answered() { [ "$(segs_in | awk -v k="$2" '$1 >= k { n++ } END { print n + 0 }')" -ge "$1" ]; }
settle() { local s0; s0=$(snapshot); sc_wait_for "every open connection answered twice since $1" "$EVIDENCE_S" answered_since "$s0" 4 || rc=1; }

step all8
sc_client client1 hold --url http://$VIP/health --connections "$CONNS" --duration-ms 900000 --interval-ms 500 --timeout-ms 15000 \
  --end-file "$LAB_DIR/hold-end" --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/hold.json" >"$LAB_DIR/hold.out" 2>&1 &
hold=$!
sc_wait_for "$CONNS long-lived connections established" "$EVIDENCE_S" eval '[ "$(sc_established client1 $VIP 80)" -ge "$CONNS" ]' || rc=1
sc_wait_for "each of the $CONNS connections answered 3 times (6 data segments)" "$EVIDENCE_S" all_answered "$CONNS" 6 || rc=1

echo "--- the spread: $FLOWS new connections over 8 MUXes"
sc_client client1 http --url http://$VIP/ --count "$FLOWS" --concurrency 16 --timeout-ms 15000 \
  --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/http.json" >"$LAB_DIR/http.out" 2>&1 || rc=1
at "the new connections done: $(tail -n 1 "$LAB_DIR/http.out")"

echo "--- 1. kill -9 $KILLED"
pid=$(lab_mux_pid $KILLED)
t_kill=$(bgp_now_us)
kill -KILL "$pid"
echo "killed $KILLED (pid $pid) with SIGKILL"
lab_mux_stop $KILLED KILL 2>/dev/null || true # marks it stopped (it is gone already)
step killed $KILLED
settle "the kill"

echo "--- 2. SIGSTOP $STOPPED"
spid=$(lab_mux_pid $STOPPED)
t_stop=$(bgp_now_us)
kill -STOP "$spid"
echo "froze $STOPPED (pid $spid) with SIGSTOP"
step stopped $KILLED $STOPPED
settle "the freeze"

echo "--- 3. SIGCONT $STOPPED"
t_cont=$(bgp_now_us)
kill -CONT "$spid"
step resumed $KILLED
settle "the resume"

echo "--- 4. $KILLED started again"
t_restart=$(bgp_now_us)
lab_mux_start $KILLED >/dev/null
step restarted
settle "the restart"

touch "$LAB_DIR/hold-end"
wait "$hold" || rc=1
cat "$LAB_DIR/hold.out"
lab_capture_stop_all || rc=1
at "captures stopped"
echo "$t_start $t_kill $t_stop $t_cont $t_restart" >"$LAB_DIR/events-us.txt" # to re-run the verifiers on the run

sc_verify eight-muxes --run "$LAB_DIR" --vip $VIP --port 80 --killed $KILLED --stopped $STOPPED --steps "$LAB_DIR/steps.txt" \
  --kill-us "$t_kill" --stop-us "$t_stop" --cont-us "$t_cont" --restart-us "$t_restart" --hold-json "$LAB_DIR/hold.json" \
  --http-json "$LAB_DIR/http.json" --min-share 0.08 --health-since-us "$t_start" || rc=1
at "verified"
exit "$rc"
