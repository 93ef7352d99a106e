#!/usr/bin/env bash
# The fuzzer at full length: 1,000,000 random and mutated inputs per target (100,000 for the YAML
# config target, which parses whole documents): packet codecs, both data planes, the BGP codec and
# FSM, BFD, the controller's API writes and the config validator, seeded so a run can be repeated. Inputs that crash or
# hang, or that a data plane drops under no named counter, are kept in test/corpus/ (the test suite and
# every fuzzer run replay them first) and fail the run. The seed is 1 unless given; `--seed random` draws
# a new one and prints it first (replay: --seed N). scripts/test.sh (CI) runs 100,000 inputs per target
# with a new seed each run.
#   scripts/fuzz.sh [--inputs N] [--seed S|random] [--target NAME]... [--json FILE]     (see --help)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
slbx_setup
exec node dist/scripts/fuzz/fuzz.js --inputs 1000000 "$@"
