# shellcheck shell=bash
# Shared steps of the BGP scenarios (10-13); source after scripts/lab/lib.sh and common.sh.
#   bgp_scenario_traps            after lab_setup_scenario: also stops this file's background pollers on exit
#   bgp_poll_start VIP FILE       polls the router's next hops for VIP every ~10 ms into FILE
#                                 ("EPOCH_US hop,hop,..." per line, EPOCH_US when the read had ended:
#                                 the route was so at or before it) until bgp_poll_stop
#   bgp_monitor_start FILE        records the router's route changes (ip -ts monitor route) into FILE
#   bgp_poll_stop                 stops the pollers and monitors
#   bgp_now_us                    the time in microseconds since the epoch (the polls' clock)
#   bgp_bird_state NAME           saves `show protocols all` and `show route all` to RUN/bird-NAME-*.txt
#   bgp_wait_hops VIP N [S]       waits until the router's route to VIP has N next hops (default 10 s)

BGP_POLL_PIDS=()

bgp_now_us() { printf '%s' "${EPOCHREALTIME/./}"; }

_bgp_scenario_exit() {
  local rc=$? p
  for p in "${BGP_POLL_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  BGP_POLL_PIDS=()
  set +e   # errexit would end this trap at the next line when rc != 0, before the lab is taken down
  (exit "$rc")
  _lab_scenario_exit
}

bgp_scenario_traps() {
  trap _bgp_scenario_exit EXIT
}

bgp_poll_start() {
  local vip=$1 out=$2
  (
    trap 'exit 0' TERM
    # the time is read once the route has been read: on a busy machine one poll can take 100-300 ms, and
    # a time taken before it stamped a route read after the event as seen before it
    local hops
    while :; do hops=$(lab_router_nexthops "$vip" | paste -sd, -); printf '%s %s\n' "${EPOCHREALTIME/./}" "$hops"; sleep 0.01; done
  ) >"$out" &
  BGP_POLL_PIDS+=($!)
}

# bgp_monitor_start FILE: `ip -ts monitor route` in the router's namespace (every route change with a
# microsecond timestamp), until bgp_poll_stop
bgp_monitor_start() {
  ip netns exec "$(lab_ns router)" ip -ts monitor route >"$1" 2>/dev/null &
  BGP_POLL_PIDS+=($!)
  sleep 0.1
}

bgp_poll_stop() {
  local p
  for p in "${BGP_POLL_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  BGP_POLL_PIDS=()
}

bgp_bird_state() {
  lab_birdc show protocols all >"$LAB_DIR/bird-$1-protocols.txt"
  lab_birdc show route all >"$LAB_DIR/bird-$1-routes.txt"
}

bgp_wait_hops() {
  local vip=$1 n=$2 s=${3:-10} deadline
  deadline=$(( $(bgp_now_us) + s * 1000000 ))
  until [ "$(lab_router_nexthops "$vip" | wc -l)" = "$n" ]; do
    [ "$(bgp_now_us)" -lt "$deadline" ] || { echo "the router's route to $vip does not have $n next hops after $s s: $(lab_router_nexthops "$vip" | paste -sd' ' -)" >&2; return 1; }
    sleep 0.05
  done
}
