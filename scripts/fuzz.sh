#!/usr/bin/env bash
# The fuzzer at full length: 1,000,000 random and mutated inputs per target (100,000 for the YAML
# config target, which parses whole documents): packet codecs, both data planes, the BGP codec and
# FSM, BFD, the controller's API writes and the config validator, seeded so a run can be repeated. Inputs that crash or
# hang are kept in test/corpus/ (the test suite replays them forever) and fail the run. CI runs the same
# with 100,000 inputs from scripts/test.sh.
#   scripts/fuzz.sh [--inputs N] [--seed S] [--target NAME]... [--json FILE]     (see --help)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
slbx_setup
exec node dist/scripts/fuzz/fuzz.js --inputs 1000000 "$@"
