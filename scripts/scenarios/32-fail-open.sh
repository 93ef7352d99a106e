#!/usr/bin/env bash
# 32-fail-open: every backend's probe fails while every service is alive (nftables in each backend's
# namespace drops the probes, which come from the network's gateway address; the clients' traffic
# passes). A rule's allDown decides what new flows get (docs/config.md, allDown):
#   drop (the default)  new connections to 203.0.113.10:80 are refused: every MUX drops their SYNs and
#                       counts them (drop_no_backend), none reaches a backend; 203.0.113.20 (a VIP whose
#                       only rule has the probe) is withdrawn from the router;
#   spread              after `slbctl rule set ... --all-down spread --wait`, the same requests are served,
#                       each by the backend the independent oracle names for the fail-open table (every
#                       enabled backend, health ignored), the SYN captured at that backend and no other;
#                       every such new flow is counted (flow_fail_open), 203.0.113.20 is announced again;
#   spread + SYN flood  a spoofed-source SYN flood at the VIP (trafgen, paced) while new connections keep
#                       coming: every one is served, on the oracle's backend, and the probes still fail.
# Why the probes are blocked rather than starved: a flood that starves a prober on this shared 2-CPU
# machine would fail some probes and not others, at times no one can predict; the blocked port is what
# a starved prober sees, made certain, so the verdict does not depend on the machine's load. Scenario 17
# measures the flood itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
VIP=203.0.113.10
VIP2=203.0.113.20         # made here: one rule (backend port 8000, probe http80), so nothing else keeps it announced
SRC=198.51.100.10-198.51.100.41
SPOOF=198.19.0.0/16
NICS=h1vm1,h1vm2,h2vm1,h2vm2
DROP_N=${DROP_N:-40}      # new connections while the rules drop
SPREAD_N=${SPREAD_N:-200} # ... once they spread
FLOOD_N=${FLOOD_N:-150}   # ... during the flood (paced at 30/s, so they span it)
FLOOD_PPS=${FLOOD_PPS:-2000}  # paced: what the lab carries on a busy 2-CPU machine (scenario 17 finds the ceiling)
lab_setup_scenario sc32
SC32_PIDS=()
_sc32_exit() {
  local rc=$? p
  for p in "${SC32_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  set +e
  (exit "$rc")
  _lab_scenario_exit
}
trap _sc32_exit EXIT
rc=0

LAB_DAEMON_IO=ring   # the daemons' batched packet I/O, as in scenario 17: with libpcap a veth's ring holds 512 frames
lab_up
for n in ${NICS//,/ }; do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 30; done
hc_wait_mux_candidates web/http80 "$NICS" 30 >/dev/null

# VIP2 on backend port 8000 (web-alt gives it up: one (VIP, port) per backend port, stateless DSR)
hc_ctl rule del "$VIP" web-alt --wait >/dev/null
hc_ctl vip add "$VIP2" --protocol tcp --frontend-port 80 --backend-port 8000 --pool web --probe http80 --wait >/dev/null
sc_wait_for "$VIP2 routed over both MUXes" 60 eval '[ "$(lab_router_nexthops "$VIP2" | wc -l)" = 2 ]' || rc=1

# captures: the client's side, and each backend's eth0 (the clients' traffic only, not the flood's)
lab_capture_start client1 eth0 client1 "tcp and (port 80) and net 198.51.100.0/24" >/dev/null
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" "tcp and (dst port 80 or dst port 8000) and src net 198.51.100.0/24" >/dev/null; done

# every probe fails from now on: its SYN is dropped in the backend's namespace; the services stay up
for n in $(lab_nodes nic); do
  lab_exec "$n" nft -f - <<'EOF'
table inet sc32 {
  chain input {
    type filter hook input priority 0; policy accept;
    ip saddr 192.0.2.1 tcp dport 80 counter drop
    ip6 saddr 2001:db8:d::1 tcp dport 80 counter drop
  }
}
EOF
done
hc_wait_mux_candidates web/http80 '' 60 >/dev/null || rc=1

snap() {  # PHASE WHEN: every MUX's and host agent's counters
  local m
  for m in $(lab_nodes mux) $(lab_nodes host); do sc_counters "$m" "$LAB_DIR/counters-$m-$1-$2.json" || rc=1; done
}
window() { printf '%s %s %s\n' "$1" "$2" "$3" >>"$LAB_DIR/windows.txt"; }
get() {  # NAME VIP N CONCURRENCY [CLIENT ARGS...]: N new connections, one request each
  local name=$1 vip=$2 n=$3 conc=$4; shift 4
  # 10 s: room for SYN retransmissions (1, 3 and 7 s) when the flood costs a packet; refused stays refused
  sc_client client1 http --url "http://$vip/" --count "$n" --concurrency "$conc" --timeout-ms 10000 --source "$SRC" \
    --json "$LAB_DIR/$name.json" "$@" >"$LAB_DIR/$name.out" 2>&1 || true  # the verifier reads the records
}

# --- drop (the default) ---
sc_wait_for "$VIP2 withdrawn (its one rule has no backend)" 60 eval '[ -z "$(lab_router_nexthops "$VIP2")" ]' || rc=1
snap drop before
t0=$(sc_now_us)
get drop "$VIP" "$DROP_N" "$DROP_N"   # all at once: each waits out its timeout
get drop2 "$VIP2" 10 10
t1=$(sc_now_us)
snap drop after
window drop "$t0" "$t1"

# --- spread ---
hc_ctl rule set "$VIP" web-http --all-down spread --wait >/dev/null || rc=1
hc_ctl rule set "$VIP2" tcp-80 --all-down spread --wait >/dev/null || rc=1
hc_wait_mux_candidates 'web/http80#fail-open' "$NICS" 60 >/dev/null || rc=1
sc_wait_for "$VIP2 announced again, over both MUXes" 60 eval '[ "$(lab_router_nexthops "$VIP2" | wc -l)" = 2 ]' || rc=1
hc_ctl state --yaml >"$LAB_DIR/config-spread.yaml" || rc=1
snap spread before
t0=$(sc_now_us)
get spread "$VIP" "$SPREAD_N" 8
get spread2 "$VIP2" 50 8
t1=$(sc_now_us)
snap spread after
window spread "$t0" "$t1"

# --- spread under a SYN flood ---
sc_verify gen-syn-flood --out "$LAB_DIR/syn-flood.trafgen" --src-mac "$(lab_exec client1 cat /sys/class/net/eth0/address)" \
  --dst-mac "$(lab_exec router cat /sys/class/net/br0/address)" --vip "$VIP" --port 80 --spoof "$SPOOF"
snap flood before
t0=$(sc_now_us)
# the flood lasts until the good client is done (it ends trafgen), at most 120 s
ip netns exec "$(lab_ns client1)" timeout -s INT 120 trafgen --in "$LAB_DIR/syn-flood.trafgen" --out eth0 --cpus 1 \
  --rate "${FLOOD_PPS}pps" --no-sock-mem --notouch-irq --no-cpu-stats >"$LAB_DIR/trafgen.log" 2>&1 &
flood=$!
SC32_PIDS+=("$flood")
# the good traffic starts once the MUXes read 2,000 flood SYNs (evidence that the flood is on)
flood_read() {
  local m s=0 v
  for m in $(lab_nodes mux); do
    v=$(lab_daemon_status "$m" | node -e 'let t="";process.stdin.on("data",(d)=>(t+=d)).on("end",()=>console.log(JSON.parse(t).counters?.flow_fail_open??0))') || return 1
    s=$((s + v))
  done
  echo "$s"
}
base=$(flood_read)
sc_wait_for 'the MUXes placing flood SYNs' 60 eval '[ $(( $(flood_read) - base )) -ge 2000 ]' || rc=1
get flood "$VIP" "$FLOOD_N" 8 --rate 30
kill -INT "$flood" 2>/dev/null || true
wait "$flood" 2>/dev/null || true
t1=$(sc_now_us)
snap flood after
window flood "$t0" "$t1"
for m in $(lab_nodes mux); do lab_daemon_status "$m" >"$LAB_DIR/status-$m-after.json" || rc=1; done
for n in $(lab_nodes nic); do lab_exec "$n" nft list table inet sc32 >"$LAB_DIR/nft-$n.txt" || rc=1; done
lab_capture_stop_all || rc=1

sc_verify fail-open --run "$LAB_DIR" --vip "$VIP" --vip2 "$VIP2" --config "$LAB_DIR/config-spread.yaml" --nics "$NICS" || rc=1
exit "$rc"
