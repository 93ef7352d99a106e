#!/usr/bin/env bash
# 22-vip-api: VIPs created and deleted through the controller's API answer, under traffic. The default
# lab delegates 203.0.113.0/24 and 2001:db8:ff::/48 to the load balancer (vipRanges), and its router
# accepts host routes inside them from the MUXes. While HTTP traffic runs to the existing VIPs
# (203.0.113.10 and 2001:db8:ff::10, paced, and ended by the scenario after the last change, so it spans
# every change by construction; the verifier checks that it did) and a poller asks each new VIP 25 times
# a second (ended likewise):
#   * first (before the traffic), slbctl vip add for 198.51.100.200 and 2001:db8:fe::20 (outside the
#     ranges) is refused, naming the ranges, and changes nothing;
#   * 203.0.113.20, then 2001:db8:ff::20 are created (slbctl vip add ... --wait, as a user would after
#     freeing backend port 8000 with slbctl rule del 203.0.113.10 web-alt): each is routed over both
#     MUXes and answers from the pool's backends; then deleted (slbctl vip del --wait): the route is
#     withdrawn and SYNs sent afterwards get no answer;
#   * the existing VIPs' traffic has zero failed requests.
# Measured, from the client's capture and the router's polled kernel route (printed, not asserted): the
# time from the API call to the route and to the first answer, and from the delete to the withdrawal and
# to the last answer. Each step waits for evidence, not for time: nft counters in client1 count its SYNs
# to each new VIP and the SYN-ACKs from it, so the scenario creates a VIP once 5 SYNs to it went
# unanswered, deletes it once it answered 10, and moves on once 6 SYNs left after the router's route
# (as the polls the verifier reads show it) was gone: what the verifier requires, by construction.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
source scripts/scenarios/lib/bgp.sh
NEW_VIPS=(203.0.113.20 2001:db8:ff::20)
OUTSIDE=(198.51.100.200 2001:db8:fe::20)
MAX_S=600   # the most the traffic and the pollers run; the scenario ends them (--end-file) after the last change
EVIDENCE_S=${EVIDENCE_S:-60}
lab_setup_scenario sc22
bgp_scenario_traps
lab_up
for n in h1vm1 h1vm2 h2vm1 h2vm2; do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 20; done
hc_wait_mux_candidates web/http80 h1vm1,h1vm2,h2vm1,h2vm2 20 >/dev/null
rc=0
times=$LAB_DIR/times.txt
: >"$times"
generation() { lab_slbctl --json state | node -e 'let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>console.log(JSON.parse(s).generation))'; }
url() { if [[ $1 == *:* ]]; then printf 'http://[%s]/' "$1"; else printf 'http://%s/' "$1"; fi; }

# backend port 8000 serves 203.0.113.10:8080 (web-alt); direct server return lets it serve one frontend
lab_slbctl rule del 203.0.113.10 web-alt --wait >"$LAB_DIR/rule-del.txt" || rc=1

# outside the ranges: refused, nothing changes
for i in "${!OUTSIDE[@]}"; do
  before=$(generation) st=0
  f=$LAB_DIR/refused-$((i + 1)).txt
  echo "\$ slbctl vip add ${OUTSIDE[$i]} --protocol tcp --frontend-port 80 --backend-port 8001 --pool web" >"$f"
  lab_slbctl vip add "${OUTSIDE[$i]}" --protocol tcp --frontend-port 80 --backend-port 8001 --pool web >>"$f" 2>&1 || st=$?
  echo "refused $((i + 1)) $st $before $(generation)" >>"$times"
  sed -n 2,3p "$f"
done

lab_capture_start client1 eth0 client1 tcp port 80 and \( host "${NEW_VIPS[0]}" or host "${NEW_VIPS[1]}" \) >/dev/null
# client1 counts its SYNs to each new VIP (synN) and the SYN-ACKs from it (synackN), and the SYN-ACKs from the
# existing VIPs (existing4, existing6): the evidence each step waits for
{
  echo 'table inet sc22 {'
  for i in "${!NEW_VIPS[@]}"; do echo "  counter syn$((i + 1)) {}"; echo "  counter synack$((i + 1)) {}"; done
  echo '  counter existing4 {}'; echo '  counter existing6 {}'
  echo '  chain out { type filter hook output priority 0; policy accept;'
  for i in "${!NEW_VIPS[@]}"; do fam=ip; [[ ${NEW_VIPS[$i]} == *:* ]] && fam=ip6
    echo "    $fam daddr ${NEW_VIPS[$i]} tcp dport 80 tcp flags & (syn | ack) == syn counter name syn$((i + 1))"; done
  echo '  }'
  echo '  chain in { type filter hook input priority 0; policy accept;'
  for i in "${!NEW_VIPS[@]}"; do fam=ip; [[ ${NEW_VIPS[$i]} == *:* ]] && fam=ip6
    echo "    $fam saddr ${NEW_VIPS[$i]} tcp sport 80 tcp flags & (syn | ack) == (syn | ack) counter name synack$((i + 1))"; done
  echo '    ip saddr 203.0.113.10 tcp sport 80 tcp flags & (syn | ack) == (syn | ack) counter name existing4'
  echo '    ip6 saddr 2001:db8:ff::10 tcp sport 80 tcp flags & (syn | ack) == (syn | ack) counter name existing6'
  echo '  }'
  echo '}'
} >"$LAB_DIR/client1-counters.nft"
lab_exec client1 nft -f "$LAB_DIR/client1-counters.nft"
count() { lab_exec client1 nft list counter inet sc22 "$1" | sed -n 's/.*packets \([0-9]*\).*/\1/p'; }
# at_least COUNTER N: client1's counter reached N
at_least() { local v; v=$(count "$1") && [ -n "$v" ] && [ "$v" -ge "$2" ]; }
# withdrawn N SINCE_US: the route polls of new VIP N (the verifier's) hold a read without a route after SINCE_US
withdrawn() { awk -v t="$2" '$1 >= t && NF == 1 { f = 1 } END { exit !f }' "$LAB_DIR/routes-$1.txt"; }
for i in "${!NEW_VIPS[@]}"; do bgp_poll_start "${NEW_VIPS[$i]}" "$LAB_DIR/routes-$((i + 1)).txt"; done

traffic_start=$(bgp_now_us)
sc_client client1 http --url "$(url 203.0.113.10)" --count $((MAX_S * 40)) --rate 40 --concurrency 16 --timeout-ms 5000 \
  --end-file "$LAB_DIR/traffic-end" --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/existing-4.json" >"$LAB_DIR/existing-4.out" 2>&1 &
existing4=$!
sc_client client1 http --url "$(url 2001:db8:ff::10)" --count $((MAX_S * 20)) --rate 20 --concurrency 16 --timeout-ms 5000 \
  --end-file "$LAB_DIR/traffic-end" --json "$LAB_DIR/existing-6.json" >"$LAB_DIR/existing-6.out" 2>&1 &
existing6=$!
pollers=()
for i in "${!NEW_VIPS[@]}"; do
  sc_client client1 http --url "$(url "${NEW_VIPS[$i]}")" --count $((MAX_S * 25)) --rate 25 --concurrency 64 --timeout-ms 1000 \
    --end-file "$LAB_DIR/traffic-end" --json "$LAB_DIR/poll-$((i + 1)).json" >"$LAB_DIR/poll-$((i + 1)).out" 2>&1 &
  pollers+=($!)
done
# each new VIP: asked in vain (5 SYNs unanswered: no route yet), created, answering (10 SYN-ACKs), deleted,
# silent (6 SYNs after the polls saw the route gone)
for i in "${!NEW_VIPS[@]}"; do
  vip=${NEW_VIPS[$i]} n=$((i + 1))
  sc_wait_for "5 SYNs from client1 to $vip" "$EVIDENCE_S" at_least "syn$n" 5 || rc=1
  add_us=$(bgp_now_us)
  lab_slbctl --json vip add "$vip" --protocol tcp --frontend-port 80 --backend-port 8000 --pool web --wait >"$LAB_DIR/add-$n.json" || rc=1
  added_us=$(bgp_now_us)
  bgp_wait_hops "$vip" 2 10 || rc=1
  printf '[sc22] %s created: slbctl --wait returned after %d ms, routed over both MUXes after %d ms\n' "$vip" $(( (added_us - add_us) / 1000 )) $(( ($(bgp_now_us) - add_us) / 1000 ))
  sc_wait_for "10 SYN-ACKs from $vip at client1" "$EVIDENCE_S" at_least "synack$n" 10 || rc=1
  del_us=$(bgp_now_us)
  lab_slbctl --json vip del "$vip" --wait >"$LAB_DIR/del-$n.json" || rc=1
  deleted_us=$(bgp_now_us)
  bgp_wait_hops "$vip" 0 10 || rc=1
  printf '[sc22] %s deleted: slbctl --wait returned after %d ms, route withdrawn after %d ms\n' "$vip" $(( (deleted_us - del_us) / 1000 )) $(( ($(bgp_now_us) - del_us) / 1000 ))
  sc_wait_for "a read of the router's route to $vip without it (routes-$n.txt)" "$EVIDENCE_S" withdrawn "$n" "$del_us" || rc=1
  syns=$(count "syn$n")
  sc_wait_for "6 SYNs from client1 to $vip after the withdrawal" "$EVIDENCE_S" at_least "syn$n" $((syns + 6)) || rc=1
  echo "vip $n $vip $add_us $added_us $del_us $deleted_us" >>"$times"
done

# the existing VIPs' traffic ends after the last change, once each has answered 150 connections (the
# verifier wants at least 100 records of each: a fast machine can be through the changes sooner)
sc_wait_for "150 connections answered by each existing VIP" "$EVIDENCE_S" eval 'at_least existing4 150 && at_least existing6 150' || rc=1
# the pollers fail by design (no VIP before and after): their records are checked, not their status
touch "$LAB_DIR/traffic-end"
for p in "${pollers[@]}"; do wait "$p" || true; done
st4=0 st6=0
wait "$existing4" || st4=$?
wait "$existing6" || st6=$?
echo "traffic $traffic_start $(bgp_now_us)" >>"$times"
cat "$LAB_DIR/existing-4.out" "$LAB_DIR/existing-6.out"
bgp_poll_stop
lab_birdc show route all >"$LAB_DIR/bird-routes-end.txt" || rc=1
lab_capture_stop_all || rc=1

sc_verify vip-api --run "$LAB_DIR" --vips "$(IFS=,; echo "${NEW_VIPS[*]}")" --refused "${#OUTSIDE[@]}" \
  --existing "$LAB_DIR/existing-4.json,$LAB_DIR/existing-6.json" --existing-status "$st4,$st6" || rc=1
exit "$rc"
