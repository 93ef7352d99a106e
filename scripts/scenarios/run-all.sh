#!/usr/bin/env bash
# Runs every namespace scenario (scripts/scenarios/NN-*.sh) in order and prints a summary. As root.
# A scenario that cannot run here exits 77 (skipped), after writing why to $SLBX_SKIP_REASON_FILE;
# under CI that counts as a failure. The summary line lists each skip with its reason (also written to
# $SLBX_SCENARIO_SUMMARY when set: scripts/test.sh prints it in its own summary).
#   scripts/scenarios/run-all.sh [--load] [--repeat N] [PATTERN]     e.g. run-all.sh 02
#   --load       one busy loop per CPU for the whole run (started and stopped by PID): the verdicts
#                must not depend on an idle machine
#   --repeat N   runs each scenario N times (pass counts per scenario in the summary)
# While a scenario runs, `top` samples the machine every 5 s into runs/machine/NAME.log (load, the CPU
# line with its steal, the busiest processes with their priority: rt or a negative PR is real-time);
# when the scenario fails, the summary of that log is printed after it: whether the machine was busy,
# and with what.
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
watch_pid=''
watch_start() {  # NAME: top, every 5 s, into runs/machine/NAME.log (a block per sample; see --help)
  mkdir -p runs/machine
  watch_log=runs/machine/$1.log
  command -v top >/dev/null || { watch_pid=''; return 0; }
  top -b -d 5 -w 200 -c -o %CPU 2>/dev/null > >(awk '/^top -/ { n = 0 } { n++ }
    /^top -|^Tasks:|^%Cpu/ { print; fflush(); next } n >= 8 && n <= 15 && $1 ~ /^[0-9]+$/ { print; fflush() }' >"$watch_log") &
  watch_pid=$!
}
watch_stop() { [ -z "$watch_pid" ] || { kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null; }; watch_pid=''; }
# the machine during a failed scenario: load and steal over the run, and the busiest sample's processes
watch_report() {
  [ -s "${watch_log:-}" ] || return 0
  awk -v file="$watch_log" '
    /^top -/ { t = $3; sub(/,$/, "", t); l = $(NF - 2); sub(/,$/, "", l); l += 0; k++; if (k == 1 || l < lmin) lmin = l;
               if (l > lmax) lmax = l; cur = t " load " $(NF - 2) " " $(NF - 1) " " $NF; curp = ""; next }
    /^Tasks:/ { cur = cur ", " $4 " running"; next }
    /^%Cpu/ { for (i = 1; i <= NF; i++) if ($i ~ /^st/) { s = $(i - 1) + 0; if (s > smax) smax = s }
              cur = cur ", cpu " $0; sub(/%Cpu\(s\): */, "", cur); next }
    { curp = curp "\n      " substr($0, 1, 160); if (l >= lmax) { best = cur; bestp = curp } }
    END { if (k == 0) exit
          printf "  the machine during it (%s, %d samples of 5 s): 1-min load %.2f..%.2f, steal up to %.1f %%\n", file, k, lmin, lmax, smax
          printf "  the busiest sample: %s\n      PID USER PR NI VIRT RES SHR S %%CPU %%MEM TIME+ COMMAND (PR rt or negative: real-time)%s\n", best, bestp }' "$watch_log"
}
pass=0 fail=0 skip=0 failed=() skipped=() durations=()
reason_file=$(mktemp)
trap 'rm -f "$reason_file"; watch_stop; stop_load' EXIT
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
  watch_start "$name"
  bash "$s"
  rc=$?
  watch_stop
  took=$((SECONDS - start))
  durations+=("$took $name")
  if [ $rc = 0 ]; then pass=$((pass + 1)); ok_runs=$((ok_runs + 1)); printf '=== %s: PASS (%ss)\n' "$name" "$took"
  elif [ $rc = 77 ] && [ -z "${CI:-}" ]; then
    why=$(head -n 1 "$reason_file"); [ -n "$why" ] || why='no reason given'
    skip=$((skip + 1)); skipped+=("$name: $why"); printf '=== %s: SKIPPED (%s)\n' "$name" "$why"
  else fail=$((fail + 1)); failed+=("$name"); printf '=== %s: FAIL (exit %s, %ss)\n' "$name" "$rc" "$took"; watch_report; fi
  done
  [ "$repeat" = 1 ] || per_scenario+=("$base $ok_runs/$repeat")
done
stop_load
[ ${#per_scenario[@]} = 0 ] || printf '\npassed per scenario: %s\n' "$(IFS=','; printf '%s' "${per_scenario[*]}" | sed 's/,/, /g')"
summary=$(printf 'scenarios: %d passed, %d failed, %d skipped' "$pass" "$fail" "$skip")
[ $skip = 0 ] || summary+=" ($(IFS=';'; printf '%s' "${skipped[*]}" | sed 's/;/; /g'))"
# where the time went: the total and the five longest
if [ ${#durations[@]} -gt 1 ]; then
  summary+=$(printf '%s\n' "${durations[@]}" | sort -rn | awk '{ t += $1 } NR <= 5 { l = l (l ? ", " : "") $2 " " $1 " s" } END { printf "; %d s in all, longest: %s", t, l }')
fi
printf '\n%s\n' "$summary"
[ -z "${SLBX_SCENARIO_SUMMARY:-}" ] || printf '%s\n' "$summary" >"$SLBX_SCENARIO_SUMMARY"
[ $fail = 0 ] || { printf 'failed: %s\n' "${failed[*]}"; exit 1; }
