#!/usr/bin/env bash
# 29-latency-per-mux: two MUXes that see the same backends at different distances each send new flows
# to its own fastest, as each Front Door environment measures the origins and routes for itself (issue
# 17). Pool web is under latency routing at sensitivity 0 (a latency section: every MUX measures each
# backend, docs/latency.md); the lab's delay links (docs/lab.md, "Delay links") put host1 5 ms from mux1
# and 150 ms from mux2, host2 the other way round. Then the distances are swapped live.
# What must happen, per phase, from each MUX's capture (its VXLAN to the hosts, decoded with slbx's
# codecs; tshark recounts) and the client's records:
#   * mux1 sends every new flow to host1's backends, mux2 to host2's (the nearest by the delays file:
#     the expectation comes from the delay links, not from the MUXes); after the swap, the other way;
#   * both MUXes carry flows (ECMP), every flow is answered, by the backend its MUX sent it to.
# Each phase starts once both MUXes' status shows the expected band (evidence, not a sleep; the wait is
# generous: measurements come every 200 ms, a median of 9, and a loaded machine is slow).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
VIP=203.0.113.10
FLOWS=${FLOWS:-1000}
TABLE=web  # the echo rule's pool table (no probe: the pool's name alone)
lab_setup_scenario sc29
work=$SLBX_ROOT/runs/sc29-$$
mkdir -p "$work"
"${SC_NODE[@]}" dist/scripts/scenarios/lib/latency-per-mux.js config --in examples/lab.yaml --out "$work/config.yaml"
# near 5 ms, far 150 ms: far enough apart that a loaded machine's noise in the MUXes' own measurement
# (tens of ms at load average 60) does not swap them
printf '%s\n' 'delays:' '  - { between: [mux1, host1], ms: 5 }' '  - { between: [mux1, host2], ms: 150 }' \
  '  - { between: [mux2, host1], ms: 150 }' '  - { between: [mux2, host2], ms: 5 }' >"$work/delays-near.yaml"
lab_up --config "$work/config.yaml" --delays "$work/delays-near.yaml"
rc=0

candidates() { lab_daemon_status "$1" 2>/dev/null | "${SC_NODE[@]}" dist/scripts/scenarios/lib/latency-per-mux.js candidates "$TABLE"; }
band_is() { [ "$(candidates mux1)" = "$1" ] && [ "$(candidates mux2)" = "$2" ]; }

phase() {  # NAME DELAYS MUX1-BAND MUX2-BAND
  local name=$1 delays=$2 m
  sc_wait_for "mux1's band $3 and mux2's $4 ($name)" 60 band_is "$3" "$4" || {
    echo "[sc29] mux1: $(candidates mux1); mux2: $(candidates mux2)" >&2; return 1; }
  for m in mux1 mux2; do lab_capture_start "$m" fab0 "$m-$name" udp port 4789 >/dev/null; done
  sc_client client1 udp --target "$VIP:7" --flows "$FLOWS" --sources 198.51.100.10-198.51.100.41 \
    --json "$LAB_DIR/udp-$name.json" >"$LAB_DIR/udp-$name.out" 2>&1 || rc=1
  tail -n 3 "$LAB_DIR/udp-$name.out"
  for m in mux1 mux2; do lab_capture_stop "$m-$name" || rc=1; done
  for m in mux1 mux2; do lab_daemon_status "$m" >"$LAB_DIR/status-$m-$name.json" || rc=1; done
  sc_verify latency-per-mux --run "$LAB_DIR" --phase "$name" --delays "$delays" --records "$LAB_DIR/udp-$name.json" || rc=1
}

phase near "$work/delays-near.yaml" h1vm1,h1vm2 h2vm1,h2vm2 || rc=1

# the distances swapped live: host1 is now far from mux1 and near mux2
lab_delay_set mux1 host1 150 && lab_delay_set mux1 host2 5 && lab_delay_set mux2 host1 5 && lab_delay_set mux2 host2 150 || rc=1
cp "$LAB_DIR/delays.yaml" "$work/delays-swapped.yaml"
phase swapped "$work/delays-swapped.yaml" h2vm1,h2vm2 h1vm1,h1vm2 || rc=1
lab_delay_status >"$LAB_DIR/delay-status.json" || rc=1
exit "$rc"
