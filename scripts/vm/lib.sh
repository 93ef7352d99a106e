# The VM lab's library (scripts/vm-lab.sh): Debian VMs under QEMU (TCG) on bridges inside one network
# namespace of the lab's own, so no packet reaches the root namespace or leaves the machine.
#   vm_up              image (cached), namespace, bridges, TAPs, seed disks, overlays, QEMU per VM; waits
#                      until every VM answers ssh; then installs slbx in each the way docs/deploy.md says
#   vm_down            QEMU processes (by the PIDs it recorded), ssh masters, the namespace; logs stay
#   vm_exec VM CMD     a command in a VM (ssh over the management bridge, as root)
#   vm_status          each VM's QEMU PID, ssh, the units, the router's VIP route
# The lab name (--name, default slbx-vm) is the namespace's name; its files are under
# runs/vm-lab/NAME/ (console logs, pcaps, results) and $SLBX_VM_CACHE/run-NAME/ (disk overlays).

VM_CACHE=${SLBX_VM_CACHE:-/var/cache/slbx-vm}
VM_NAME=${VM_NAME:-slbx-vm}
VM_MEM_MB=${VM_MEM_MB:-512}
VM_BOOT_TIMEOUT_S=${VM_BOOT_TIMEOUT_S:-1800} # per wait: 7 VMs took 4.5 min to boot at load 15, over 10 at load 25-44
VM_CONFIG_SRC=$SLBX_ROOT/scripts/vm/slbx-vm.yaml
VIP=203.0.113.10

# name  index  mgmt address  fabric address(/24)  client-side address(/24)  role
VM_TABLE='router 2 198.19.0.2 198.18.0.1 198.51.100.1 router
controller 5 198.19.0.5 198.18.0.5 - controller
mux1 11 198.19.0.11 198.18.0.11 - mux
mux2 12 198.19.0.12 198.18.0.12 - mux
host1 21 198.19.0.21 198.18.0.21 - host
host2 22 198.19.0.22 198.18.0.22 - host
client1 3 198.19.0.3 - 198.51.100.10 client'

vm_log() { printf '[vm-lab %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
vm_err() { printf '[vm-lab] error: %s\n' "$*" >&2; }
vm_now_ms() { local t=$EPOCHREALTIME; printf '%s' "$(( ${t%.*} * 1000 + 10#${t#*.} / 1000 ))"; }

vm_paths() {
  VM_NS=$VM_NAME
  VM_RUN=$SLBX_ROOT/runs/vm-lab/$VM_NAME
  VM_DISKS=$VM_CACHE/run-$VM_NAME
}
vm_names() { awk '{print $1}' <<<"$VM_TABLE"; }
vm_field() { awk -v n="$1" -v f="$2" '$1 == n { print $f }' <<<"$VM_TABLE"; }
vm_mgmt() { vm_field "$1" 3; }
vm_role() { vm_field "$1" 6; }
vm_mac() { printf '52:54:00:00:%02x:%02x' "$(vm_field "$1" 2)" "$2"; }
vm_known() { [ -n "$(vm_field "$1" 1)" ]; }

VM_SSH_OPTS=(-q -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=10
  -o ServerAliveInterval=5 -o ServerAliveCountMax=6 -o BatchMode=yes)

# vm_exec VM CMD...: CMD in VM as root (one shell line); stdin is passed on
vm_exec() {
  local vm=$1; shift
  vm_known "$vm" || { vm_err "no VM named '$vm' (VMs: $(vm_names | tr '\n' ' '))"; return 2; }
  ip netns exec "$VM_NS" ssh "${VM_SSH_OPTS[@]}" -i "$VM_CACHE/id_ed25519" -o ControlMaster=auto \
    -o "ControlPath=$VM_RUN/ssh-%h" -o ControlPersist=900 "root@$(vm_mgmt "$vm")" "$*"
}
# vm_copy_from VM REMOTE LOCAL
vm_copy_from() {
  ip netns exec "$VM_NS" scp "${VM_SSH_OPTS[@]}" -i "$VM_CACHE/id_ed25519" -o "ControlPath=$VM_RUN/ssh-%h" \
    "root@$(vm_mgmt "$1"):$2" "$3"
}
vm_qemu_pid() { local f=$VM_RUN/$1.pid; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"; }

# the seed disk of one VM: setup.sh (run at every boot by slbx-vm-seed.service) and its files
vm_seed() {
  local vm=$1 dir=$VM_DISKS/seed-$vm role mgmt fab cli
  role=$(vm_role "$vm") mgmt=$(vm_mgmt "$vm") fab=$(vm_field "$vm" 4) cli=$(vm_field "$vm" 5)
  rm -rf "$dir" && mkdir -p "$dir"
  {
    echo "# seed of $vm ($role), written by scripts/vm/lib.sh"
    echo "echo $vm >/etc/hostname; hostname $vm"
    echo "grep -q ' $vm\$' /etc/hosts || echo '127.0.1.1 $vm' >>/etc/hosts"
    echo 'mkdir -p /etc/systemd/network'
    # eth0: management (the lab's ssh); eth1: the fabric (router, mux, host, controller) or the client segment
    echo "printf '[Match]\nMACAddress=$(vm_mac "$vm" 0)\n[Network]\nAddress=$mgmt/24\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n' >/etc/systemd/network/10-mgmt.network"
    if [ "$fab" != - ]; then
      local gw=''
      case $role in host|mux|controller) gw='Gateway=198.18.0.1\n' ;; esac
      echo "printf '[Match]\nMACAddress=$(vm_mac "$vm" 1)\n[Link]\nMTUBytes=1600\n[Network]\nAddress=$fab/24\n${gw}LinkLocalAddressing=no\nIPv6AcceptRA=no\n' >/etc/systemd/network/20-fabric.network"
    fi
    if [ "$cli" != - ]; then
      local gw='' mac_i=2
      [ "$role" = client ] && { gw='Gateway=198.51.100.1\n'; mac_i=1; }
      echo "printf '[Match]\nMACAddress=$(vm_mac "$vm" $mac_i)\n[Network]\nAddress=$cli/24\n${gw}LinkLocalAddressing=no\nIPv6AcceptRA=no\n' >/etc/systemd/network/30-client.network"
    fi
    # sysctls (docs/deploy.md): only the router forwards; it hashes ECMP on L4 ports
    if [ "$role" = router ]; then
      echo "printf 'net.ipv4.ip_forward=1\nnet.ipv4.conf.all.rp_filter=0\nnet.ipv4.conf.default.rp_filter=0\nnet.ipv4.fib_multipath_hash_policy=3\nnet.ipv4.fib_multipath_hash_fields=0x37\n' >/etc/sysctl.d/61-slbx-vm-role.conf"
    else
      echo "printf 'net.ipv4.ip_forward=0\nnet.ipv6.conf.all.forwarding=0\n' >/etc/sysctl.d/61-slbx-vm-role.conf"
    fi
    echo 'sysctl -q --system >/dev/null || true'
    # offloads off on the data interfaces (captures show what is on the wire; the daemons inject whole frames)
    echo 'for i in /sys/class/net/eth[12]; do [ -e "$i" ] && ethtool -K "${i##*/}" tx off tso off gso off gro off >/dev/null 2>&1 || true; done'
    if [ "$role" = host ]; then
      # the backends: one namespace per nic of this host, its veth's host side named like the config's port
      local n mac a
      while read -r n mac a; do
        echo "ip netns add $n 2>/dev/null || true"
        echo "ip link add $n type veth peer name eth0 address $mac netns $n"
        echo "ip link set $n up; ip -n $n link set lo up; ip -n $n addr add $a/24 dev eth0; ip -n $n link set eth0 up"
        echo "ip -n $n route add default via 192.0.2.1 dev eth0 onlink"
        echo "sysctl -q -w net.ipv6.conf.$n.disable_ipv6=1; ethtool -K $n tx off >/dev/null; ip netns exec $n ethtool -K eth0 tx off >/dev/null"
      done < <(vm_nics_of "$vm")
    fi
  } >"$dir/setup.sh"
  rm -f "$VM_DISKS/seed-$vm.img"
  mkfs.ext4 -q -F -L seed -d "$dir" "$VM_DISKS/seed-$vm.img" 8M >/dev/null
}
# vm_nics_of HOST: "nic mac address" per nic of HOST in the config
vm_nics_of() {
  node -e '
    const y = require(process.argv[1]);
    const c = y.parse(require("fs").readFileSync(process.argv[2], "utf8"));
    for (const n of c.nics) if (n.host === process.argv[3]) console.log(n.name, n.mac, n.addresses[0]);
  ' "$SLBX_ROOT/node_modules/yaml" "$VM_CONFIG_SRC" "$1"
}

vm_start_qemu() {
  local vm=$1 role fab cli nets=()
  role=$(vm_role "$vm") fab=$(vm_field "$vm" 4) cli=$(vm_field "$vm" 5)
  nets+=(-netdev "tap,id=n0,ifname=$vm-m,script=no,downscript=no" -device "virtio-net-pci,netdev=n0,mac=$(vm_mac "$vm" 0)")
  if [ "$fab" != - ]; then
    nets+=(-netdev "tap,id=n1,ifname=$vm-f,script=no,downscript=no" -device "virtio-net-pci,netdev=n1,mac=$(vm_mac "$vm" 1)")
  fi
  if [ "$cli" != - ]; then
    local i=2; [ "$role" = client ] && i=1
    nets+=(-netdev "tap,id=n$i,ifname=$vm-c,script=no,downscript=no" -device "virtio-net-pci,netdev=n$i,mac=$(vm_mac "$vm" $i)")
  fi
  rm -f "$VM_RUN/$vm.pid"
  ip netns exec "$VM_NS" qemu-system-x86_64 -name "$VM_NAME-$vm" -machine pc -accel tcg,tb-size=128 -m "$VM_MEM_MB" -smp 1 \
    -kernel "$VM_CACHE/vmlinuz" -initrd "$VM_CACHE/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 quiet net.ifnames=0 systemd.show_status=0" \
    -drive "file=$VM_DISKS/$vm.qcow2,if=virtio,format=qcow2" -drive "file=$VM_DISKS/seed-$vm.img,if=virtio,format=raw,readonly=on" \
    "${nets[@]}" -display none -monitor none -serial "file:$VM_RUN/console-$vm.log" \
    -daemonize -pidfile "$VM_RUN/$vm.pid"
}

# vm_wait_ssh VM...: until each answers ssh (prints "VM MS" per VM, the milliseconds since $VM_T0)
vm_wait_ssh() {
  local vm deadline
  deadline=$(( $(vm_now_ms) + VM_BOOT_TIMEOUT_S * 1000 ))
  for vm in "$@"; do
    until vm_exec "$vm" true 2>/dev/null; do
      vm_qemu_pid "$vm" >/dev/null || { vm_err "$vm: QEMU exited (console: $VM_RUN/console-$vm.log)"; return 1; }
      [ "$(vm_now_ms)" -lt "$deadline" ] || { vm_err "$vm does not answer ssh after ${VM_BOOT_TIMEOUT_S} s (console: $VM_RUN/console-$vm.log)"; return 1; }
      sleep 2
    done
    printf '%s %s\n' "$vm" "$(( $(vm_now_ms) - VM_T0 ))"
  done
}

vm_net_up() {
  ip netns add "$VM_NS"
  ip -n "$VM_NS" link set lo up
  ip netns exec "$VM_NS" sysctl -q -w net.ipv4.ip_forward=0 net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  local br
  for br in br-m br-f br-c; do
    ip -n "$VM_NS" link add "$br" type bridge forward_delay 0 stp_state 0 mcast_snooping 0
  done
  ip -n "$VM_NS" link set br-f mtu 1600
  ip netns exec "$VM_NS" sh -c '[ ! -d /proc/sys/net/bridge ] || sysctl -q -w net.bridge.bridge-nf-call-iptables=0 net.bridge.bridge-nf-call-ip6tables=0 net.bridge.bridge-nf-call-arptables=0'
  ip -n "$VM_NS" addr add 198.19.0.1/24 dev br-m
  local vm role fab cli
  for vm in $(vm_names); do
    role=$(vm_role "$vm") fab=$(vm_field "$vm" 4) cli=$(vm_field "$vm" 5)
    _vm_tap "$vm-m" br-m 1500
    [ "$fab" = - ] || _vm_tap "$vm-f" br-f 1600
    [ "$cli" = - ] || _vm_tap "$vm-c" br-c 1500
  done
  for br in br-m br-f br-c; do ip -n "$VM_NS" link set "$br" up; done
}
_vm_tap() { ip -n "$VM_NS" tuntap add dev "$1" mode tap && ip -n "$VM_NS" link set "$1" mtu "$3" master "$2" up; }

# vm_install VM: slbx set up in VM the way docs/deploy.md says (the package itself is in the image:
# scripts/vm/build-image.sh installs it with npm install -g in a chroot of the VM's root)
vm_install() {
  local vm=$1 role
  role=$(vm_role "$vm")
  case $role in
    router)
      vm_exec router "cat >/etc/bird/bird.conf" <"$VM_RUN/bird.conf"
      vm_exec router 'systemctl enable --now bird >/dev/null 2>&1' ;;
    client) : ;;
    *)
      vm_exec "$vm" 'systemd-sysusers /usr/lib/node_modules/slbx/packaging/sysusers.d-slbx.conf >/dev/null 2>&1 && install -d -m 755 /etc/slbx'
      vm_exec "$vm" 'umask 077; cat >/etc/slbx/api-token' <"$VM_RUN/api-token"
      vm_exec "$vm" 'cat >/etc/slbx/slbx.yaml' <"$VM_CONFIG_SRC"
      case $role in
        controller)
          vm_exec "$vm" 'echo "SLBX_LISTEN=127.0.0.1:8480 198.18.0.5:8480" >/etc/slbx/controller.env && systemctl enable --now slbx-controller >/dev/null 2>&1' ;;
        mux)
          vm_exec "$vm" "echo SLBX_CONTROLLER=http://198.18.0.5:8480 >/etc/slbx/mux.env && systemctl enable --now slbx-mux@$vm >/dev/null 2>&1" ;;
        host)
          local n
          for n in $(vm_nics_of "$vm" | awk '{print $1}'); do vm_exec "$vm" "systemctl enable --now slbx-vm-backend@$n >/dev/null 2>&1"; done
          vm_exec "$vm" "echo SLBX_CONTROLLER=http://198.18.0.5:8480 >/etc/slbx/host-agent.env && systemctl enable --now slbx-host-agent@$vm >/dev/null 2>&1" ;;
      esac ;;
  esac
}

# vm_router_nexthops: the router's next hops for the VIP, one per line (empty: no route)
vm_router_nexthops() {
  vm_exec router "ip -4 route show $VIP/32" | grep -o 'via [0-9.]*' | awk '{print $2}' | sort
}

# vm_wait_nexthops N S: until the router routes the VIP over N MUXes, up to S seconds
vm_wait_nexthops() {
  local want=$1 deadline=$(( $(vm_now_ms) + $2 * 1000 ))
  until [ "$(vm_router_nexthops | wc -l)" = "$want" ]; do
    [ "$(vm_now_ms)" -lt "$deadline" ] || { vm_err "the router does not route $VIP over $want MUXes after $2 s (now: $(vm_router_nexthops | tr '\n' ' '))"; return 1; }
    sleep 0.5
  done
}

vm_up() {
  vm_paths
  if ip netns list | grep -qw "^$VM_NS"; then vm_err "lab $VM_NAME is up (namespace $VM_NS): scripts/vm-lab.sh down --name $VM_NAME first"; return 1; fi
  command -v qemu-system-x86_64 >/dev/null || { vm_err "QEMU is missing: apt-get install -y qemu-system-x86 qemu-utils"; return 1; }
  local img vm t
  img=$(bash "$SLBX_ROOT/scripts/vm/build-image.sh" ${VM_TARBALL:+--tarball "$VM_TARBALL"}) || return 1
  mkdir -p "$VM_RUN" "$VM_DISKS"
  rm -f "$VM_RUN"/*.pid "$VM_RUN"/console-*.log
  node "$SLBX_ROOT/dist/scripts/lab/bird-conf.js" --config "$VM_CONFIG_SRC" >"$VM_RUN/bird.conf"
  sed -i 's/^log stderr all;/log syslog all;/' "$VM_RUN/bird.conf"
  [ -f "$VM_RUN/api-token" ] || (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$VM_RUN/api-token"; echo >>"$VM_RUN/api-token")
  vm_net_up
  VM_T0=$(vm_now_ms)
  for vm in $(vm_names); do
    rm -f "$VM_DISKS/$vm.qcow2"
    qemu-img create -q -f qcow2 -F raw -b "$img" "$VM_DISKS/$vm.qcow2"
    vm_seed "$vm"
    vm_start_qemu "$vm" || { vm_err "QEMU for $vm did not start"; return 1; }
  done
  vm_log "7 VMs started ($VM_MEM_MB MiB each, TCG); waiting for ssh"
  vm_wait_ssh $(vm_names) >"$VM_RUN/boot-ms.txt" || return 1
  vm_log "booted (ms to ssh): $(tr '\n' ' ' <"$VM_RUN/boot-ms.txt")"
  for vm in router controller mux1 mux2 host1 host2; do vm_install "$vm" || { vm_err "installing slbx on $vm failed"; return 1; }; done
  vm_wait_nexthops 2 "$VM_BOOT_TIMEOUT_S" || return 1
  # and every MUX and host agent applied the controller's current generation (slbctl wait: at most 120 s a call)
  local deadline=$(( $(vm_now_ms) + VM_BOOT_TIMEOUT_S * 1000 ))
  until vm_exec controller 'slbctl wait --wait-s 120 >/dev/null'; do
    [ "$(vm_now_ms)" -lt "$deadline" ] || { vm_err "not every agent applied the controller's generation: $(vm_exec controller 'slbctl agents')"; return 1; }
  done
  t=$(( $(vm_now_ms) - VM_T0 ))
  echo "$t" >"$VM_RUN/ready-ms.txt"
  vm_log "ready: every agent applied the policy and the router routes $VIP over both MUXes, $t ms after the QEMUs started"
}

vm_down() {
  vm_paths
  local vm pid
  for vm in $(vm_names); do
    [ -S "$VM_RUN/ssh-$(vm_mgmt "$vm")" ] && ip netns exec "$VM_NS" ssh -o "ControlPath=$VM_RUN/ssh-$(vm_mgmt "$vm")" -O exit x 2>/dev/null
    if pid=$(vm_qemu_pid "$vm"); then kill -9 "$pid" 2>/dev/null || true; fi
    rm -f "$VM_RUN/$vm.pid"
  done
  if ip netns list | grep -qw "^$VM_NS"; then ip netns del "$VM_NS"; fi
  rm -rf "$VM_DISKS"
  vm_log "lab $VM_NAME down (logs: $VM_RUN)"
}

vm_status() {
  vm_paths
  ip netns list | grep -qw "^$VM_NS" || { echo "lab $VM_NAME is down"; return 0; }
  local vm pid
  for vm in $(vm_names); do
    pid=$(vm_qemu_pid "$vm") || pid=-
    printf '%-10s qemu %-8s %-12s ' "$vm" "$pid" "$(vm_mgmt "$vm")"
    if [ "$pid" != - ] && vm_exec "$vm" true 2>/dev/null; then
      vm_exec "$vm" 'systemctl list-units --no-legend --plain "slbx-*" bird.service 2>/dev/null | awk "{printf \"%s:%s \", \$1, \$4}"; echo'
    else echo 'no ssh'; fi
  done
  echo "router: $VIP via $(vm_router_nexthops 2>/dev/null | tr '\n' ' ')"
}
