#!/usr/bin/env bash
# The whole test suite, set-up included: installs what is missing (as root), builds, type-checks the
# tests, runs the unit, fixture and replay suites (vitest), the fuzzer (a new seed each run, printed
# first, plus the kept corpus), then the namespace scenarios, a 64 s soak and the bench's smoke run.
# Ends with one summary line: each step's result, and every skip with its reason (under CI a skip is
# a failure). The ring addon (npm run build:native) must build: scenario 17 and the ring tests need it.
#   scripts/test.sh                everything
#   scripts/test.sh --unit         only the vitest suites and the fuzzer (no root needed once set up)
#   scripts/test.sh --scenarios    only the namespace scenarios, the soak and the bench smoke run (root)
#   SLBX_FUZZ_SEED=N scripts/test.sh --unit    replays a fuzzer run (the seed its summary printed)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
case "${1:-all}" in
  all|--all) what=all ;;
  --unit) what=unit ;;
  --scenarios) what=scenarios ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/test.sh [--unit|--scenarios]" >&2; exit 2 ;;
esac

# the final summary line: one entry per step, the step that was running when the script stopped marked
summary_dir=$(mktemp -d)
results=() current='' current_file='' step_t0=0
# step NAME [FILE]: FILE, if the step writes it, holds its own one-line summary (its counts and skips)
# each entry ends with the step's time in seconds, so that a slow CI run shows where its time went
step() { current=$1; current_file=${2:-}; step_t0=$SECONDS; slbx_log "$1"; }
step_done() { results+=("$current: ${1:-ok}${current_file:+, $(cat "$current_file" 2>/dev/null || echo 'no summary')} ($((SECONDS - step_t0)) s)"); current=''; }
print_summary() {
  local rc=$? line verdict
  set +e
  if [ -n "$current" ]; then
    line="$current: FAILED (exit $rc)"
    [ -z "$current_file" ] || [ ! -s "$current_file" ] || line+=", $(cat "$current_file")"
    line+=" ($((SECONDS - step_t0)) s)"
    results+=("$line")
  fi
  verdict=PASS; [ "$rc" = 0 ] || verdict=FAIL
  line=$(IFS='|'; printf '%s' "${results[*]}" | sed 's/|/ | /g')
  printf '\n[slbx] test summary: %s | %s\n' "$verdict" "${line:-nothing ran}" >&2
  rm -rf "$summary_dir"
}
trap print_summary EXIT
is_ci() { [ -n "${CI:-}" ] && [ "${CI:-}" != false ] && [ "${CI:-}" != 0 ]; }

step 'set-up (packages, npm ci, build, ring addon)'
slbx_setup
slbx_ring_built
step_done

if [ "$what" != scenarios ]; then
  step 'type-checking the tests'
  npx tsc -p tsconfig.test.json
  step_done
  # the pinned formatter (package.json, .prettierrc.json: 140 columns) in check mode; `npm run format` fixes
  step 'format check (prettier --check, every .ts file)'
  npx prettier --check '**/*.ts' --log-level warn
  step_done
  step 'vitest' "$summary_dir/vitest"
  SLBX_SKIP_SUMMARY=$summary_dir/vitest npx vitest run
  step_done
  # a new seed each run (or $SLBX_FUZZ_SEED), printed first by the fuzzer: a failure replays with --seed N
  seed=${SLBX_FUZZ_SEED:-random}
  step "fuzz: the kept corpus, then 100,000 inputs per target (scripts/fuzz.sh runs 1,000,000)" "$summary_dir/seed"
  node dist/scripts/fuzz/fuzz.js --inputs 100000 --seed "$seed" --seed-file "$summary_dir/seed"
  step_done
fi

if [ "$what" != unit ]; then
  step 'namespace scenarios' "$summary_dir/scenarios"
  SLBX_SCENARIO_SUMMARY=$summary_dir/scenarios scripts/scenarios/run-all.sh
  step_done
  # 64 s: the 60 s plan (2 flaps, 3 MUX restarts, the last event at 50 s) with 4 s more at the end: a busy
  # machine slides the timeline (each restart waits for the real end of the one before); a fresh-root
  # rehearsal's last event started 9.3 s late and ended after a 60 s traffic. 65 s would plan a fourth restart.
  step 'soak: 64 s (scripts/soak.sh runs 600 s by default)'
  rc=0; scripts/soak.sh 64 --no-setup || rc=$?
  if [ $rc = 77 ] && ! is_ci; then step_done 'SKIPPED (cannot run here: no root or namespaces; its output says which)'
  elif [ $rc != 0 ]; then exit $rc
  else step_done; fi
  step 'bench smoke run' # the bench harness works (seconds; no timing assertion)
  rc=0; scripts/bench.sh --smoke --no-setup || rc=$?
  if [ $rc = 77 ] && ! is_ci; then step_done 'SKIPPED (cannot run here: no root, no namespaces or one CPU; its output says which)'
  elif [ $rc != 0 ]; then exit $rc
  else step_done; fi
fi
