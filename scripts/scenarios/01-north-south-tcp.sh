#!/usr/bin/env bash
# 01-north-south-tcp: 1,000 HTTP requests from the client to the VIP, a new connection each, all succeed
# and every backend answers some. From captures on every link: each client packet reaches a MUX and
# leaves it VXLAN-encapsulated (VNI of the pool) to the host of the backend it chose, the packet inside
# byte for byte; the backend sees DIP:backend-port; replies leave the host from VIP:frontend-port
# (direct server return) and reach the client; zero reply packets cross any MUX. tshark cross-checks.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
lab_setup_scenario sc01
lab_up
sc_capture_path
rc=0
sc_client client1 http --url http://203.0.113.10/ --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/client-http.json" || rc=$?
sleep 0.3
lab_capture_stop_all
sc_verify north-south --run "$LAB_DIR" --vip 203.0.113.10 --port 80 --requests "$REQUESTS" \
  --client-json "$LAB_DIR/client-http.json" --account "$LAB_DIR/account.json"
exit "$rc"
