#!/usr/bin/env bash
# 43-host-steering: the host agent's worker steering (host-agent/worker-steering.ts, issue 19) on live
# traffic, in the lab with --workers 2 on every MUX (--io ring, as scenario 41). The host agents still run
# one thread (their workers are not built): on each host, scripts/lab/steering-observer.ts joins 2 ring
# sockets per interface to PACKET_FANOUT_CBPF groups with the steering programs, on the fabric interface
# and on each VM port, and counts (copies of) the frames per socket, decoded with slbx's codecs.
#   1. Scenario 01's traffic and its verifier, unchanged: 1,000 HTTP requests, every packet followed
#      through the captures (MUX in, VXLAN out byte for byte, backend, direct server return).
#   2. On each host, per client connection (the client's address and port): the VXLAN that brought it
#      and the backend's replies on the port were on ONE of the 2 sockets, every frame; both sockets got
#      connections; the connections that came in were seen leaving too.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
VIP=203.0.113.10
LAB_DAEMON_IO=ring
LAB_MUX_WORKERS=2
lab_setup_scenario sc43
SC43_PIDS=()
_sc43_exit() {
  local rc=$? p
  for p in "${SC43_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  set +e
  (exit "$rc")
  _lab_scenario_exit
}
trap _sc43_exit EXIT
lab_up
rc=0

hosts=$(lab_nodes host)
for h in $hosts; do
  ports=$(lab_exec "$h" ls /sys/class/net | grep -v -e '^lo$' -e '^fab0$' | paste -sd, -)
  ip netns exec "$(lab_ns "$h")" "${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/steering-observer.js" \
    --fabric fab0 --ports "$ports" --workers 2 --out "$LAB_DIR/steering-$h.json" >"$LAB_DIR/steering-$h.log" 2>&1 &
  SC43_PIDS+=("$!")
  echo "$h: steering observer on fab0 and $ports (pid $!)"
done
observers_up() { local h; for h in $hosts; do grep -q '^steering-observer:' "$LAB_DIR/steering-$h.log" || return 1; done; }
sc_wait_for 'the steering observers' 60 observers_up || rc=1

echo "--- 1. scenario 01's checks, every MUX with 2 workers"
sc_capture_path
sc_client client1 http --url http://$VIP/ --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/client-http.json" || rc=1
sleep 0.3   # as scenario 01: the last replies reach every capture
lab_capture_stop_all
sc_verify north-south --run "$LAB_DIR" --vip $VIP --port 80 --requests "$REQUESTS" \
  --client-json "$LAB_DIR/client-http.json" --account "$LAB_DIR/account.json" || rc=1

echo "--- 2. per host: both directions of every connection on one steering socket"
for p in "${SC43_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${SC43_PIDS[@]}"; do wait "$p" || { echo "FAIL a steering observer exited $?"; rc=1; }; done
SC43_PIDS=()
for h in $hosts; do
  echo "$h:"
  "${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/host-steering.js" --obs "$LAB_DIR/steering-$h.json" \
    --client-prefix 198.51.100. --min-connections $((REQUESTS / 10)) || rc=1
done
exit "$rc"
