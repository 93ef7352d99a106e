#!/usr/bin/env bash
# 24-fabric-closed: the fabric is closed to the internet (docs/security.md). From client1 (the outside):
# VXLAN spoofed with each MUX's provider address toward every host PA, ICMP echo, TCP SYNs (the
# controller's API, BGP, the status ports) and UDP (BFD) to every host, MUX and controller address and
# to the router itself, IPv4 and IPv6, and real connection attempts to the controller's API and to BGP
# on a MUX. The router's edge filter (scripts/lab/router-filter.ts) drops all of it: its named nft
# counters move by exactly what client1's capture shows it sent, nothing but VIP traffic appears on the
# router's fabric side, no spoofed inner packet reaches any VM. Then a compromised node on the fabric
# segment (a namespace on the fabric bridge that is no MUX) sends the same spoofed VXLAN with its own
# MAC: it reaches the hosts (their captures) and every frame is refused by the host agents' source MAC
# check (drop_in_spoofed_source), while 1,000 good requests through the VIP all succeed. Twice: over
# the default IPv4 underlay and over an IPv6 underlay (fabric.underlay: ipv6, the MUXes' address6).
# The attacks start once the good traffic's flows are placed, and the counters are read once client1's
# capture (stopped when its last connection closed) is accounted for in full: evidence, not pauses.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
ROGUE_MAC=02:00:c6:12:00:63
FC=("${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/fabric-closed.js")
lab_setup_scenario sc24
base=$LAB_NAME
rc=0
mac_of() { lab_exec "$1" cat "/sys/class/net/$2/address"; }

for underlay in ipv4 ipv6; do
  LAB_NAME=$base-$underlay
  LAB_DIR=$(_lab_dir_of "$LAB_NAME")
  cfg=examples/lab.yaml
  if [ $underlay = ipv6 ]; then
    mkdir -p "$LAB_DIR.cfg"
    cfg=$LAB_DIR.cfg/lab-ipv6-underlay.yaml
    lab_derive_config --config examples/lab.yaml --underlay ipv6 --out "$cfg" || { echo "FAIL could not derive the IPv6-underlay config"; exit 1; }
  fi
  echo "== the fabric closed, over an $underlay underlay"
  lab_up --config "$cfg"

  # the compromised node: a namespace on the fabric bridge that is no MUX (recorded: lab_down deletes it)
  rogue_ns=${SLBX_LAB_PREFIX}rogue
  ip netns add "$rogue_ns"
  _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_NAMESPACES "$rogue_ns" array
  ip netns exec "$rogue_ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "${SLBX_LAB_PREFIX}fabric" link add rogue mtu 1600 type veth peer name fab0 address "$ROGUE_MAC" mtu 1600 netns "$rogue_ns"
  ip -n "${SLBX_LAB_PREFIX}fabric" link set rogue master br0 up
  ip -n "$rogue_ns" link set lo up
  ip -n "$rogue_ns" link set fab0 up

  client_mac=$(mac_of client1 eth0)
  host_macs=$(for h in $(lab_nodes host); do printf '%s=%s,' "$h" "$(mac_of "$h" fab0)"; done)
  mux_macs=$(for m in $(lab_nodes mux); do printf '%s=%s,' "$m" "$(mac_of "$m" fab0)"; done)
  "${FC[@]}" gen --config "$LAB_DIR/config.yaml" --out "$LAB_DIR" --underlay "$underlay" --client-mac "$client_mac" \
    --router-mac "$(mac_of router br0)" --rogue-mac "$ROGUE_MAC" --host-macs "$host_macs"

  lab_capture_start client1 eth0 client1 >/dev/null
  lab_capture_start router fab0 router-fab >/dev/null
  for n in $(lab_nodes host); do lab_capture_start "$n" fab0 "$n" >/dev/null; done
  for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" >/dev/null; done
  lab_router_counters >"$LAB_DIR/edge-before.json"
  for n in $(lab_nodes host); do sc_counters "$n" "$LAB_DIR/host-before-$n.json"; done

  # good traffic all along: the attacks start once the MUXes placed 20 of its flows
  flows0=$(sc_mux_flows)
  sc_client client1 http --url http://203.0.113.10/ --count "$REQUESTS" --concurrency 4 --json "$LAB_DIR/client-http.json" >"$LAB_DIR/client-http.out" 2>&1 &
  good=$!
  sc_wait_for "20 of the good requests' flows placed by the MUXes" 60 eval '[ "$(sc_mux_flows)" -ge $((flows0 + 20)) ]' || rc=1
  # the internet attacker: spoofed VXLAN, probes of the fabric, the router itself
  sc_client client1 inject --interface eth0 --in "$LAB_DIR/outside.pcap" || rc=1
  # real connection attempts: the controller's API and BGP on mux1 (each must time out: no answer at all)
  for url in http://198.18.0.5:8480/v1/state 'http://[2001:db8:f::5]:8480/v1/state' telnet://198.18.0.11:179 'telnet://[2001:db8:f::11]:179'; do
    set +e
    lab_exec client1 curl -s -o /dev/null --connect-timeout 2 -m 3 "$url" </dev/null
    st=$?
    set -e
    # 28: timed out (the SYNs were dropped); 7 would be a refusal (an RST came back: something answered)
    if [ "$st" = 28 ]; then echo "PASS  client1: $url got no answer at all (curl timed out)"
    else echo "FAIL  client1: $url got no answer at all  (curl exit $st)"; rc=1; fi
  done
  # the compromised node on the segment
  ip netns exec "$rogue_ns" "${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/client.js" inject --interface fab0 --in "$LAB_DIR/rogue.pcap" || rc=1
  wait "$good" || rc=1
  cat "$LAB_DIR/client-http.out"
  # evidence, not a pause, that everything sent was counted: client1 has sent its last packet (no TCP
  # connection to the VIP left but in TIME-WAIT), its capture is stopped, and the router's counters show
  # exactly what that capture calls for and every host counted each rogue frame (fabric-closed.js settled)
  sc_wait_for "client1's connections to the VIP closed" 60 eval '[ -z "$(lab_exec client1 ss -Htn state established state syn-sent state fin-wait-1 state fin-wait-2 state close-wait state last-ack state closing dst 203.0.113.10)" ]' || rc=1
  lab_capture_stop client1 || rc=1
  counted() {
    local n hn=''
    lab_router_counters >"$LAB_DIR/edge-now.json" || return 1
    for n in $(lab_nodes host); do sc_counters "$n" "$LAB_DIR/host-now-$n.json" || return 1; hn+="$n=$LAB_DIR/host-now-$n.json,"; done
    "${FC[@]}" settled --config "$LAB_DIR/config.yaml" --run "$LAB_DIR" --client-mac "$client_mac" --edge-now "$LAB_DIR/edge-now.json" --host-now "${hn%,}" 2>"$LAB_DIR/settled.txt"
  }
  sc_wait_for "every packet counted by the router and the hosts" 30 counted || { cat "$LAB_DIR/settled.txt"; rc=1; }
  lab_router_counters >"$LAB_DIR/edge-after.json"
  for n in $(lab_nodes host); do
    sc_counters "$n" "$LAB_DIR/host-after-$n.json"
    sc_status_field "$n" neighbors >"$LAB_DIR/neighbors-$n.json"
  done
  lab_capture_stop_all || rc=1
  "${FC[@]}" verify --config "$LAB_DIR/config.yaml" --run "$LAB_DIR" --underlay "$underlay" --client-mac "$client_mac" \
    --rogue-mac "$ROGUE_MAC" --mux-macs "$mux_macs" --requests "$REQUESTS" || rc=1
  lab_down "$LAB_NAME" >/dev/null
done
exit "$rc"
