#!/usr/bin/env bash
# The main job: installs what is missing and builds, brings up the default lab (examples/lab.yaml: a
# client, a router, 2 MUXes, 2 hosts with 2 backends each, in network namespaces), captures every link,
# sends 1,000 HTTP requests to the VIP, verifies the packet path from the captures (slbx's own decoder,
# cross-checked by tshark), prints an account of which hop saw what, writes the packet-walk report
# (report.html beside the pcaps: one flow hop by hop, charts, drops) and tears the lab down. The pcaps,
# logs and report stay in the folder it prints.
#   scripts/demo.sh [--requests N] [--keep]     --keep leaves the lab up (scripts/lab.sh down --name demo)
#   scripts/demo.sh --offline                   the offline replay demo instead (no namespaces)
set -euo pipefail
cd "$(dirname "$0")/.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
requests=1000 keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --requests) requests=${2:?--requests needs a number}; shift 2 ;;
    --keep) keep=1; shift ;;
    --offline) exec scripts/replay-demo.sh ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo 'demo.sh: run as root (it creates network namespaces)'; exit 1; }
source scripts/lib/setup.sh
slbx_setup
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
name=demo
[ $keep = 1 ] || name=demo-$$
if [ $keep = 1 ] && [ -f runs/lab/demo/state.env ]; then lab_down demo >/dev/null 2>&1 || true; fi
rm -rf "runs/lab/$name"
cleanup() { local rc=$?; [ $keep = 1 ] || lab_down "$name" >/dev/null 2>&1 || true; exit $rc; }
trap cleanup EXIT
trap 'exit 130' INT TERM
echo "== bringing up the lab (examples/lab.yaml)"
lab_up --name "$name" 2>&1 | sed 's/^/   /'
lab_use "$name"
sc_capture_path
echo "== $requests HTTP requests from client1 to http://203.0.113.10/"
rc=0
sc_client client1 http --url http://203.0.113.10/ --count "$requests" --concurrency 8 --json "$LAB_DIR/client-http.json" | sed 's/^/   /' || rc=1
sleep 0.3
lab_capture_stop_all
echo "== verifying the path from the captures"
sc_verify north-south --run "$LAB_DIR" --vip 203.0.113.10 --port 80 --requests "$requests" \
  --client-json "$LAB_DIR/client-http.json" --account "$LAB_DIR/account.json" | sed 's/^/   /' || rc=1
for n in $(lab_nodes mux) $(lab_nodes host); do sc_counters "$n" "$LAB_DIR/$n-counters.json" || true; done
node dist/scripts/scenarios/lib/verify.js account "$LAB_DIR/account.json" "$LAB_DIR"
echo "== the packet-walk report (one flow hop by hop, the run's distribution, drops, tshark), from the captures"
node dist/scripts/lab/report.js --run "$LAB_DIR" --vip 203.0.113.10 --port 80 | sed 's/^/   /' || rc=1
if [ $keep = 1 ]; then
  echo
  echo "The lab is still up: scripts/lab.sh status --name demo; scripts/lab.sh exec --name demo client1 curl -s http://203.0.113.10/"
  echo "Take it down with: scripts/lab.sh down --name demo"
fi
exit $rc
