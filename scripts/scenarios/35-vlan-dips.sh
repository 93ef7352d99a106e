#!/usr/bin/env bash
# 35-vlan-dips (issue 18, point 1): a pool of DIPs on a VLAN network (tenant-v, VLAN 100, VNI 5100
# between MUXes and hosts) beside a pool on a VXLAN network (tenant-a, VNI 5001), on the same two hosts
# (examples/lab-vlan.yaml; the lab: docs/lab.md, 'The VLAN lab'). 1,000 requests to each VIP answered
# by its own pool; the captures of the hosts' ports show the 802.1Q tag 100 on every frame to and from a
# VLAN DIP and none on the VXLAN DIPs' ports (slbx's codecs and tshark); the VLAN VIP's DSR replies reach
# the router untagged; frames from a VLAN DIP's namespace with VLAN 200 or no tag, sent raw on its
# trunk, are dropped by host1 and counted (drop_out_vlan_wrong_tag, drop_out_vlan_missing_tag).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
lab_setup_scenario sc35
lab_up --config examples/lab-vlan.yaml
mac_of() { lab_exec "$1" cat "/sys/class/net/$2/address"; }
port_macs=()
while read -r -u 3 kind n host port _; do
  [ "$kind" = nic ] || continue
  lab_capture_start "$host" "$port" "$host-$port" >/dev/null
  port_macs+=("$host:$port=$(mac_of "$host" "$port")")
done 3<"$LAB_DIR/plan.txt"
lab_capture_start router fab0 router-fab0 >/dev/null
rc=0
sc_client client1 http --url http://203.0.113.10/ --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/vxlan.json" || rc=1
sc_client client1 http --url http://203.0.113.20/ --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/vlan.json" || rc=1
lab_capture_stop_all || rc=1
# the bad tags: raw on h1vl1's eth0 (the trunk side of its VLAN relay), from its MAC and address
sc_verify gen-bad-tags --out "$LAB_DIR" --config "$LAB_DIR/config.yaml" --nic h1vl1 --port-mac "$(mac_of host1 h1vl1)"
sc_counters host1 "$LAB_DIR/host-before.json"
sc_client h1vl1 inject --interface eth0 --in "$LAB_DIR/bad-tags.pcap" || rc=1
# until host1 has judged all 14 (the verdict below is on the exact counts, not on this wait)
bad_tags_judged() {
  sc_counters host1 "$LAB_DIR/host-after.json" || return 1
  local b1 b2 a1 a2
  { read -r b1; read -r b2; } < <(lab_json_get --type number drop_out_vlan_missing_tag drop_out_vlan_wrong_tag <"$LAB_DIR/host-before.json")
  { read -r a1; read -r a2; } < <(lab_json_get --type number drop_out_vlan_missing_tag drop_out_vlan_wrong_tag <"$LAB_DIR/host-after.json")
  [ $((a1 + a2 - b1 - b2)) -ge 14 ]
}
sc_wait_for 'host1 judging the 14 bad-tag frames' 30 bad_tags_judged || rc=1
sc_counters host1 "$LAB_DIR/host-after.json"
sc_verify vlan-dips --run "$LAB_DIR" --vxlan-json "$LAB_DIR/vxlan.json" --vlan-json "$LAB_DIR/vlan.json" --requests "$REQUESTS" \
  --port-macs "$(IFS=,; echo "${port_macs[*]}")" --host-before "$LAB_DIR/host-before.json" --host-after "$LAB_DIR/host-after.json" || rc=1
exit "$rc"
