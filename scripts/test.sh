#!/usr/bin/env bash
# The whole test suite, set-up included: installs what is missing (as root), builds, type-checks the
# tests, runs the unit, fixture, fuzz and replay suites (vitest), then the namespace scenarios, a 60 s
# soak and the bench's smoke run.
#   scripts/test.sh                everything
#   scripts/test.sh --unit         only the vitest suites (no root needed once set up)
#   scripts/test.sh --scenarios    only the namespace scenarios (root)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
case "${1:-all}" in
  all|--all) what=all ;;
  --unit) what=unit ;;
  --scenarios) what=scenarios ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/test.sh [--unit|--scenarios]" >&2; exit 2 ;;
esac
slbx_setup

if [ "$what" != scenarios ]; then
  slbx_log 'type-checking the tests'
  npx tsc -p tsconfig.test.json
  slbx_log 'vitest'
  npx vitest run
  slbx_log 'fuzz: 100,000 inputs per target (scripts/fuzz.sh runs 1,000,000)'
  node dist/scripts/fuzz/fuzz.js --inputs 100000
fi

if [ "$what" != unit ]; then
  if [ -x scripts/scenarios/run-all.sh ]; then
    scripts/scenarios/run-all.sh
  else
    slbx_log 'no namespace scenarios yet'
  fi
  slbx_log 'soak: 60 s (scripts/soak.sh runs 600 s by default)'
  scripts/soak.sh 60 --no-setup
  scripts/bench.sh --smoke --no-setup || [ $? = 77 ] # the bench harness works (seconds; no timing assertion)
fi
