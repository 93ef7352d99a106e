# shellcheck shell=bash
# A routed underlay for the lab (issue 18; examples/lab-routed.yaml, docs/lab.md "A routed underlay"):
# sourced by lib.sh. With `rack` lines in the plan (hosts whose gateway is off the fabric), _lab_build
# calls _lab_routed_build after the fabric links: per rack a leaf router namespace LEAF with an uplink
# on the fabric bridge (port LEAF, address UPLINK4/24, default route to the lab router) and a rack
# bridge br0 holding the rack's gateway; each racked host's fabric port moves from the fabric bridge
# to its leaf's bridge, and its default route goes to its leaf. The lab router gets a route to each
# rack and the loopback address the MUXes peer with (multihop BGP and BFD); the MUXes get a default
# route to the router (their kernel's BGP and BFD; their VXLAN goes to the router's MAC by the MUX's
# own next-hop resolution), and so does the controller (the racked host agents reach it through the
# router). Nothing here runs for a plan without racks.
#   _lab_routed_racked HOST          true when the plan puts HOST in a rack (lib.sh skips its default route)
#   _lab_routed_build PREFIX STATE   builds the leaves, racks and routes

_lab_routed_racked() {
  awk -v h="$1" '$1 == "rack" { n = split($6, a, ","); for (i = 1; i <= n; i++) if (a[i] == h) f = 1 } END { exit !f }' "$LAB_DIR/plan.txt"
}

# 02:00 and the four bytes of an IPv4 address (the plan's convention for the lab's MACs)
_lab_routed_mac() {
  local IFS=.
  # shellcheck disable=SC2086
  set -- $1
  printf '02:00:%02x:%02x:%02x:%02x' "$1" "$2" "$3" "$4"
}

_lab_routed_build() {
  local prefix=$1 state=$2 plan=$LAB_DIR/plan.txt
  grep -q '^rack ' "$plan" || return 0
  local F=${prefix}fabric R=${prefix}router mtu r_f4 lo kind leaf net gw up hosts h port n
  read -r _ mtu < <(awk '$1 == "fabric"' "$plan")
  read -r _ _ _ r_f4 _ < <(awk '$1 == "router"' "$plan")
  read -r _ lo < <(awk '$1 == "loopback"' "$plan")
  ip -n "$R" addr add "$lo/32" dev lo
  # the router forwards fabric to fabric (MUX to leaf): no ICMP redirects toward the MUXes
  ip netns exec "$R" sysctl -q -w net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.fab0.send_redirects=0
  while read -r -u 3 kind leaf net gw up hosts; do
    [ "$kind" = rack ] || continue
    local L=$prefix$leaf ports=()
    ip netns add "$L"
    _lab_state_add "$state" SLBX_LAB_NAMESPACES "$L" array
    printf 'SLBX_LAB_NODES+=(%s)\n' "$leaf" >>"$state"
    ip -n "$L" link set lo up
    ip netns exec "$L" sysctl -q -w net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
      net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0 \
      net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    _lab_bridge_nf_off "$L"
    ip -n "$F" link add "$leaf" mtu "$mtu" type veth peer name up0 address "$(_lab_routed_mac "$up")" mtu "$mtu" netns "$L"
    ip -n "$F" link set "$leaf" master br0 up
    ip -n "$L" addr add "$up/24" dev up0
    ip -n "$L" link set up0 up
    ip -n "$L" route add default via "$r_f4" dev up0
    ip -n "$L" link add br0 address "$(_lab_routed_mac "$gw")" type bridge forward_delay 0 stp_state 0 mcast_snooping 0
    ip -n "$L" link set br0 mtu "$mtu" up
    ip -n "$L" addr add "$gw/${net#*/}" dev br0
    ip -n "$R" route add "$net" via "$up" dev fab0
    # the controller on the fabric answers the racked host agents through the router
    if ip netns list | grep -q "^${prefix}controller\b"; then ip -n "${prefix}controller" route add "$net" via "$r_f4" dev fab0; fi
    for h in ${hosts//,/ }; do
      port=$(awk -v n="$h" '$1 == "host" && $2 == n { print $5; exit }' "$plan")
      ip -n "$F" link set "$port" nomaster
      ip -n "$F" link set "$port" netns "$L"
      ip -n "$L" link set "$port" master br0 up
      ports+=("$port")
      ip -n "$prefix$h" route add default via "$gw" dev fab0
    done
    _lab_tx_off "$F" "$leaf"
    _lab_tx_off "$L" up0 "${ports[@]}"
  done 3<"$plan"
  while read -r -u 3 kind n _; do
    [ "$kind" = mux ] || continue
    ip -n "$prefix$n" route add default via "$r_f4" dev fab0
  done 3<"$plan"
}
