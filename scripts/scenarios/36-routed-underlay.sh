#!/usr/bin/env bash
# 36-routed-underlay (issue 18): MUXes in one subnet, hosts in two others, each rack behind a leaf router
# (examples/lab-routed.yaml, docs/lab.md "A routed underlay"). Shows, from captures, routes and counters:
#  1. VXLAN crosses routers: at each MUX the VXLAN to host1 leaves with outer TTL 64 toward the lab
#     router's MAC (the MUX's gateway, resolved by ARP: not host1's PA, which is on another subnet); at
#     host1's rack port it arrives with TTL 62 from leaf1's MAC (scripts/scenarios/lib/routed-underlay.ts,
#     slbx's codecs and tshark);
#  2. BGP across subnets: each MUX's session is to the router's loopback 198.18.255.1 (multihop eBGP from
#     its provider address), BFD multihop (RFC 5883) is Up, BIRD has the VIP over both MUXes
#     (`birdc show route all`), the kernel one ECMP route; 2,000 requests all answered, by both racks;
#  3. SIGSTOP mux2 (a hung MUX sends neither FIN nor BFD): BIRD drops it by BFD multihop (its log's first
#     word on mux2 after the SIGSTOP), in a measured time within 3 s (BFD 100 ms x 10 and slack; hold 9 s);
#     then SIGCONT, and it rejoins the route;
#  4. kill -9 mux1 with 300 long-lived connections open: the router drops mux1's next hop within 1 s
#     (measured; polled every ~10 ms and from `ip -ts monitor route`) and every connection completes on
#     its backend (the verifier of scenario 11, scripts/scenarios/lib/bgp.ts).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/bgp.sh
CONNS=${CONNS:-300}
REQUESTS=${REQUESTS:-2000}
VIP=203.0.113.10
VICTIM=mux1
EVIDENCE_S=${EVIDENCE_S:-60}
lab_setup_scenario rt-sc36
bgp_scenario_traps
rc=0

lab_up --name "$LAB_NAME" --config examples/lab-routed.yaml
ROUTER_MAC=$(awk '$1 == "router" { print $7; exit }' "$LAB_DIR/plan.txt")
LEAF_GW=$(awk '$1 == "rack" && $2 == "leaf1" { print $4; exit }' "$LAB_DIR/plan.txt")
LEAF_MAC=$(_lab_routed_mac "$LEAF_GW")
HOST1_PA=$(_lab_plan_line host host1 | awk '{ print $3 }')
VICTIM_PA=$(_lab_plan_line mux $VICTIM | awk '{ print $3 }')
echo "router MAC $ROUTER_MAC, leaf1 $LEAF_GW $LEAF_MAC, host1 $HOST1_PA"

# --- 1 and 2: captures, BIRD's view, 2,000 requests
for m in $(lab_nodes mux); do
  lab_capture_start "$m" fab0 "vxlan-$m" udp dst port 4789 and dst host "$HOST1_PA" >/dev/null
  lab_capture_start "$m" fab0 "$m" dst host $VIP and tcp dst port 80 >/dev/null
done
lab_capture_start leaf1 host1 rack-host1 udp dst port 4789 >/dev/null
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" tcp port 80 >/dev/null; done
lab_birdc show route all for $VIP >"$LAB_DIR/bird-route.txt"
lab_birdc show protocols all >"$LAB_DIR/bird-protocols.txt"
lab_birdc show bfd sessions >"$LAB_DIR/bird-bfd.txt"
lab_exec router ip route show $VIP
sc_client client1 http --url http://$VIP/ --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/client-http.json" | tail -n 3 || rc=1

# --- 3: a hung MUX (SIGSTOP mux2) sends neither FIN nor BFD: BFD multihop (100 ms x 10), not the 9 s hold timer, drops it
HUNG=mux2
HUNG_PA=$(_lab_plan_line mux $HUNG | awk '{ print $3 }')
bgp_poll_start $VIP "$LAB_DIR/polls-hang.txt"
bgp_monitor_start "$LAB_DIR/monitor-hang.txt"
sc_wait_for "the route poller's first 5 reads" 30 eval '[ "$(wc -l <"$LAB_DIR/polls-hang.txt")" -ge 5 ]' || rc=1
pid=$(lab_mux_pid $HUNG)
bird_lines=$(wc -l <"$LAB_DIR/logs/bird.log")
t_stop=$(bgp_now_us)
kill -STOP "$pid"
echo "froze $HUNG (pid $pid) with SIGSTOP"
bgp_wait_hops $VIP 1 30 || rc=1
kill -CONT "$pid"
echo "resumed $HUNG with SIGCONT"
bgp_wait_hops $VIP 2 60 || rc=1
bgp_poll_stop
# the time is measured and judged with slack: BFD's 1 s detection plus up to 2 s of a busy machine's
# scheduling delay, a third of the 9 s hold timer it must beat; the cause is the verdict that does not
# depend on load: BIRD's first word on mux2 after the SIGSTOP is its BFD session going down
sc_verify mux-failure --kind hang --run "$LAB_DIR" --vip $VIP --port 80 --victim $HUNG --event-us "$t_stop" --polls "$LAB_DIR/polls-hang.txt" \
  --monitor "$LAB_DIR/monitor-hang.txt" --limit-ms 3000 || rc=1
first=$(awk -v from="$((bird_lines + 1))" -v re="$HUNG: (BFD session down|Error: Hold timer expired)" 'NR >= from && $0 ~ re { print; exit }' "$LAB_DIR/logs/bird.log")
if [[ $first == *"BFD session down"* ]]; then
  echo "PASS  BIRD dropped the hung $HUNG by BFD multihop, before its hold timer  ($first)"
else
  echo "FAIL  BIRD dropped the hung $HUNG by BFD multihop, before its hold timer  (${first:-no BFD or hold-timer line for $HUNG after the SIGSTOP})"
  rc=1
fi

# --- 4: long-lived connections, kill -9 mux1 (as scenario 11)
segs_in() { lab_exec client1 ss -Htni state established "( dport = :80 )" dst "$VIP" | grep -o 'data_segs_in:[0-9]*' | cut -d: -f2; }
snapshot() { segs_in | sort -n | tail -n 1; }
answered_since() { local base=$1 n=$2 min; min=$(segs_in | sort -n | head -n 1); [ -n "$min" ] && [ "$min" -ge $((base + n)) ]; }
all_answered() { [ "$(segs_in | awk -v k="$2" '$1 >= k { n++ } END { print n + 0 }')" -ge "$1" ]; }
victim_gone() { ! lab_router_nexthops $VIP | grep -qx "$VICTIM_PA"; }
bgp_poll_start $VIP "$LAB_DIR/polls.txt"
bgp_monitor_start "$LAB_DIR/monitor.txt"
t_start=$(bgp_now_us)
sc_client client1 hold --url http://$VIP/health --connections "$CONNS" --duration-ms 600000 --interval-ms 200 --timeout-ms 10000 \
  --end-file "$LAB_DIR/hold-end" --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/hold.json" >"$LAB_DIR/hold.out" 2>&1 &
client=$!
sc_wait_for "$CONNS long-lived connections established" "$EVIDENCE_S" eval '[ "$(sc_established client1 $VIP 80)" -ge "$CONNS" ]' || rc=1
sc_wait_for "each of the $CONNS connections answered 3 times (6 data segments)" "$EVIDENCE_S" all_answered "$CONNS" 6 || rc=1
pid=$(lab_mux_pid $VICTIM)
t_kill=$(bgp_now_us)
kill -KILL "$pid"
echo "$t_kill" >"$LAB_DIR/kill-us.txt"
echo "killed $VICTIM (pid $pid) with SIGKILL"
sc_wait_for "the router's route to $VIP without $VICTIM ($VICTIM_PA)" "$EVIDENCE_S" victim_gone || rc=1
s0=$(snapshot)
sc_wait_for "every open connection answered twice after the route change" "$EVIDENCE_S" answered_since "$s0" 4 || rc=1
touch "$LAB_DIR/hold-end"
client_rc=0
wait "$client" || client_rc=$?
[ "$client_rc" = 0 ] || rc=1
cat "$LAB_DIR/hold.out"
bgp_poll_stop
lab_mux_stop $VICTIM KILL 2>/dev/null || true   # marks it stopped (it is gone already)
lab_capture_stop_all || rc=1

"${SC_NODE[@]}" dist/scripts/scenarios/lib/routed-underlay.js verify --run "$LAB_DIR" --host host1 --leaf leaf1 \
  --router-mac "$ROUTER_MAC" --leaf-mac "$LEAF_MAC" --requests "$REQUESTS" || rc=1
sc_verify mux-failure --kind crash --run "$LAB_DIR" --vip $VIP --port 80 --victim $VICTIM --event-us "$t_kill" --polls "$LAB_DIR/polls.txt" \
  --limit-ms 1000 --monitor "$LAB_DIR/monitor.txt" --hold-json "$LAB_DIR/hold.json" --health-since-us "$t_start" || rc=1
exit "$rc"
