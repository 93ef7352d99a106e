#!/usr/bin/env bash
# 12-mux-hang: 3 MUXes, HTTP requests running (a new connection each), one MUX frozen with SIGSTOP: its
# process keeps its TCP session open but sends nothing. Twice:
#   1. BGP alone: BIRD's hold timer (3 s in the lab) declares the session down and the router drops the
#      MUX's next hop (BIRD may then wait up to a second for the frozen peer before it flushes the
#      routes: both times are printed; the route must be gone within hold time + 1 s);
#   2. with BFD (bgp.bfd.enabled, 100 ms x 3, BIRD's and the MUX's RFC 5880 sessions): the router drops
#      it within 1 s.
# Each time traffic recovers: requests whose packets went to the frozen MUX get through once their
# retransmissions take the new route; a request may fail only if its handshake went to the frozen MUX.
# SIGCONT: the MUX finds its session expired, reconnects after its back-off and rejoins the route.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/bgp.sh
REQUESTS=${REQUESTS:-3000}
VIP=203.0.113.10
VICTIM=mux1
lab_setup_scenario bgp-sc12
bgp_scenario_traps
base=$LAB_NAME
rc=0

# hang NAME CONFIG DETECT_LIMIT_MS ROUTE_LIMIT_MS: one lab, one freeze, verified
hang() {
  local name=$1 config=$2 detect=$3 limit=$4 pid t_stop t_cont
  LAB_NAME=$name
  lab_up --name "$name" --config "$config" --muxes 3
  for m in $(lab_nodes mux); do lab_capture_start "$m" fab0 "$m" dst host $VIP and tcp dst port 80 >/dev/null; done
  bgp_poll_start $VIP "$LAB_DIR/polls.txt"
  bgp_monitor_start "$LAB_DIR/monitor.txt"
  sc_client client1 http --url http://$VIP/ --count "$REQUESTS" --concurrency 16 --timeout-ms 15000 \
    --source 198.51.100.10-198.51.100.41 --json "$LAB_DIR/http.json" >"$LAB_DIR/http.out" 2>&1 &
  local client=$!
  # the requests are running (the fresh lab's MUXes placed 20 of their flows) before the freeze
  sc_wait_for "20 of the requests' flows placed by the MUXes" 60 eval '[ "$(sc_mux_flows)" -ge 20 ]' || rc=1
  pid=$(lab_mux_pid $VICTIM)
  t_stop=$(bgp_now_us)
  kill -STOP "$pid"
  echo "froze $VICTIM (pid $pid) with SIGSTOP"
  bgp_wait_hops $VIP 2 10 || rc=1
  echo "router dropped $VICTIM after $(( ($(bgp_now_us) - t_stop) / 1000 )) ms (poll)"
  sleep 1
  t_cont=$(bgp_now_us)
  kill -CONT "$pid"
  echo "resumed $VICTIM with SIGCONT"
  bgp_wait_hops $VIP 3 15 || rc=1
  echo "$VICTIM back in the route after $(( ($(bgp_now_us) - t_cont) / 1000 )) ms"
  wait "$client" || rc=1
  cat "$LAB_DIR/http.out"
  bgp_poll_stop
  lab_birdc show protocols >"$LAB_DIR/bird-protocols-end.txt"
  lab_capture_stop_all || rc=1
  sc_verify mux-failure --kind hang --run "$LAB_DIR" --vip $VIP --port 80 --victim $VICTIM --event-us "$t_stop" --polls "$LAB_DIR/polls.txt" \
    --monitor "$LAB_DIR/monitor.txt" --hold-limit-ms "$detect" --limit-ms "$limit" --http-json "$LAB_DIR/http.json" \
    --rejoin-us "$t_cont" --rejoin-polls "$LAB_DIR/polls.txt" --rejoin-limit-ms 3000 --bird-protocols "$LAB_DIR/bird-protocols-end.txt" || rc=1
  lab_down "$name"
}

echo "--- 1. BGP hold timer (3 s)"
hang "$base" "$SLBX_ROOT/examples/lab.yaml" 3000 4000
echo "--- 2. BFD (100 ms x 3)"
mkdir -p "$(_lab_dir_of "$base-bfd")"
bfd_config=$(_lab_dir_of "$base-bfd")/lab-bfd.yaml
sed 's/^    enabled: false \( *\)# true: BFD/    enabled: true  \1# true: BFD/' "$SLBX_ROOT/examples/lab.yaml" >"$bfd_config"
grep -q '^    enabled: true' "$bfd_config" || { echo "FAIL  could not enable bgp.bfd in a copy of examples/lab.yaml"; exit 1; }
hang "$base-bfd" "$bfd_config" 1000 1000
exit "$rc"
