#!/usr/bin/env bash
# 31-etcd-member-loss: three controller replicas on a three-member etcd cluster (LAB_CONTROLLERS=3),
# an HTTP load through the VIP the whole time (client1, 40/s on new connections).
#   * etcd member 3 killed (SIGKILL): a change through slbctl is acknowledged (two of three members
#     are a majority), as the next generation;
#   * member 2 killed as well, once member 1 says it has no leader (its /health is false): three changes
#     (weight 333 on h1vm1) are refused, each with slbctl's exit status 1 and a message naming etcd and
#     that nothing was changed (or, when etcd did not answer in time, that it may or may not be stored:
#     raft may still commit such a proposal once the members are back); the replicas still serve the
#     state, unchanged (same generation, h1vm1 not at 333);
#   * both members started again: a change (weight 334) is acknowledged again, as exactly the next
#     generation after the last acknowledged one, or after that plus one per "may or may not be stored"
#     answer (each such change applied whole or not at all; none answered "nothing was changed" applied
#     later), and the state read back holds 334;
#   * the load had no failed request, and every MUX and host agent applied the final generation.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
VIP=203.0.113.10
export LAB_CONTROLLERS=3
lab_setup_scenario sc31
lab_up
R=$LAB_DIR
rc=0
for n in h1vm1 h1vm2 h2vm1 h2vm2; do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 30 || rc=1; done
pass() { printf 'PASS  %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; rc=1; }
state_field() { lab_slbctl --json state | lab_json_get "$1"; }  # a path in GET /v1/state
weight_h1vm1() { lab_slbctl --json backend list web | "${SC_NODE[@]}" -e '
  let t = ""; process.stdin.on("data", (d) => (t += d)).on("end", () => console.log(JSON.parse(t).find((b) => b.nic === "h1vm1").weight));'; }
# a change: prints its generation; status 1 (and its message in $R/last-error) when refused
change() {  # WEIGHT [slbctl options]
  local w=$1 out
  shift
  if out=$(lab_slbctl --json "$@" backend set web h1vm1 --weight "$w" 2>"$R/last-error"); then lab_json_get generation <<<"$out"; else return 1; fi
}

sc_client client1 http --url "http://$VIP/" --count 1000000 --concurrency 2 --rate 40 --timeout-ms 15000 \
  --end-file "$R/load-end" --json "$R/load.json" >"$R/load.out" 2>&1 &
load=$!
gen0=$(state_field generation)

# --- one member of three lost
lab_etcd_stop 3 KILL
if g1=$(change 301 --timeout 30); then
  [ "$g1" = $((gen0 + 1)) ] && pass "one etcd member down: a change is acknowledged as generation $g1" ||
    fail "one etcd member down: the change made generation $g1, expected $((gen0 + 1))"
else
  fail "one etcd member down: the change was refused: $(cat "$R/last-error")"; g1=$gen0
fi

# --- two of three lost
lab_etcd_stop 2 KILL
e1_health() { lab_exec controller curl -s -m 3 "http://127.0.0.1:2379/health" | lab_json_get health 2>/dev/null; }
sc_wait_for 'etcd member 1 without a leader (/health false)' 60 eval '[ "$(e1_health)" = false ]' || rc=1
maybe=0 # refusals that said "may or may not be stored" (etcd did not answer in time: the proposal may commit later)
for i in 1 2 3; do
  if g=$(change 333 --timeout 8); then
    fail "two etcd members down: change $i was acknowledged (generation $g)"
  else
    msg=$(cat "$R/last-error")
    # refused for sure, or (etcd did not answer in time) said to be maybe stored: a proposal the old raft
    # leader took before it lost its majority can still commit once the members are back (raft keeps it),
    # so the next-generation check below allows one generation per such answer, and no more
    [[ $msg != *"may or may not be stored"* ]] || maybe=$((maybe + 1))
    if [[ $msg == *etcd* ]] && [[ $msg == *"nothing was changed"* || $msg == *"may or may not be stored"* ]]; then pass "two etcd members down: change $i refused: ${msg:0:200}"
    else fail "two etcd members down: change $i refused without naming etcd and whether anything changed: $msg"; fi
  fi
done
g=$(state_field generation) w=$(weight_h1vm1)
[ "$g" = "$g1" ] && [ "$w" = 301 ] && pass "the replicas still serve the state, unchanged (generation $g, h1vm1 weight $w)" ||
  fail "the state moved while etcd had no quorum: generation $g (expected $g1), h1vm1 weight $w (expected 301)"

# --- both back
lab_etcd_start 2
lab_etcd_start 3
if g2=$(change 334 --timeout 60); then
  # every change said to be refused for sure was not applied; each "may or may not be stored" one was
  # applied whole or not at all (one generation each), never more
  if [ "$g2" = $((g1 + 1)) ]; then pass "both members back: a change is acknowledged as generation $g2, the next after $g1 (no refused change was applied)"
  elif [ "$g2" -gt $((g1 + 1)) ] && [ "$g2" -le $((g1 + 1 + maybe)) ]; then
    pass "both members back: a change is acknowledged as generation $g2: $((g2 - g1 - 1)) of the $maybe change(s) answered 'may or may not be stored' committed when the members came back, no change answered 'nothing was changed' did"
  else fail "both members back: the change made generation $g2, expected $((g1 + 1)) (or up to $((g1 + 1 + maybe)) with $maybe answered 'may or may not be stored'): a refused change applied later"; fi
else
  fail "both members back: the change was refused: $(cat "$R/last-error")"
fi
lab_slbctl wait --wait-s 60 >"$R/wait.out" 2>&1 || { echo "[sc31] not every agent applied the last generation:" >&2; cat "$R/wait.out" >&2; rc=1; }
w=$(weight_h1vm1)
[ "$w" = 334 ] && pass "the state holds the last acknowledged change (h1vm1 weight 334)" || fail "h1vm1 weight is $w, expected 334"
final=$(state_field generation)
for n in $(lab_nodes mux) $(lab_nodes host); do
  a=$(lab_daemon_status "$n" | lab_json_get controller.appliedGeneration 2>/dev/null || echo '?')
  [ "$a" = "$final" ] && pass "$n applied the final generation $final" || fail "$n applied generation $a, not the final $final"
done
touch "$R/load-end"
wait "$load" || true  # judged from its summary
total=$(lab_json_get --file "$R/load.json" --type number summary.total) failed=$(lab_json_get --file "$R/load.json" --type number summary.failed)
[ "$total" -gt 0 ] && [ "$failed" = 0 ] && pass "no failed request in the parallel load ($total requests)" ||
  fail "the parallel load had $failed failed requests of $total: $(lab_json_get --file "$R/load.json" summary.errors)"
exit "$rc"
