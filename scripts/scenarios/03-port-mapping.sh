#!/usr/bin/env bash
# 03-port-mapping: the rule 203.0.113.10 TCP 8080 -> backend port 8000 works both ways: the backends
# see destination DIP:8000 and answer from it; the replies leave the hosts from VIP:8080 and reach the
# client. The same verifier as scenario 01, on port 8080.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-200}
lab_setup_scenario sc03
lab_up
sc_capture_path
rc=0
sc_client client1 http --url http://203.0.113.10:8080/ --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/client-http.json" || rc=$?
sleep 0.3
lab_capture_stop_all
sc_verify north-south --run "$LAB_DIR" --vip 203.0.113.10 --port 8080 --requests "$REQUESTS" --client-json "$LAB_DIR/client-http.json"
exit "$rc"
