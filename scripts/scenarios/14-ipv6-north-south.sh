#!/usr/bin/env bash
# 14-ipv6-north-south: the scenario 01 story over IPv6: 1,000 HTTP requests to the IPv6 VIP
# [2001:db8:ff::10], a new connection each, all succeed; every client packet reaches a MUX and leaves it
# inside VXLAN byte for byte to the chosen backend's host; backends see [DIP]:80; replies leave the hosts
# from the IPv6 VIP (DSR) and reach the client; zero replies on any MUX; tshark decodes it all. Twice:
# over the default IPv4 underlay, then with fabric.underlay: ipv6 (IPv6 outer header, UDP checksum).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
lab_setup_scenario sc14
base=$LAB_NAME
rc=0
for underlay in ipv4 ipv6; do
  LAB_NAME=$base-$underlay
  LAB_DIR=$(_lab_dir_of "$LAB_NAME")
  cfg=examples/lab.yaml
  if [ $underlay = ipv6 ]; then
    mkdir -p "$LAB_DIR.cfg"
    cfg=$LAB_DIR.cfg/lab-ipv6-underlay.yaml
    lab_derive_config --config examples/lab.yaml --underlay ipv6 --out "$cfg" || { echo "FAIL could not derive the IPv6-underlay config"; exit 1; }
  fi
  echo "== VIP [2001:db8:ff::10] over an $underlay underlay"
  lab_up --config "$cfg"
  sc_capture_path
  sc_client client1 http --url 'http://[2001:db8:ff::10]/' --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/client-http.json" || rc=1
  sleep 0.3
  lab_capture_stop_all || rc=1
  sc_verify north-south --run "$LAB_DIR" --vip 2001:db8:ff::10 --port 80 --requests "$REQUESTS" --client-json "$LAB_DIR/client-http.json" || rc=1
  if [ $underlay = ipv6 ]; then
    # independently of our decoder: tshark sees IPv6 outer headers with a verified UDP checksum
    n=$(tshark -r "$LAB_DIR/pcaps/mux1.pcap" -d udp.port==4789,vxlan -o udp.check_checksum:TRUE -Y 'vxlan && ipv6.src==2001:db8:f::11 && udp.checksum.status==1' 2>/dev/null | wc -l)
    bad=$(tshark -r "$LAB_DIR/pcaps/mux1.pcap" -d udp.port==4789,vxlan -o udp.check_checksum:TRUE -Y 'vxlan && udp.checksum.status!=1' 2>/dev/null | wc -l)
    if [ "$n" -gt 0 ] && [ "$bad" = 0 ]; then echo "PASS  tshark: mux1 sent VXLAN over IPv6 with good UDP checksums  ($n packets, $bad bad)"
    else echo "FAIL  tshark: mux1 sent VXLAN over IPv6 with good UDP checksums  ($n packets, $bad bad)"; rc=1; fi
  fi
  lab_down "$LAB_NAME" >/dev/null
done
exit "$rc"
