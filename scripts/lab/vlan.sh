# shellcheck shell=bash
# VLAN nics in the lab (docs/lab.md, 'The VLAN lab'; examples/lab-vlan.yaml). Sourced by lib.sh.
#
# A nic of a network of 'type: vlan' gets the plan line 'vlan NIC VLANID' (scripts/lab/plan.ts). Its
# port on the host stays the same veth, now an 802.1Q trunk: the host agent tags what it sends there and
# requires the tag on what it takes. In the nic's namespace the VM's addresses and default routes move
# from eth0 to eth0.VLANID (the same MAC), and eth0 itself keeps no address and no IPv6 (so it sends
# nothing untagged: every untagged frame the port sees is one a test sent). The lab's kernel has no
# 802.1Q module, so eth0.VLANID is a veth whose peer vlanVLANIDp is relayed to and from eth0 by
# scripts/lab/vlan-vm.ts (tag on the way out, untag the VLAN's frames on the way in, drop the rest).

# _lab_vlan_build PREFIX PLAN: after the nics' veths are up with their addresses on eth0.
_lab_vlan_build() {
  local prefix=$1 plan=$2 kind n vid line host port mac a4 a6 gw4 gw6 tcp udp
  while read -r -u 3 kind n vid; do
    [ "$kind" = vlan ] || continue
    line=$(grep -m1 "^nic $n " "$plan") || { _lab_err "plan: vlan line for $n without its nic line"; return 1; }
    read -r kind n host port mac a4 a6 gw4 gw6 tcp udp <<<"$line"
    local N=$prefix$n dev=eth0.$vid
    ip netns exec "$N" sysctl -q -w "net/ipv6/conf/eth0/disable_ipv6=1"  # its IPv6 addresses and routes go
    {
      printf 'route flush dev eth0\n'
      printf 'addr flush dev eth0\n'
      printf 'link add %s address %s type veth peer name vlan%sp\n' "$dev" "$mac" "$vid"
      printf 'link set vlan%sp up\n' "$vid"
      if [ "$a4" != - ]; then printf 'addr add %s/24 dev %s\n' "$a4" "$dev"; fi
      if [ "$a6" != - ]; then printf 'addr add %s/64 dev %s nodad\n' "$a6" "$dev"; fi
      printf 'link set %s up\n' "$dev"
      if [ "$gw4" != - ]; then printf 'route add default via %s dev %s onlink\n' "$gw4" "$dev"; fi
      if [ "$gw6" != - ]; then printf 'route add default via %s dev %s onlink\n' "$gw6" "$dev"; fi
    } | ip -n "$N" -batch -
    ip netns exec "$N" sysctl -q -w "net/ipv6/conf/vlan${vid}p/disable_ipv6=1"
    _lab_tx_off "$N" "$dev" "vlan${vid}p"
    _lab_spawn "$n" backend "$n vlan-vm" "$LAB_DIR/logs/$n-vlan-vm.log" \
      "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/vlan-vm.js" --trunk eth0 --inner "vlan${vid}p" --vlan "$vid" --mac "$mac"
    local pids=("$LAB_SPAWNED_PID") logs=("$LAB_DIR/logs/$n-vlan-vm.log")
    _lab_wait_backends pids logs || return 1
    _lab_log "nic $n: VLAN $vid on $dev (port $port on $host is a trunk)"
  done 3<"$plan"
}
