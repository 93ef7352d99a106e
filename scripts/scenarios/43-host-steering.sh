#!/usr/bin/env bash
# 43-host-steering: the host agent's worker steering (host-agent/worker-steering.ts, issue 19) on live
# traffic, in the lab with --workers 2 on every MUX and every host agent (--io ring, as scenario 42). On
# each host, scripts/lab/steering-observer.ts joins 2 ring sockets per interface to PACKET_FANOUT_CBPF
# groups of its own with the steering programs, on the fabric interface and on each VM port, and counts
# (copies of) the frames per socket, decoded with slbx's codecs.
#   1. Scenario 01's traffic and its verifier, unchanged: 1,000 HTTP requests, every packet followed
#      through the captures (MUX in, VXLAN out byte for byte, backend, direct server return).
#   2. On each host, per client connection (the client's address and port): the VXLAN that brought it
#      and the backend's replies on the port were on ONE of the 2 sockets, every frame; both sockets got
#      connections; the connections that came in were seen leaving too.
#   3. What steers by more than its first header (scripts/scenarios/lib/host-steering-icmp.ts): 64 UDP
#      datagrams to a new VIP rule whose backend port nothing listens on: every backend's ICMP port
#      unreachable reaches the client from the VIP, quote translated (tshark); 64 IPv6 UDP echo flows, then
#      per flow a reply again from its backend with a destination options header before UDP: every one
#      reaches the client from the VIP (tshark). The host agents' counters: one icmp_errors_out per
#      datagram, no drop_out_dsr_unsolicited (what a packet on a worker without its flow gets).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
VIP=203.0.113.10
LAB_DAEMON_IO=ring
LAB_MUX_WORKERS=2
LAB_HOST_WORKERS=2
ICMP_VIP=203.0.113.61   # part 3: a VIP whose UDP rule's backend port (9, discard) nothing listens on
VIP6=2001:db8:ff::10
FLOWS=64
lab_setup_scenario sc43
# part 3 replies to UDP flows again after the echo run: a UDP flow lives 600 s here (default 30 s), so
# that a loaded machine's slow steps in between cannot expire them
cfg=$(_lab_dir_of "$LAB_NAME").cfg/lab-udp-idle.yaml
mkdir -p "$(dirname "$cfg")"
lab_derive_config --config examples/lab.yaml --udp-idle-timeout-s 600 --out "$cfg" >/dev/null || { echo "FAIL could not derive the config"; exit 1; }
SC43_PIDS=()
_sc43_exit() {
  local rc=$? p
  for p in "${SC43_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  set +e
  (exit "$rc")
  _lab_scenario_exit
}
trap _sc43_exit EXIT
lab_up --config "$cfg"
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

echo "--- 3. ICMP errors and IPv6 extension headers through host agents with 2 workers"
HI=("${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/host-steering-icmp.js")
P3=$LAB_DIR/part3
mkdir -p "$P3"
declare -A hgen0
for h in $hosts; do hgen0[$h]=$(sc_status_field "$h" generation) || rc=1; done
lab_slbctl vip add $ICMP_VIP --protocol udp --frontend-port 9 --backend-port 9 --pool web --wait >/dev/null || rc=1
# the new rule is a new generation for every host agent: wait until every worker has it
hosts_have_rule() {
  local h
  for h in $hosts; do
    lab_daemon_status "$h" | node -e 'const s = JSON.parse(require("fs").readFileSync(0, "utf8"));
      process.exit((s.workers ?? []).length === 2 && s.generation > Number(process.argv[1]) &&
        s.workers.every((w) => w.alive && w.generation === s.generation) ? 0 : 1)' "${hgen0[$h]:-0}" || return 1
  done
}
sc_wait_for "every host agent worker at the generation with $ICMP_VIP" 60 hosts_have_rule || rc=1
nics=$(lab_nodes nic)
# the backends' kernels send one port unreachable per datagram (no rate limit for the test)
for n in $nics; do lab_exec "$n" sysctl -qw net.ipv4.icmp_ratelimit=0 net.ipv6.icmp.ratelimit=0 || rc=1; done
for h in $hosts; do sc_counters "$h" "$P3/counters-$h-before.json" || rc=1; done
lab_capture_start client1 eth0 client1-part3 icmp or ip6 >/dev/null
# no echo comes back (no listener): the client's exit status is not the verdict, the capture is
sc_client client1 udp --target $ICMP_VIP:9 --flows $FLOWS --sources 198.51.100.10-198.51.100.41 --distinct-ports \
  --concurrency 8 --timeout-ms 300 --json "$P3/icmp.json" >"$P3/icmp.out" 2>&1 || true
# the answered flows are replied to again below (the verifier wants 3/4 of them answered: a loaded machine loses a few)
sc_client client1 udp --target "[$VIP6]:7" --flows $FLOWS --sources 2001:db8:c::10-2001:db8:c::2f --distinct-ports \
  --concurrency 8 --timeout-ms 3000 --json "$P3/udp6.json" >"$P3/udp6.out" 2>&1 || tail -n 2 "$P3/udp6.out"
macs=()
for n in $nics; do
  read -r _ _ h port _ < <(_lab_plan_line nic "$n")   # plan.txt: nic NAME HOST PORT ...
  macs+=("$n=$(lab_exec "$h" cat "/sys/class/net/$port/address")")
done
"${HI[@]}" gen --config "$LAB_DIR/config.yaml" --nics "$(IFS=,; echo "${macs[*]}")" --backend-port 7 \
  --udp6-json "$P3/udp6.json" --out-dir "$P3" || rc=1
inj=()
for n in $nics; do
  lab_exec "$n" "${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/client.js" inject --interface eth0 --in "$P3/dstopts-$n.pcap" --gap-us 2000 >/dev/null &
  inj+=("$!")
done
for p in "${inj[@]}"; do wait "$p" || { echo "FAIL an inject exited $?"; rc=1; }; done
sleep 0.5   # the last replies reach the client's capture
lab_capture_stop_all
for h in $hosts; do sc_counters "$h" "$P3/counters-$h-after.json" || rc=1; done
join() { local IFS=,; echo "$*"; }
before=() after=()
for h in $hosts; do before+=("$P3/counters-$h-before.json"); after+=("$P3/counters-$h-after.json"); done
"${HI[@]}" verify --capture "$LAB_DIR/pcaps/client1-part3.pcap" --icmp-json "$P3/icmp.json" --vip4 $ICMP_VIP --port4 9 \
  --udp6-json "$P3/udp6.json" --vip6 $VIP6 --port6 7 --before "$(join "${before[@]}")" --after "$(join "${after[@]}")" || rc=1
exit "$rc"
