#!/usr/bin/env bash
# 16-pmtu: the fabric MTU is lowered to 1400 while clients and backends keep 1500. A 3 MB download
# through the VIP completes: the backends' 1500-byte replies do not fit the DSR return, the host agents
# answer them with ICMP fragmentation needed (MTU 1400) from the gateway, and the backends' TCP sends
# smaller segments. A 3 MB upload completes: the client's 1500-byte packets do not fit the fabric after
# VXLAN, the MUX answers with ICMP fragmentation needed from the VIP (MTU 1350) and the client's TCP
# adapts. An ICMP error sent to the VIP about an existing flow arrives at that flow's backend with its
# outer and quoted headers translated.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
MTU=1400
BYTES=3000000
CPORT=45678
lab_setup_scenario sc16
mkdir -p "$LAB_DIR.cfg"
cfg=$LAB_DIR.cfg/lab-mtu-$MTU.yaml
sed "s/^  mtu: 1600.*/  mtu: $MTU/" examples/lab.yaml >"$cfg"
grep -q "^  mtu: $MTU" "$cfg" || { echo 'FAIL could not derive the lowered-MTU config'; exit 1; }
lab_up --config "$cfg"
sc_capture_path
sc_counters mux1 "$LAB_DIR/mux-before.json"
rc=0
down=$(lab_exec client1 curl -s -m 60 -o /dev/null -w '%{size_download} %{http_code}' "http://203.0.113.10/bytes/$BYTES") || rc=1
head -c "$BYTES" /dev/zero | tr '\0' 'u' >"$LAB_DIR/upload.bin"
up=$(lab_exec client1 curl -s -m 60 -X POST -H 'content-type: application/octet-stream' --data-binary "@$LAB_DIR/upload.bin" http://203.0.113.10/upload) || rc=1
# an existing flow: a slow request from a known client port; then an ICMP error about it, "from the router"
lab_exec client1 curl -s -m 20 --local-port $CPORT -o "$LAB_DIR/slow.txt" http://203.0.113.10/slow/3000 &
slow=$!
sleep 1
mac_of() { lab_exec "$1" cat "/sys/class/net/$2/address"; }
sc_verify gen-icmp --out "$LAB_DIR/icmp.pcap" --router-mac "$(mac_of router fab0)" --router 198.51.100.1 --vip 203.0.113.10 \
  --client 198.51.100.10 --client-port $CPORT --mux-mac "$(mac_of mux1 fab0)"
sc_client router inject --interface fab0 --in "$LAB_DIR/icmp.pcap" || rc=1
wait $slow || rc=1
sleep 0.3
sc_counters mux1 "$LAB_DIR/mux-after.json"
lab_capture_stop_all || rc=1
sc_verify pmtu --run "$LAB_DIR" --download-bytes $BYTES --download-result "$down" --upload-bytes $BYTES --upload-result "$up" \
  --client-port $CPORT --slow-backend "$(tr -d '\n' <"$LAB_DIR/slow.txt")" --mux-before "$LAB_DIR/mux-before.json" --mux-after "$LAB_DIR/mux-after.json" || rc=1
exit "$rc"
