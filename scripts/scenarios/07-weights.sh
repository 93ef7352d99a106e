#!/usr/bin/env bash
# 07-weights: the pool is cut to two backends with weights 3 (h1vm1) and 7 (h2vm1), live through the
# controller (slbctl; no process restarted). Over 5,000 new flows (UDP echo, 5-tuple hash, a new source
# port each, from 32 client addresses) the split is within 2 percentage points of 30/70: counted from
# the client's answers, from the MUXes' VXLAN (inner MAC) and at the backends (tshark cross-check).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
FLOWS=${FLOWS:-5000}
VIP=203.0.113.10
lab_setup_scenario sc07
lab_up
hc_ctl backend del web h1vm2 --wait
hc_ctl backend del web h2vm2 --wait
hc_ctl backend set web h1vm1 --weight 3 --wait
hc_ctl backend set web h2vm1 --weight 7 --wait
hc_ctl backend list web
hc_wait_mux_candidates web h1vm1,h2vm1 10 >/dev/null
sc_capture_path
rc=0
t0=$(hc_now_us)
sc_client client1 udp --target "$VIP:7" --flows "$FLOWS" --sources 198.51.100.10-198.51.100.41 --json "$LAB_DIR/udp.json" || rc=1
hc_phase weighted "$t0" "$(hc_now_us)" "$LAB_DIR/udp.json" allok count="$FLOWS" only=h1vm1,h2vm1 split=h1vm1:30,h2vm1:70,tol:2
sleep 0.3
lab_capture_stop_all || rc=1
hc_verify_phases --vip "$VIP" --port 7 --protocol udp || rc=1
exit "$rc"
