#!/usr/bin/env bash
# scripts/bench/wake-probe/run.sh: what a wake-up across CPUs costs on this machine (issue 19: the added
# latency with the daemons on another CPU than the client). wake-probe.c ping-pongs between two threads
# over eventfds, one round trip per --interval-us (the threads sleep in between, as the client, the
# daemons and the servers do at 2,000 requests/s), in four layouts, interleaved round by round:
#   same      both threads on CPU 0: two context switches per round trip, no other CPU involved
#   cross     A on CPU 0, B on CPU 1: each round trip wakes a sleeping thread on each CPU
#   spin      cross, but B polls instead of sleeping (a busy-polling daemon): only A is woken
#   awake     cross, with a SCHED_IDLE spinner on each CPU: the CPUs never idle (idle=poll for these two
#             CPUs), but each wake-up is still an interrupt sent to the other CPU
# docs/performance.md ("Where the latency goes") records the results.
#
# options:
#   --rounds N         interleaved rounds (default 3)
#   --count N          round trips per run (default 2000)
#   --interval-us U    between round trips (default 1000)
#   --layouts LIST     comma-separated, from same, cross, spin, awake (default all four)
#   --out DIR          results folder (default results/wake-probe-<UTC timestamp>/)
# Results: runs.tsv and summary.txt (medians over the rounds of each run's p50 and p99, with min-max).
# Needs cc, 2 CPUs; no root, no network.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
ROUNDS=3 COUNT=2000 INTERVAL=1000 LAYOUTS=same,cross,spin,awake
OUT=$ROOT/results/wake-probe-$(date -u +%Y%m%dT%H%M%SZ)
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --count) COUNT=$2; shift 2 ;;
    --interval-us) INTERVAL=$2; shift 2 ;;
    --layouts) LAYOUTS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
done
for n in "$ROUNDS" "$COUNT" "$INTERVAL"; do [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --rounds, --count and --interval-us take positive integers" >&2; exit 2; }; done
[ "$(nproc)" -ge 2 ] || { echo "run.sh: needs 2 CPUs" >&2; exit 2; }
command -v cc >/dev/null || { echo "run.sh: needs cc" >&2; exit 2; }
IFS=, read -r -a LLIST <<<"$LAYOUTS"
for l in "${LLIST[@]}"; do case $l in same|cross|spin|awake) ;; *) echo "run.sh: unknown layout '$l' (same, cross, spin, awake)" >&2; exit 2 ;; esac; done
mkdir -p "$OUT"
BIN=$OUT/wake-probe
cc -O2 -Wall -Wextra -pthread -o "$BIN" "$ROOT/scripts/bench/wake-probe/wake-probe.c"

printf 'round\tlayout\tcount\tp50_us\tp90_us\tp99_us\tmax_us\n' >"$OUT/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
  for l in "${LLIST[@]}"; do
    case $l in
      same) args=(--a 0 --b 0) ;;
      cross) args=(--a 0 --b 1) ;;
      spin) args=(--a 0 --b 1 --spin) ;;
      awake) args=(--a 0 --b 1 --awake) ;;
    esac
    # "rtt_us n N p50 A p90 B p99 C max D"
    set -- $("$BIN" "${args[@]}" --count "$COUNT" --interval-us "$INTERVAL")
    printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$l" "$3" "$5" "$7" "$9" "${11}" | tee -a "$OUT/runs.tsv"
  done
done
{
  echo "round trips between two threads (µs; median (min-max) over $ROUNDS rounds of $COUNT, one per $INTERVAL µs):"
  awk -F'\t' 'NR > 1 { k = $2; if (!(k in n)) order[++m] = k; i = ++n[k]; p50[k, i] = $4; p99[k, i] = $6 }
    function med(a, k, c,   i, j, t, x) { for (i = 1; i <= c; i++) x[i] = a[k, i] + 0
      for (i = 2; i <= c; i++) { t = x[i]; for (j = i - 1; j >= 1 && x[j] > t; j--) x[j + 1] = x[j]; x[j + 1] = t }
      return sprintf("%.1f (%.1f-%.1f)", c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2, x[1], x[c]) }
    END { for (o = 1; o <= m; o++) { k = order[o]; printf "%-6s p50 %s  p99 %s\n", k, med(p50, k, n[k]), med(p99, k, n[k]) } }' "$OUT/runs.tsv"
} | tee "$OUT/summary.txt"
echo "results: $OUT"
