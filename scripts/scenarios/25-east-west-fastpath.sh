#!/usr/bin/env bash
# 25-east-west-fastpath (issue 14, docs/east-west.md): a tenant VM on host1 (h1cl1, in no pool) reaches
# the internal VIP of its network (lab config derived with --east-west) whose backends sit on host1 and
# host2: 200 keep-alive TCP connections of 25 request/response exchanges each, then 200 UDP flows of 10
# datagrams each. Only each flow's first packets may cross a MUX: once the MUX saw the handshake (TCP)
# or the second datagram (UDP) it sends host1 a signed redirect, and the rest of the flow goes host1's
# PA to host2's PA, or stays on host1 when the backend is there. Verified from the captures (both MUXes'
# and both hosts' fab0, the client VM's and every backend's eth0; slbx's decoder and tshark), the
# client's records and host1's counters (scripts/scenarios/lib/east-west.ts): per TCP flow at most 4
# client packets at the MUXes (the distribution is printed), no packet of a flow through a MUX once one
# took the fast path, every later packet PA to PA, no reply through a MUX, only the VIP in the client
# VM's capture, payloads byte for byte, each flow at the backend the independent Maglev oracle picks.
# FAMILY=6 runs the same over the IPv6 internal VIP (scenario 27; the underlay stays IPv4).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
FAMILY=${FAMILY:-4}
CONNECTIONS=${CONNECTIONS:-200}
EXCHANGES=${EXCHANGES:-25}
MIN_EXCHANGES=20
UDP_FLOWS=${UDP_FLOWS:-200}
DATAGRAMS=${DATAGRAMS:-10}
CLIENT=h1cl1
case $FAMILY in
  4) VIP=198.19.0.100; URL_HOST=$VIP ;;
  6) VIP=2001:db8:e::100; URL_HOST="[$VIP]" ;;
  *) echo "FAMILY must be 4 or 6, got '$FAMILY'" >&2; exit 2 ;;
esac
# FAMILY=6 is scenario 27 (27-east-west-fastpath-ipv6.sh)
lab_setup_scenario "sc$([ "$FAMILY" = 6 ] && echo 27 || echo 25)"
mkdir -p "$LAB_DIR.cfg"
cfg=$LAB_DIR.cfg/lab-east-west.yaml
lab_derive_config --config examples/lab.yaml --east-west --out "$cfg" || { echo "FAIL could not derive the east-west config"; exit 1; }
lab_up --config "$cfg"
rc=0

for n in $(lab_nodes mux) $(lab_nodes host); do lab_capture_start "$n" fab0 "$n" udp port 4789 or udp port 4799 >/dev/null; done
lab_capture_start "$CLIENT" eth0 "$CLIENT" >/dev/null
for n in $(lab_nodes nic); do [ "$n" = "$CLIENT" ] || lab_capture_start "$n" eth0 "$n" tcp port 7000 or udp port 7001 >/dev/null; done
sc_counters host1 "$LAB_DIR/host1-before.json"

# TCP: every connection opened at once, each asks EXCHANGES times back to back (duration only a cap)
sc_client "$CLIENT" hold --url "http://$URL_HOST:7000/health" --connections "$CONNECTIONS" --requests "$EXCHANGES" --interval-ms 0 \
  --duration-ms 120000 --timeout-ms 20000 --json "$LAB_DIR/hold.json" >"$LAB_DIR/hold.out" 2>&1 || rc=1
cat "$LAB_DIR/hold.out"
# UDP: no two flows may share a source port (one 5-tuple is one flow): every socket stays open to the end
sc_client "$CLIENT" udp --target "$URL_HOST:7001" --flows "$UDP_FLOWS" --datagrams "$DATAGRAMS" --concurrency 16 --distinct-ports --timeout-ms 5000 \
  --payload "ew {i}" --json "$LAB_DIR/udp.json" >"$LAB_DIR/udp.out" 2>&1 || rc=1
cat "$LAB_DIR/udp.out"
# evidence that the client sent its last packet: no TCP connection to the VIP left but in TIME-WAIT
sc_wait_for "the client VM's connections to the VIP closed" 60 eval '[ -z "$(lab_exec "$CLIENT" ss -Htn state established state syn-sent state fin-wait-1 state fin-wait-2 state close-wait state last-ack state closing dst "$VIP")" ]' || rc=1
sc_counters host1 "$LAB_DIR/host1-after.json"
sc_status_field host1 eastWest >"$LAB_DIR/host1-east-west.json" || rc=1
echo "[sc25] host1 east-west entries after the run: $(cat "$LAB_DIR/host1-east-west.json")"
lab_capture_stop_all || rc=1

sc_verify east-west-fastpath --run "$LAB_DIR" --family "$FAMILY" --client "$CLIENT" --connections "$CONNECTIONS" \
  --min-exchanges "$MIN_EXCHANGES" --udp-flows "$UDP_FLOWS" --datagrams "$DATAGRAMS" --hold "$LAB_DIR/hold.json" \
  --udp "$LAB_DIR/udp.json" --host1-before "$LAB_DIR/host1-before.json" --host1-after "$LAB_DIR/host1-after.json" || rc=1
exit "$rc"
