#!/usr/bin/env bash
# Runs every namespace scenario (scripts/scenarios/NN-*.sh) in order and prints a summary. As root.
# A scenario that cannot run here exits 77 (skipped); under CI that counts as a failure.
#   scripts/scenarios/run-all.sh [PATTERN]     e.g. run-all.sh 02
set -uo pipefail
cd "$(dirname "$0")/../.."
pattern=${1:-}
pass=0 fail=0 skip=0 failed=()
for s in scripts/scenarios/[0-9][0-9]-*.sh; do
  name=$(basename "$s" .sh)
  [ -n "$pattern" ] && [[ $name != *$pattern* ]] && continue
  printf '\n=== %s\n' "$name"
  start=$SECONDS
  bash "$s"
  rc=$?
  took=$((SECONDS - start))
  if [ $rc = 0 ]; then pass=$((pass + 1)); printf '=== %s: PASS (%ss)\n' "$name" "$took"
  elif [ $rc = 77 ] && [ -z "${CI:-}" ]; then skip=$((skip + 1)); printf '=== %s: SKIPPED\n' "$name"
  else fail=$((fail + 1)); failed+=("$name"); printf '=== %s: FAIL (exit %s, %ss)\n' "$name" "$rc" "$took"; fi
done
printf '\nscenarios: %d passed, %d failed, %d skipped\n' "$pass" "$fail" "$skip"
[ $fail = 0 ] || { printf 'failed: %s\n' "${failed[*]}"; exit 1; }
