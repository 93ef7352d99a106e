#!/usr/bin/env bash
# 21-docs-examples: every command the docs show works as shown. The commands of the ```sh blocks of
# README.md and docs/lab.md are extracted from the docs themselves (scripts/scenarios/lib/docs-examples.ts,
# so an example is tested the day it is written) and run in the docs' order between the docs' own
# `scripts/lab.sh up` and `scripts/lab.sh down` (given --name of this run's lab; a second lab a command
# brings up is taken down after its checks). Each must exit 0 and show the key parts of what the docs
# say it shows; the ones that cannot run here (demo, test suite, bench, fuzz, soak) are listed with why.
#   SC21_LAB=NAME   the lab's name (default sc21; the run's PID is appended)
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
lab_setup_scenario "${SC21_LAB:-sc21}"
# LAB_NAME is set; the docs' own `scripts/lab.sh up` brings it up. On any exit, every lab of this run
# that is still up (LAB_NAME, LAB_NAME-X) is taken down: lab_setup_scenario's trap does LAB_NAME.
sc21_exit() {
  local rc=$? d n
  for d in "$SLBX_ROOT/runs/lab/$LAB_NAME"-*/; do
    n=$(basename "$d")
    [ -f "$d/state.env" ] || continue
    lab_down "$n" >&2 || { _lab_err "teardown of lab '$n' failed"; [ "$rc" = 0 ] && rc=1; }
  done
  (exit "$rc")
  _lab_scenario_exit
}
trap sc21_exit EXIT
work="$SLBX_ROOT/runs/docs-examples/$LAB_NAME"
rm -rf "$work"
mkdir -p "$work"
"${SC_NODE[@]}" dist/scripts/scenarios/lib/docs-examples.js run --name "$LAB_NAME" --work "$work"
