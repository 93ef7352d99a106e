#!/usr/bin/env bash
# The VM lab's checks (scripts/vm-lab.sh test runs them between up and down; alone: on a lab that is up).
#   1. north-south: 1,000 HTTP requests from client1's VM to the VIP, a new connection each, with
#      captures on the VMs' interfaces (client1, each MUX's and host's fabric interface, each backend's
#      eth0 in its namespace), verified by the namespace scenarios' verifier (verify.js north-south)
#   2. a MUX powered off: long-lived keep-alive connections open, kill -9 of mux1's QEMU; the router
#      drops its next hop (BGP hold timer), and every connection is answered again, by one backend all
#      along, none reset (the client's account); failover time = the longest wait of any connection
#   3. mux1 powered on again, then mux2 rebooted (systemctl reboot: its MUX withdraws by BGP first):
#      each comes back into the ECMP route by its own units; requests sent through the reboot all succeed
# Numbers (boot to ready, request success, failover, back-in-route times) go to runs/vm-lab/NAME/results.txt.
#   usage: scripts/vm/test.sh [--name N]
set -euo pipefail
SLBX_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export SLBX_ROOT
while [ $# -gt 0 ]; do
  case "$1" in
    --name) VM_NAME=${2:?}; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
source "$SLBX_ROOT/scripts/vm/lib.sh"
exec </dev/null # ssh reads stdin: none of the commands below takes input
vm_paths
REQUESTS=${REQUESTS:-1000}
CONNS=${CONNS:-40}
RES=$VM_RUN/results.txt
: >"$RES"
fails=0
verdict() { # verdict OK|FAIL TEXT
  printf '%s %s\n' "$1" "$2" | tee -a "$RES" >&2
  [ "$1" = OK ] || fails=$((fails + 1))
}
number() { printf 'NUMBER %s\n' "$*" | tee -a "$RES" >&2; }
CLIENT_JS=/usr/lib/node_modules/slbx/dist/scripts/lab/client.js  # npm's global root in the image (npm root -g takes seconds under TCG)

[ -f "$VM_RUN/boot-ms.txt" ] && number "boot to ssh (ms since the QEMUs started, 7 VMs at once): $(tr '\n' ' ' <"$VM_RUN/boot-ms.txt")"
[ -f "$VM_RUN/ready-ms.txt" ] && number "boot to ready (slbx installed and enabled, the router routing the VIP over both MUXes): $(cat "$VM_RUN/ready-ms.txt") ms"

# --- captures: NODE VM IFACE [NETNS]
CAPS='client1 client1 eth1 -
mux1 mux1 eth1 -
mux2 mux2 eth1 -
host1 host1 eth1 -
host2 host2 eth1 -
h1vm1 host1 eth0 h1vm1
h2vm1 host2 eth0 h2vm1'
cap_start() {
  local node vm ifc ns pre
  while read -r node vm ifc ns; do
    pre=''; [ "$ns" = - ] || pre="ip netns exec $ns"
    vm_exec "$vm" "rm -f /root/$node.pcap; $pre nohup tcpdump -i $ifc -U -B 16384 -s 0 -w /root/$node.pcap 'not tcp port 22' >/root/$node.tcpdump.log 2>&1 & echo \$! >/root/$node.tcpdump.pid" </dev/null
  done <<<"$CAPS"
  # tcpdump says "listening on" once its capture is open
  for _ in $(seq 1 120); do
    local all=1
    while read -r node vm _; do vm_exec "$vm" "grep -q 'listening on' /root/$node.tcpdump.log" </dev/null || all=0; done <<<"$CAPS"
    [ "$all" = 1 ] && return 0
    sleep 1
  done
  vm_err "a capture did not start"; return 1
}
# cap_stop DIR: stops every capture, copies the pcaps to DIR/pcaps/NODE.pcap; a capture that lost packets fails
cap_stop() {
  local dir=$1 node vm lost
  mkdir -p "$dir/pcaps"
  while read -r node vm _; do
    vm_exec "$vm" "kill -INT \$(cat /root/$node.tcpdump.pid); while kill -0 \$(cat /root/$node.tcpdump.pid) 2>/dev/null; do sleep 0.2; done" </dev/null
    vm_copy_from "$vm" "/root/$node.pcap" "$dir/pcaps/$node.pcap" </dev/null
    vm_copy_from "$vm" "/root/$node.tcpdump.log" "$dir/pcaps/$node.tcpdump.log" </dev/null
    lost=$(awk '/dropped by kernel/ {print $1}' "$dir/pcaps/$node.tcpdump.log")
    if [ "${lost:-x}" = 0 ]; then verdict OK "capture $node ($vm $(awk '/packets captured/ {print $1}' "$dir/pcaps/$node.tcpdump.log") packets): none dropped by the kernel"
    else verdict FAIL "capture $node on $vm dropped ${lost:-?} packets (its pcap is incomplete)"; fi
  done <<<"$CAPS"
}

# ---------------------------------------------------------------------------------------------
# 1. north-south
NS=$VM_RUN/north-south
rm -rf "$NS" && mkdir -p "$NS"
cp "$VM_CONFIG_SRC" "$NS/config.yaml"
cap_start
t0=$(vm_now_ms)
crc=0
vm_exec client1 "node $CLIENT_JS http --url http://$VIP/ --count $REQUESTS --concurrency 8 --timeout-ms 30000 --json /root/client-http.json >/root/client-http.out 2>&1" || crc=$?
t1=$(vm_now_ms)
sleep 1
cap_stop "$NS"
vm_copy_from client1 /root/client-http.json "$NS/client-http.json"
vm_copy_from client1 /root/client-http.out "$NS/client-http.out"
ok=$(node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")); console.log(j.records.filter(r=>r.ok).length)' "$NS/client-http.json")
number "north-south: $ok of $REQUESTS requests succeeded in $((t1 - t0)) ms (client exit $crc)"
if node --enable-source-maps "$SLBX_ROOT/dist/scripts/scenarios/lib/verify.js" north-south --run "$NS" --vip "$VIP" --port 80 \
  --requests "$REQUESTS" --client-json "$NS/client-http.json" >"$NS/verify.txt" 2>&1; then
  verdict OK "north-south verifier on the VMs' captures: $(tail -n 1 "$NS/verify.txt") ($NS/verify.txt)"
else
  verdict FAIL "north-south verifier (see $NS/verify.txt): $(grep -i 'fail' "$NS/verify.txt" | head -3 | tr '\n' ' ')"
fi

# ---------------------------------------------------------------------------------------------
# 2. mux1 powered off (kill -9 of its QEMU) under long-lived connections
PO=$VM_RUN/power-off
rm -rf "$PO" && mkdir -p "$PO"
segs_in() { vm_exec client1 "ss -Htni state established '( dport = :80 )' dst $VIP" | grep -o 'data_segs_in:[0-9]*' | cut -d: -f2; }
wait_answered() { # wait_answered MIN_SEGS N_CONNS S: until N_CONNS connections each received MIN_SEGS data segments
  local want=$1 n=$2 deadline=$(( $(vm_now_ms) + $3 * 1000 ))
  until [ "$(segs_in | awk -v k="$want" '$1 >= k { c++ } END { print c + 0 }')" -ge "$n" ]; do
    [ "$(vm_now_ms)" -lt "$deadline" ] || return 1
    sleep 1
  done
}
vm_exec client1 "rm -f /root/hold.end; nohup node $CLIENT_JS hold --url http://$VIP/ --connections $CONNS --duration-ms 900000 --end-file /root/hold.end --interval-ms 1000 --timeout-ms 120000 --json /root/hold.json >/root/hold.out 2>&1 & echo \$! >/root/hold.pid"
if wait_answered 3 "$CONNS" 300; then verdict OK "$CONNS long-lived connections open and answered"; else verdict FAIL "the $CONNS connections were not all answered within 300 s"; fi
# which of the connections mux1 carries (its flow table against the client's source ports): the power-off
# must hit some, or it proves nothing
vm_exec client1 "ss -Htn state established '( dport = :80 )' dst $VIP" | awk '{print $3}' | sed 's/.*://' | sort -u >"$PO/client-ports.txt"
vm_exec mux1 'curl -s "127.0.0.1:9180/flows?limit=1000000"' | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => { for (const f of JSON.parse(s)) console.log(f.src.split(":").pop()); });
' | sort -u >"$PO/mux1-ports.txt"
on_victim=$(comm -12 "$PO/client-ports.txt" "$PO/mux1-ports.txt" | wc -l)
if [ "$on_victim" -ge 1 ]; then verdict OK "$on_victim of the $CONNS connections go through mux1 (its flow table)"
else verdict FAIL "none of the $CONNS connections goes through mux1 (the power-off would prove nothing)"; fi
base=$(segs_in | sort -n | tail -n 1)
vm_router_nexthops >"$PO/hops-before.txt"
tk=$(vm_now_ms)
kill -9 "$(vm_qemu_pid mux1)"
rm -f "$VM_RUN/mux1.pid"
until ! vm_router_nexthops | grep -qx 198.18.0.11; do
  [ $(( $(vm_now_ms) - tk )) -lt 120000 ] || break
  sleep 0.5
done
td=$(vm_now_ms)
vm_router_nexthops >"$PO/hops-after.txt"
if grep -qx 198.18.0.11 "$PO/hops-after.txt"; then verdict FAIL "the router still routes $VIP over mux1 120 s after its power-off"
else
  verdict OK "the router dropped mux1 (next hops now: $(tr '\n' ' ' <"$PO/hops-after.txt"))"
  number "power-off to route withdrawn at the router: $((td - tk)) ms (BGP hold time 9 s, polled over ssh every ~0.5-1 s)"
fi
# every connection answered at least twice more than any had at the kill
if wait_answered $((base + 2)) "$CONNS" 300; then verdict OK "every connection answered twice after the power-off"; else verdict FAIL "not every connection was answered after the power-off (300 s)"; fi
vm_exec client1 "touch /root/hold.end; while kill -0 \$(cat /root/hold.pid) 2>/dev/null; do sleep 0.5; done"
vm_copy_from client1 /root/hold.json "$PO/hold.json"
vm_copy_from client1 /root/hold.out "$PO/hold.out"
node -e '
  const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const r = j.records;
  const bad = r.filter((x) => x.error || (x.backends ?? []).length !== 1);
  const wait = Math.max(...r.map((x) => x.maxGapMs));
  console.log(JSON.stringify({ n: r.length, bad: bad.length, wait, sample: bad[0] ?? r[0] }));
' "$PO/hold.json" >"$PO/summary.json"
read -r n bad wait < <(node -e 'const s=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log(s.n,s.bad,s.wait)' "$PO/summary.json")
if [ "$n" = "$CONNS" ] && [ "$bad" = 0 ]; then verdict OK "all $n connections completed, none reset, each on one backend all along"
else verdict FAIL "connections: $n of $CONNS recorded, $bad with an error or more than one backend ($PO/summary.json)"; fi
number "failover as the client saw it: the longest wait for an answer on any connection $wait ms"

# ---------------------------------------------------------------------------------------------
# 3. mux1 powered on again; mux2 rebooted under a stream of requests
tp=$(vm_now_ms)
VM_T0=$tp
vm_start_qemu mux1
vm_wait_ssh mux1 >/dev/null
if vm_wait_nexthops 2 600; then
  verdict OK "mux1 powered on: its units brought it back into the ECMP route"
  number "mux1 power-on to back in the route: $(( $(vm_now_ms) - tp )) ms"
else verdict FAIL "mux1 did not come back into the route after its power-on"; fi
RB=$VM_RUN/reboot
rm -rf "$RB" && mkdir -p "$RB"
vm_exec client1 "rm -f /root/stream.end; nohup node $CLIENT_JS http --url http://$VIP/ --count 100000 --concurrency 2 --rate 5 --timeout-ms 60000 --end-file /root/stream.end --json /root/stream.json >/root/stream.out 2>&1 & echo \$! >/root/stream.pid"
sleep 5
boot_id=$(vm_exec mux2 'cat /proc/sys/kernel/random/boot_id')
tr0=$(vm_now_ms)
vm_exec mux2 'systemctl reboot' || true
# the withdraw first (its MUX stops on SIGTERM), then back
until ! vm_router_nexthops | grep -qx 198.18.0.12; do [ $(( $(vm_now_ms) - tr0 )) -lt 120000 ] || break; sleep 0.5; done
tw=$(vm_now_ms)
until vm_exec mux2 true 2>/dev/null && [ "$(vm_exec mux2 'cat /proc/sys/kernel/random/boot_id')" != "$boot_id" ]; do
  [ $(( $(vm_now_ms) - tr0 )) -lt 600000 ] || break; sleep 2
done
if vm_wait_nexthops 2 600; then
  tb=$(vm_now_ms)
  verdict OK "mux2 rebooted (new boot id) and its units brought it back into the ECMP route"
  number "mux2 reboot: withdrawn after $((tw - tr0)) ms, back in the route after $((tb - tr0)) ms"
else verdict FAIL "mux2 did not come back into the route after its reboot"; fi
sleep 10 # requests through both MUXes again before the stream ends
vm_exec client1 "touch /root/stream.end; while kill -0 \$(cat /root/stream.pid) 2>/dev/null; do sleep 0.5; done"
vm_copy_from client1 /root/stream.json "$RB/stream.json"
read -r total okn < <(node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log(j.records.length,j.records.filter(r=>r.ok).length)' "$RB/stream.json")
if [ "$total" -gt 0 ] && [ "$total" = "$okn" ]; then verdict OK "all $total requests sent through mux2's reboot succeeded"
else verdict FAIL "requests through mux2's reboot: $okn of $total succeeded"; fi
vm_exec mux2 "systemctl is-active slbx-mux@mux2 && journalctl -b -u slbx-mux@mux2 --no-pager | head -5" >"$RB/mux2-journal.txt" 2>&1 || true

echo "---" >>"$RES"
if [ "$fails" = 0 ]; then echo "PASS: every verdict holds" | tee -a "$RES"; exit 0; fi
echo "FAIL: $fails verdict(s) failed" | tee -a "$RES"
exit 1
