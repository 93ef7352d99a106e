#!/usr/bin/env bash
# Runs every namespace scenario (scripts/scenarios/NN-*.sh) in order and prints a summary. As root.
# A scenario that cannot run here exits 77 (skipped), after writing why to $SLBX_SKIP_REASON_FILE;
# under CI that counts as a failure. The summary line lists each skip with its reason (also written to
# $SLBX_SCENARIO_SUMMARY when set: scripts/test.sh prints it in its own summary).
#   scripts/scenarios/run-all.sh [--load] [--repeat N] [PATTERN]     e.g. run-all.sh 02
#   --load       one busy loop per CPU for the whole run (started and stopped by PID): the verdicts
#                must not depend on an idle machine
#   --repeat N   runs each scenario N times (pass counts per scenario in the summary)
set -uo pipefail
cd "$(dirname "$0")/../.."
pattern='' load=0 repeat=1 load_pids=() per_scenario=()
while [ $# -gt 0 ]; do
  case $1 in
    --load) load=1 ;;
    --repeat) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "run-all: --repeat needs a count >= 1, got '${2:-}'" >&2; exit 2; }; repeat=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run-all: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) pattern=$1 ;;
  esac
  shift
done
stop_load() { local p; for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; load_pids=(); }
if [ $load = 1 ]; then
  for _ in $(seq "$(nproc)"); do ( trap 'exit 0' TERM; while :; do :; done ) & load_pids+=($!); done
  printf 'background load: %d busy loops (pids %s)\n' "${#load_pids[@]}" "${load_pids[*]}"
fi
pass=0 fail=0 skip=0 failed=() skipped=()
reason_file=$(mktemp)
trap 'rm -f "$reason_file"; stop_load' EXIT
export SLBX_SKIP_REASON_FILE=$reason_file
for s in scripts/scenarios/[0-9][0-9]-*.sh; do
  base=$(basename "$s" .sh)
  [ -n "$pattern" ] && [[ $base != *$pattern* ]] && continue
  ok_runs=0
  for ((run = 1; run <= repeat; run++)); do
  name=$base; [ "$repeat" = 1 ] || name="$base#$run"
  printf '\n=== %s%s\n' "$name" "$([ $load = 0 ] || printf ' (under load: %s)' "$(cut -d' ' -f1-3 /proc/loadavg)")"
  start=$SECONDS
  : >"$reason_file"
  bash "$s"
  rc=$?
  took=$((SECONDS - start))
  if [ $rc = 0 ]; then pass=$((pass + 1)); ok_runs=$((ok_runs + 1)); printf '=== %s: PASS (%ss)\n' "$name" "$took"
  elif [ $rc = 77 ] && [ -z "${CI:-}" ]; then
    why=$(head -n 1 "$reason_file"); [ -n "$why" ] || why='no reason given'
    skip=$((skip + 1)); skipped+=("$name: $why"); printf '=== %s: SKIPPED (%s)\n' "$name" "$why"
  else fail=$((fail + 1)); failed+=("$name"); printf '=== %s: FAIL (exit %s, %ss)\n' "$name" "$rc" "$took"; fi
  done
  [ "$repeat" = 1 ] || per_scenario+=("$base $ok_runs/$repeat")
done
stop_load
[ ${#per_scenario[@]} = 0 ] || printf '\npassed per scenario: %s\n' "$(IFS=','; printf '%s' "${per_scenario[*]}" | sed 's/,/, /g')"
summary=$(printf 'scenarios: %d passed, %d failed, %d skipped' "$pass" "$fail" "$skip")
[ $skip = 0 ] || summary+=" ($(IFS=';'; printf '%s' "${skipped[*]}" | sed 's/;/; /g'))"
printf '\n%s\n' "$summary"
[ -z "${SLBX_SCENARIO_SUMMARY:-}" ] || printf '%s\n' "$summary" >"$SLBX_SCENARIO_SUMMARY"
[ $fail = 0 ] || { printf 'failed: %s\n' "${failed[*]}"; exit 1; }
