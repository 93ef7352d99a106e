#!/usr/bin/env bash
# 02-udp-and-modes: UDP echo through the VIP. With the 5-tuple (port 7) one client's flows spread over
# every backend; with the 3-tuple (port 7003) and the 2-tuple (port 7002) every flow of one client stays
# on one backend, and 32 different clients spread over all of them. Verified from the backends'
# captures (and the echoes, which name the backend), cross-checked with tshark.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
lab_setup_scenario sc02
lab_up
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" udp >/dev/null; done
rc=0
# 5-tuple: 200 flows from one address, each from a new source port
sc_client client1 udp --target 203.0.113.10:7 --flows 200 --sources 198.51.100.10 --json "$LAB_DIR/udp-5.json" || rc=1
# 3-tuple and 2-tuple: 32 clients (client1's 32 addresses), 4 flows each
sc_client client1 udp --target 203.0.113.10:7003 --flows 128 --sources 198.51.100.10-198.51.100.41 --json "$LAB_DIR/udp-3.json" || rc=1
sc_client client1 udp --target 203.0.113.10:7002 --flows 128 --sources 198.51.100.10-198.51.100.41 --json "$LAB_DIR/udp-2.json" || rc=1
sleep 0.3
lab_capture_stop_all
sc_verify udp-modes --run "$LAB_DIR" --vip 203.0.113.10 --five 7 --three 7003 --two 7002 \
  --five-json "$LAB_DIR/udp-5.json" --three-json "$LAB_DIR/udp-3.json" --two-json "$LAB_DIR/udp-2.json" --single-source 198.51.100.10
exit "$rc"
