#!/usr/bin/env bash
# 30-controller-failover: three controller replicas on a three-member etcd cluster (lab_up with
# LAB_CONTROLLERS=3). slbctl (its own code, in a driver: scripts/scenarios/lib/controller-failover.ts)
# makes changes at up to 50 per second, 64 in flight (backend weights and drains, every value unique, and
# a VIP added and deleted), with every replica's URL, while the leader is killed with SIGKILL twice,
# each kill once 500 more changes were acknowledged (it is started again once another replica leads),
# and an HTTP load
# (client1, 40/s on new connections) runs through the VIP the whole time. Then:
#   * every change slbctl saw acknowledged is in the final state (field by field against the driver's
#     log: the acknowledged value with the highest generation), each acknowledged change has a
#     generation of its own, and no answer names a generation older than one acknowledged before;
#   * every MUX and host agent applied the same, final generation;
#   * the load had no failed request (the data path does not need the controller);
#   * the rate achieved: acknowledged changes per second, overall (the two elections included) and the
#     median of the run's whole seconds but its first and last (the driver's start and stop; the
#     failovers' seconds fall out of the median); the median is judged at MIN_RATE (40 of the 50/s
#     asked: measured 47-49 at a load average of 20-25, and 44 and 51 under run-all.sh --load at 20-27,
#     where the leader gets a small share of the two cores; docs/controller.md "Changes per second");
#   * the leader is killed once more and, right after, the HTTP server of backend h2vm1: the time from
#     that kill until every MUX applied the policy with h2vm1 down is measured (goal < 5 s: probe time
#     + a lease TTL + a tick; judged at 10 s, twice the goal, for a loaded machine), and then 200 new
#     requests all succeed and none reaches h2vm1.
# Election times (the kill to the new leader's own log line) are printed: measured, not judged.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
VIP=203.0.113.10
KILLED=h2vm1
PER_PHASE=${PER_PHASE:-500}      # acknowledged changes before each kill, and after the last (10 s at 50/s)
RATE=${RATE:-50}                 # changes per second the driver offers
IN_FLIGHT=${IN_FLIGHT:-64}       # changes in flight at once (each slbctl call waits for its answer; 50/s at up to 1.2 s each)
MIN_RATE=${MIN_RATE:-40}         # the median per-second count of acknowledged changes at least
BOUND_MS=${BOUND_MS:-10000}      # the killed backend out of every MUX's policy within this (goal 5000)
export LAB_CONTROLLERS=3
lab_setup_scenario sc30
lab_up
R=$LAB_DIR
rc=0
for n in h1vm1 h1vm2 h2vm1 h2vm2; do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 30 || rc=1; done
hc_wait_mux_candidates web/http80 h1vm1,h1vm2,h2vm1,h2vm2 30 >/dev/null || rc=1
DRIVER=("${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/controller-failover.js")

acked() { awk '/"code":0,/ { n++ } END { print n + 0 }' "$R/changes.jsonl" 2>/dev/null || echo 0; }
# ms from T0_US to the last time NODE's replica logged that it became the leader (its own log's ts)
elected_ms() {  # NODE T0_US
  "${SC_NODE[@]}" -e '
    const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter((l) => l.includes("\"replica_role\""));
    const t = lines.map((l) => JSON.parse(l)).filter((e) => e.role === "leader").map((e) => Date.parse(e.ts)).pop();
    console.log(t === undefined ? "?" : Math.round(t - Number(process.argv[2]) / 1000));' "$R/logs/$1.log" "$2"
}
# kills the leader with SIGKILL; prints how long until another replica led (from its log); starts it again
kill_leader() {
  local k t0 n
  k=$(lab_controller_leader) || { echo '[sc30] no leader to kill' >&2; return 1; }
  t0=$(sc_now_us)
  lab_replica_stop "$k" KILL
  sc_wait_for 'a new leader' 60 eval 'n=$(lab_controller_leader) && [ "$n" != "$k" ]' || return 1
  n=$(lab_controller_leader)
  printf '[sc30] replica %s (the leader) killed; replica %s led %s ms later (its log)\n' "$k" "$n" "$(elected_ms "$(_lab_replica_node "$n")" "$t0")" |
    tee -a "$R/failovers.txt"
  KILLED_REPLICA=$k
}

# --- the load and the changes, both until the scenario ends them
sc_client client1 http --url "http://$VIP/" --count 1000000 --concurrency 2 --rate 40 --timeout-ms 15000 \
  --end-file "$R/load-end" --json "$R/load.json" >"$R/load.out" 2>&1 &
load=$!
lab_exec controller "${DRIVER[@]}" changes --out "$R/changes.jsonl" --end-file "$R/changes-end" --rate "$RATE" --concurrency "$IN_FLIGHT" >"$R/changes.out" 2>&1 &
driver=$!
for phase in 1 2; do
  target=$(( phase * PER_PHASE ))
  sc_wait_for "$target changes acknowledged" 120 eval '[ "$(acked)" -ge '"$target"' ]' || rc=1
  kill_leader || rc=1
  lab_replica_start "$KILLED_REPLICA" || rc=1
done
target=$(( 3 * PER_PHASE ))
sc_wait_for "$target changes acknowledged" 120 eval '[ "$(acked)" -ge '"$target"' ]' || rc=1
touch "$R/changes-end"
wait "$driver" || { echo "[sc30] the change driver failed:" >&2; tail -n 20 "$R/changes.out" >&2; rc=1; }
touch "$R/load-end"
wait "$load" || true  # its status is checked from its records by the verifier
lab_slbctl wait --wait-s 60 >"$R/wait.out" 2>&1 || { echo "[sc30] not every agent applied the last generation:" >&2; cat "$R/wait.out" >&2; rc=1; }
lab_slbctl --json state >"$R/state.json" || rc=1
agents_json() {
  local n kind g sep=''
  printf '['
  for n in $(lab_nodes mux) $(lab_nodes host); do
    g=$(lab_daemon_status "$n" | lab_json_get controller.appliedGeneration 2>/dev/null) || g=null
    printf '%s{"name":"%s","generation":%s}' "$sep" "$n" "$g"
    sep=,
  done
  printf ']\n'
}
agents_json >"$R/agents.json"
"${DRIVER[@]}" verify --log "$R/changes.jsonl" --state "$R/state.json" --agents "$R/agents.json" --load "$R/load.json" \
  --min-acked "$target" --min-rate "$MIN_RATE" | tee "$R/verify.out" || rc=1

# --- the leader killed, then at once the HTTP server of a backend
http_pid=''
for e in "${SLBX_LAB_PROCS[@]}"; do
  read -r pid kind node what <<<"$e"
  [ "$kind" = backend ] && [ "$node" = "$KILLED" ] && [ "$what" = "$KILLED http" ] && http_pid=$pid
done
[ -n "$http_pid" ] || { echo "[sc30] no http backend process recorded for $KILLED" >&2; exit 1; }
gen0=$(lab_slbctl --json state | lab_json_get generation)
k=$(lab_controller_leader) || { echo '[sc30] no leader' >&2; exit 1; }
lab_replica_stop "$k" KILL
t0=$(sc_now_us)
kill -KILL "$http_pid"
printf '[sc30] replica %s (the leader) killed, then the HTTP server of %s (pid %s)\n' "$k" "$KILLED" "$http_pid"
# the generation that took h2vm1 out, then every MUX on it (or later)
down_gen() {
  lab_slbctl --json generations 2>/dev/null | "${SC_NODE[@]}" -e '
    let t = ""; process.stdin.on("data", (d) => (t += d)).on("end", () => {
      const h = JSON.parse(t).history.filter((x) => x.generation > Number(process.argv[1]) && / '"$KILLED"'\/http80 down/.test(x.cause));
      if (h.length === 0) process.exit(1);
      console.log(Math.min(...h.map((x) => x.generation)));
    });' "$gen0"
}
muxes_on() {
  local m g
  for m in $(lab_nodes mux); do
    g=$(lab_daemon_status "$m" | lab_json_get controller.appliedGeneration 2>/dev/null) || return 1
    [ "$g" -ge "$1" ] || return 1
  done
}
G=''
sc_wait_for "a generation with $KILLED down" 60 eval 'G=$(down_gen)' || rc=1
if [ -n "$G" ]; then
  sc_wait_for "every MUX on generation $G" 60 muxes_on "$G" || rc=1
  out_ms=$(( ($(sc_now_us) - t0) / 1000 ))
  printf '[sc30] %s out of every MUX'"'"'s policy (generation %s) %d ms after it was killed, the leader killed just before (goal < 5000 ms, judged at %d ms)\n' \
    "$KILLED" "$G" "$out_ms" "$BOUND_MS" | tee -a "$R/failovers.txt"
  [ "$out_ms" -le "$BOUND_MS" ] || { echo "[sc30] FAIL: $out_ms ms > $BOUND_MS ms" >&2; rc=1; }
fi
lab_replica_start "$k" || rc=1
sc_client client1 http --url "http://$VIP/" --count 200 --concurrency 4 --timeout-ms 15000 --json "$R/after.json" >"$R/after.out" 2>&1 || rc=1
n_killed=$(lab_json_get --file "$R/after.json" --type number "summary.perBackend.$KILLED" 2>/dev/null || echo 0)
failed=$(lab_json_get --file "$R/after.json" --type number summary.failed)
printf '[sc30] 200 new requests after: %s failed, %s answered by %s\n' "$failed" "$n_killed" "$KILLED"
[ "$failed" = 0 ] && [ "$n_killed" = 0 ] || rc=1
exit "$rc"
