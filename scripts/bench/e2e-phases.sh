# shellcheck shell=bash
# The end-to-end phases of scripts/bench/send-paths.sh, sourced by it: same namespaces, same helpers
# (nsx, start_daemon, stop_pid, cpu_ticks, proc_ticks, counter, log, die), same results folder.
#
#   gen (client 198.51.100.10) ── router ──┬── mux  (slbx-mux)                        VIP 203.0.113.10
#                                          └── host (slbx-host-agent, or forwarding) ── vm 192.0.2.10
#
# Variants (each --runs times, interleaved with the others; both daemons pinned to the DUT CPU, the
# client and the servers to the generator CPU):
#   tcp-direct     baseline: the client reaches the backend by plain routing: the router has
#                  192.0.2.0/24 via the host's PA, the host namespace forwards (ip_forward=1, 192.0.2.1 on
#                  the backend's port); no MUX, no host agent
#   tcp-pcap       iperf3 to VIP:5201 -> slbx-mux -> VXLAN -> slbx-host-agent -> backend; replies by DSR
#   tcp-ring       the same with --io ring on both daemons
#   tcp-ring-w2    the same with --workers 2 on both daemons, each on every CPU (the client's and the
#                  servers' CPU too: two worker threads per daemon have nowhere else to go on 2 CPUs)
#   (each: --tcp-cases, iperf3 -P STREAMS for --seconds after --warmup omitted seconds; STREAMSr = -R,
#    the backend sends: the DSR-heavy direction)
#   rr-direct / rr-pcap / rr-ring / rr-ring-w2
#                  request/response latency over TCP (scripts/bench/rr.ts: 64-byte request, 64-byte
#                  echo) to 192.0.2.10:7100 or VIP:7100, --rr-modes: `persistent` (one connection,
#                  --rr-rate requests/s) and `connect` (a new connection per request, a quarter of the rate)
#   newflows-pcap / newflows-ring
#                  slbx-mux alone (the MUX phase's counting: VXLAN counted at the host's fabric interface
#                  and dropped there); scripts/bench/flowgen.ts offers each rate of --flow-rates in
#                  packets/s, in new flows of two packets each (source port and address counting up; the
#                  second packet well under a millisecond later: the MUX records the flow on the first and
#                  promotes it from its untrusted table on the second), so rate / 2 new flows per second;
#                  the MUX is restarted for each rate (empty tables); delivered, offered, lost over the
#                  whole run, and the MUX's flow counters (flow_new, flow_promoted, flow_untrusted_full)
#   cp-propagation the control plane: slbx-controller (seeded from the bench config, API on 127.0.0.1:8480
#                  in the mux namespace, on the generator CPU) and two MUXes watching it (mux1 and mux2,
#                  198.18.0.11 and .12 on the mux namespace's fabric interface, on the DUT CPU);
#                  scripts/bench/control-plane.ts changes a backend's weight --cp-changes times, each time
#                  waiting until both MUXes acked the new generation (each rebuilds the pool's Maglev table)
# Rows: tcp.tsv, rr.tsv, newflows.tsv, cp.tsv (and the raw iperf3, rr and control-plane JSON under tcp/,
# rr/ and cp/).

MUX_PID=''
AGENT_PID=''
IPERF3_PID=''

# e2e_init: once, in the main shell: the rows' headers and the client's routes
e2e_init() {
  mkdir -p "$OUT/tcp" "$OUT/rr"
  printf 'variant\tcase\tround\tseconds\tbits_per_second\tretransmits\tgen_cpu_usr_sys_sirq_idle_steal\tdut_cpu_usr_sys_sirq_idle_steal\tmux_cpu_pct\tagent_cpu_pct\tloadavg_1m\n' >"$OUT/tcp.tsv"
  printf 'variant\tmode\tround\tcount\terrors\trate\tp50_us\tp90_us\tp99_us\tp999_us\tmax_us\tmean_us\tdut_cpu_usr_sys_sirq_idle_steal\tloadavg_1m\n' >"$OUT/rr.tsv"
  printf 'variant\tround\tchanges\tclient_ms_median\tclient_ms_min\tclient_ms_max\tclient_ms_p90\tack_ms_median\tack_ms_min\tack_ms_max\tack_ms_p90\tloadavg_1m\n' >"$OUT/cp.tsv"
  mkdir -p "$OUT/cp"
  printf 'variant\trate\tround\tseconds\toffered\toffered_pps\tdelivered\tdelivered_pps\tflow_new\tflow_new_per_s\tflow_table_full\tmux_rx\tdut_cpu_usr_sys_sirq_idle_steal\tmux_cpu_pct\tloadavg_1m\ttotal_offered\ttotal_delivered\tlost\tflow_promoted\tflow_untrusted_full\n' >"$OUT/newflows.tsv"
  # the client reaches the VIP and (tcp-direct, rr-direct) the backend through the router
  ip -n "$NS_GEN" route replace default via 198.51.100.1
  # TIME_WAIT sockets of the connect mode must not run the client out of ports
  nsx "$NS_GEN" sysctl -qw net.ipv4.tcp_tw_reuse=1
}

# listening PORT: is a TCP socket listening on PORT in the backend's namespace
listening() { nsx "$NS_VM" ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# e2e_start_servers: the run's request/response server, on the generator CPU (the DUT CPU has only the
# daemons); it is the run's own (run_isolated stops it with the run) and is checked listening first
e2e_start_servers() {
  local i
  for i in $(seq 1 100); do listening 7100 || break; sleep 0.1; done
  listening 7100 && die "port 7100 is still taken in the backend's namespace after 10 s (a previous server?)"
  ip netns exec "$NS_VM" taskset -c "$GEN_CPU" node dist/scripts/bench/rr.js server --port 7100 >"$OUT/logs/rr-server-$1.log" 2>&1 &
  PIDS+=("$!")
  for i in $(seq 1 100); do listening 7100 && return 0; sleep 0.1; done
  die "the request/response server did not listen on 7100 in 10 s (log: $OUT/logs/rr-server-$1.log)"
}

# start_iperf3_server TAG: a fresh one-off iperf3 server (-1: it serves one test, then exits) for each
# measurement. A server that just served a test may go on for a while (the "server is busy running a
# test" the next client met when one long-lived server served every case): wait up to 10 s for the
# previous one to exit and the port to be free, stop it (ours, by PID) if it did not, and start the new
# one only once the port is free; it is ready when it listens. Returns 1 with IPERF3_FAIL set otherwise.
start_iperf3_server() {
  local tag=$1 i
  IPERF3_FAIL=''
  if [ -n "$IPERF3_PID" ]; then
    for i in $(seq 1 100); do kill -0 "$IPERF3_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$IPERF3_PID" 2>/dev/null && { log "$tag: the previous iperf3 server still runs after 10 s: stopped"; stop_pid "$IPERF3_PID" TERM; }
    wait "$IPERF3_PID" 2>/dev/null || true
    IPERF3_PID=''
  fi
  for i in $(seq 1 100); do listening 5201 || break; sleep 0.1; done
  if listening 5201; then IPERF3_FAIL='port 5201 still taken in the backend namespace after 10 s'; return 1; fi
  ip netns exec "$NS_VM" taskset -c "$GEN_CPU" iperf3 -s -1 -p 5201 >"$OUT/logs/iperf3-server-$tag.log" 2>&1 &
  IPERF3_PID=$!
  PIDS+=("$IPERF3_PID")
  for i in $(seq 1 100); do
    listening 5201 && return 0
    kill -0 "$IPERF3_PID" 2>/dev/null || break
    sleep 0.1
  done
  IPERF3_FAIL="the iperf3 server did not listen on 5201 in 10 s: $(tail -1 "$OUT/logs/iperf3-server-$tag.log" 2>/dev/null) (log: $OUT/logs/iperf3-server-$tag.log)"
  return 1
}

# start_lb IO ROUND VARIANT: slbx-mux and slbx-host-agent, both on the DUT CPU; IO ring-w2: --io ring
# --workers 2 on both, each daemon on every CPU (DAEMON_CPUS)
start_lb() {
  local io=$1 r=$2 v=$3 ready='"ready":true' workers=() cpus=''
  if [ "$io" = ring-w2 ]; then io=ring; workers=(--workers 2); cpus=0-$(($(nproc) - 1)); fi
  [ "$io" = ring ] && ready='"ready":true.*"io":"ring"'
  DAEMON_CPUS=$cpus start_daemon "$NS_MUX" "$MUX_STATUS" "$OUT/logs/$v-mux-r$r.log" "$ready" \
    dist/mux/main.js --config "$CFG" --name mux1 --interface f0 --send-path cap --io "$io" "${workers[@]}" --status "$MUX_STATUS"
  MUX_PID=$DAEMON_PID
  if [ "$(base_phase_of "$v")" != newflows ]; then
    DAEMON_CPUS=$cpus start_daemon "$NS_HOST" "$HOST_STATUS" "$OUT/logs/$v-agent-r$r.log" "$ready" \
      dist/host-agent/main.js --config "$CFG" --name host1 --interface f0 --receive-path capture --io "$io" "${workers[@]}" --status "$HOST_STATUS"
    AGENT_PID=$DAEMON_PID
  fi
  DAEMON_PID=''
}

stop_lb() { # VARIANT ROUND
  local v=$1 r=$2
  if [ -n "$MUX_PID" ]; then
    kill -0 "$MUX_PID" 2>/dev/null || die "$v round $r: slbx-mux died (log: $OUT/logs/$v-mux-r$r.log)"
    nsx "$NS_MUX" curl -sf --max-time 10 "http://$MUX_STATUS/status" >"$OUT/status/$v-mux-r$r.json" 2>/dev/null || log "$v round $r: no mux status"
    stop_pid "$MUX_PID" TERM
    MUX_PID=''
  fi
  if [ -n "$AGENT_PID" ]; then
    kill -0 "$AGENT_PID" 2>/dev/null || die "$v round $r: slbx-host-agent died (log: $OUT/logs/$v-agent-r$r.log)"
    nsx "$NS_HOST" curl -sf --max-time 10 "http://$HOST_STATUS/status" >"$OUT/status/$v-agent-r$r.json" 2>/dev/null || log "$v round $r: no host agent status"
    stop_pid "$AGENT_PID" TERM
    AGENT_PID=''
  fi
}

e2e_variant_up() { # VARIANT ROUND
  local v=$1 r=$2
  case $v in
    tcp-*|rr-*)
      [[ $v != rr-* ]] || e2e_start_servers "$v-r$r"
      ip -n "$NS_VM" route replace default via 192.0.2.1
      case $v in
        *-direct)
          ip -n "$NS_ROUTER" route replace 192.0.2.0/24 via "$HOST_PA"
          ip -n "$NS_HOST" addr add 192.0.2.1/24 dev h1vm1
          nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=1 ;;
        *) start_lb "${v#*-}" "$r" "$v" ;;
      esac ;;
    newflows-*) ;; # the MUX starts per rate (run_e2e_variant)
    cp-*) ;;       # the controller and the MUXes start in run_cp (run_e2e_variant)
    *) die "unknown variant $v" ;;
  esac
}

e2e_variant_down() { # VARIANT ROUND
  local v=$1 r=$2
  case $v in
    tcp-direct|rr-direct)
      ip -n "$NS_ROUTER" route del 192.0.2.0/24
      ip -n "$NS_HOST" addr del 192.0.2.1/24 dev h1vm1
      nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=0
      ip -n "$NS_VM" route del default ;;
    tcp-*|rr-*)
      stop_lb "$v" "$r"
      ip -n "$NS_VM" route del default ;;
    newflows-*|cp-*) ;;
  esac
}

loadavg1() { cut -d' ' -f1 /proc/loadavg; }

run_tcp_case() { # VARIANT ROUND CASE
  local v=$1 r=$2 c=$3 n rev='' target=203.0.113.10 json
  n=${c%r}
  [ "$n" != "$c" ] && rev=-R
  [ "$v" = tcp-direct ] && target=192.0.2.10
  json=$OUT/tcp/$v-$c-r$r.json
  if ! start_iperf3_server "$v-$c-r$r"; then note_failure "$c" "$IPERF3_FAIL"; return 0; fi
  # SEND_PATHS_HOLD_IPERF3=1 (a fault for checking this harness, never in a measurement): another client
  # takes the fresh server first, so this case must be recorded as failed and the next ones go on
  if [ "${SEND_PATHS_HOLD_IPERF3:-0}" = 1 ]; then
    ip netns exec "$NS_GEN" iperf3 -c "$target" -p 5201 -t $((SECONDS_MEASURED + WARMUP + 2)) >"$OUT/logs/iperf3-hold-$v-$c-r$r.log" 2>&1 &
    PIDS+=("$!")
    sleep 1
  fi
  local g0 g1 u0 u1 m0 m1 a0 a1 irc=0
  g0=$(cpu_ticks "$GEN_CPU"); u0=$(cpu_ticks "$DUT_CPU"); m0=$(proc_ticks "$MUX_PID"); a0=$(proc_ticks "$AGENT_PID")
  timeout $((SECONDS_MEASURED + WARMUP + 20)) ip netns exec "$NS_GEN" taskset -c "$GEN_CPU" \
    iperf3 -c "$target" -p 5201 -t "$SECONDS_MEASURED" -O "$WARMUP" -P "$n" $rev -J >"$json" 2>"$OUT/logs/iperf3-$v-$c-r$r.err" || irc=$?
  g1=$(cpu_ticks "$GEN_CPU"); u1=$(cpu_ticks "$DUT_CPU"); m1=$(proc_ticks "$MUX_PID"); a1=$(proc_ticks "$AGENT_PID")
  local bps retr secs hz err
  hz=$(getconf CLK_TCK)
  read -r bps retr secs < <(node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const e = j.end || {};
    const rcv = (e.sum_received || {});
    console.log(Math.round(rcv.bits_per_second || 0), (e.sum_sent || {}).retransmits ?? 0, (rcv.seconds || 0).toFixed(3));
  ' "$json" 2>/dev/null || echo "0 0 0")
  # a failed case is recorded with iperf3's own words (its JSON "error"), never as 0 Gbit/s
  if [ $irc != 0 ] || [ "$bps" = 0 ]; then
    err=$(node -e 'try { const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(j.error || "") } catch { console.log("") }' "$json" 2>/dev/null || true)
    [ $irc != 124 ] || err="timed out after $((SECONDS_MEASURED + WARMUP + 20)) s${err:+; $err}"
    note_failure "$c" "iperf3 exited $irc: ${err:-no throughput} (see $json)"
    return 0
  fi
  local mpct apct
  mpct=$(awk -v a="$m0" -v b="$m1" -v hz="$hz" -v s="$SECONDS_MEASURED" -v w="$WARMUP" 'BEGIN { printf "%.0f", 100 * (b - a) / hz / (s + w) }')
  apct=$(awk -v a="$a0" -v b="$a1" -v hz="$hz" -v s="$SECONDS_MEASURED" -v w="$WARMUP" 'BEGIN { printf "%.0f", 100 * (b - a) / hz / (s + w) }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$v" "$c" "$r" "$secs" "$bps" "$retr" "$(cpu_share "$g0" "$g1")" "$(cpu_share "$u0" "$u1")" "$mpct" "$apct" "$(loadavg1)" >>"$OUT/tcp.tsv"
  log "$(printf '%-14s %-3s round %s: %8.3f Gbit/s, %s retransmits; cpu%s %s, cpu%s %s; mux %s %%, agent %s %%' \
    "$v" "$c" "$r" "$(awk -v b="$bps" 'BEGIN { print b / 1e9 }')" "$retr" "$GEN_CPU" "$(cpu_share "$g0" "$g1")" "$DUT_CPU" "$(cpu_share "$u0" "$u1")" "$mpct" "$apct")"
}

run_rr_mode() { # VARIANT ROUND MODE
  local v=$1 r=$2 m=$3 target=203.0.113.10:7100 rate=$RR_RATE json
  [ "$v" = rr-direct ] && target=192.0.2.10:7100
  [ "$m" = connect ] && rate=$(( RR_RATE / 4 > 0 ? RR_RATE / 4 : 1 ))
  json=$OUT/rr/$v-$m-r$r.json
  local u0 u1
  u0=$(cpu_ticks "$DUT_CPU")
  local crc=0
  timeout $((SECONDS_MEASURED + WARMUP + 30)) ip netns exec "$NS_GEN" taskset -c "$GEN_CPU" \
    node dist/scripts/bench/rr.js client --target "$target" --mode "$m" --rate "$rate" --seconds "$SECONDS_MEASURED" \
    --warmup "$WARMUP" --json "$json" >"$OUT/logs/rr-$v-$m-r$r.log" 2>&1 || crc=$?
  if [ $crc != 0 ]; then
    note_failure "$m" "the latency client exited $crc: $(tail -1 "$OUT/logs/rr-$v-$m-r$r.log" 2>/dev/null) (log: $OUT/logs/rr-$v-$m-r$r.log)"
    return 0
  fi
  u1=$(cpu_ticks "$DUT_CPU")
  local row
  row=$(node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    console.log([j.count, j.errors, j.rate.toFixed(0), j.p50Us, j.p90Us, j.p99Us, j.p999Us, j.maxUs, j.meanUs].join("\t"));
  ' "$json")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$v" "$m" "$r" "$row" "$(cpu_share "$u0" "$u1")" "$(loadavg1)" >>"$OUT/rr.tsv"
  log "$(printf '%-10s %-10s round %s: ' "$v" "$m" "$r")$(printf '%s' "$row" | awk -F'\t' '{ printf "%s requests (%s errors) at %s/s: p50 %s us, p99 %s us, p99.9 %s us", $1, $2, $3, $4, $6, $7 }')"
}

# mux_counters: "flow_new flow_table_full rx_packets flow_promoted flow_untrusted_full" of the running
# MUX, 0 for a counter it does not have (one request; no extra process on the generator's CPU but curl)
mux_counters() {
  local j k v out=''
  j=$(nsx "$NS_MUX" curl -sf --max-time 5 "http://$MUX_STATUS/counters" | tr -d ' \n')
  for k in flow_new flow_table_full rx_packets flow_promoted flow_untrusted_full; do
    v=$(printf '%s' "$j" | grep -o "\"$k\":[0-9]*" | head -1 | cut -d: -f2)
    out+="${v:-0} "
  done
  echo "$out"
}

run_newflows_rate() { # VARIANT ROUND RATE
  local v=$1 r=$2 rate=$3 io=${1#newflows-}
  start_lb "$io" "$r" "$v@$rate"
  local a_d a_o z_d z_o
  a_d=$(counter "$NS_HOST" f0 rx_packets); a_o=$(counter "$NS_GEN" eth0 tx_packets)
  ip netns exec "$NS_GEN" taskset -c "$GEN_CPU" node dist/scripts/bench/flowgen.js --interface eth0 \
    --src-mac "$MAC_GEN" --dst-mac "$MAC_ROUTER_CLIENT" --rate "$rate" --seconds $((WARMUP + SECONDS_MEASURED + 1)) \
    >"$OUT/logs/flowgen-$v-$rate-r$r.log" 2>&1 &
  local gpid=$!
  PIDS+=("$gpid")
  sleep "$WARMUP"
  local t0 t1 d0 d1 o0 o1 f0 f1 x0 x1 u0 u1 m0 m1 rx0 rx1
  t0=$(date +%s%N); d0=$(counter "$NS_HOST" f0 rx_packets); o0=$(counter "$NS_GEN" eth0 tx_packets)
  local pr0 pr1 uf0 uf1
  read -r f0 x0 rx0 pr0 uf0 < <(mux_counters)
  u0=$(cpu_ticks "$DUT_CPU"); m0=$(proc_ticks "$MUX_PID")
  sleep "$SECONDS_MEASURED"
  t1=$(date +%s%N); d1=$(counter "$NS_HOST" f0 rx_packets); o1=$(counter "$NS_GEN" eth0 tx_packets)
  read -r f1 x1 rx1 pr1 uf1 < <(mux_counters)
  u1=$(cpu_ticks "$DUT_CPU"); m1=$(proc_ticks "$MUX_PID")
  # the generator stops by itself after its seconds; then the pipeline drains, and the totals of the
  # whole run say exactly how many packets were lost (the window above is for the rates)
  local i
  for i in $(seq 1 100); do kill -0 "$gpid" 2>/dev/null || break; sleep 0.1; done
  stop_pid "$gpid" TERM
  sleep 0.5
  z_d=$(counter "$NS_HOST" f0 rx_packets); z_o=$(counter "$NS_GEN" eth0 tx_packets)
  stop_lb "$v@$rate" "$r"
  local dt secs
  dt=$(( t1 - t0 ))
  secs=$(awk -v n="$dt" 'BEGIN { printf "%.3f", n / 1e9 }')
  local off=$((o1 - o0)) del=$((d1 - d0)) fn=$((f1 - f0))
  local opps=$(( off * 1000000000 / dt )) dpps=$(( del * 1000000000 / dt )) fps=$(( fn * 1000000000 / dt ))
  local mpct
  mpct=$(awk -v a="$m0" -v b="$m1" -v hz="$(getconf CLK_TCK)" -v n="$dt" 'BEGIN { printf "%.0f", 100 * (b - a) / hz / (n / 1e9) }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$v" "$rate" "$r" "$secs" "$off" "$opps" "$del" "$dpps" "$fn" "$fps" \
    "$((x1 - x0))" "$((rx1 - rx0))" "$(cpu_share "$u0" "$u1")" "$mpct" "$(loadavg1)" "$((z_o - a_o))" "$((z_d - a_d))" "$(( z_o - a_o > z_d - a_d ? z_o - a_o - (z_d - a_d) : 0 ))" \
    "$((pr1 - pr0))" "$((uf1 - uf0))" >>"$OUT/newflows.tsv"
  log "$(printf '%-13s %7s/s round %s: offered %8s pps, delivered %8s pps, %8s new flows/s; lost %s of %s in the whole run; cpu%s %s, mux %s %%' \
    "$v" "$rate" "$r" "$opps" "$dpps" "$fps" "$(( z_o - a_o > z_d - a_d ? z_o - a_o - (z_d - a_d) : 0 ))" "$((z_o - a_o))" "$DUT_CPU" "$(cpu_share "$u0" "$u1")" "$mpct")"
}

run_cp() { # VARIANT ROUND
  local v=$1 r=$2 cpid m1 m2 i
  ip -n "$NS_MUX" addr add "$MUX2_PA/24" dev f0
  rm -f "$OUT/cp/state-r$r.json"
  ip netns exec "$NS_MUX" taskset -c "$GEN_CPU" node dist/controller/main.js --state "$OUT/cp/state-r$r.json" --init "$CFG" \
    --listen 127.0.0.1:8480 --token-file "$OUT/cp/api-token" >"$OUT/logs/$v-controller-r$r.log" 2>&1 &
  cpid=$!
  PIDS+=("$cpid")
  for i in $(seq 1 100); do nsx "$NS_MUX" curl -sf --max-time 1 http://127.0.0.1:8480/v1/state >/dev/null 2>&1 && break; sleep 0.1; done
  start_daemon "$NS_MUX" 127.0.0.1:9180 "$OUT/logs/$v-mux1-r$r.log" '"ready":true' \
    dist/mux/main.js --config "$CFG" --name mux1 --interface f0 --controller http://127.0.0.1:8480 --controller-token-file "$OUT/cp/api-token" --status 127.0.0.1:9180
  m1=$DAEMON_PID
  start_daemon "$NS_MUX" 127.0.0.1:9182 "$OUT/logs/$v-mux2-r$r.log" '"ready":true' \
    dist/mux/main.js --config "$CFG" --name mux2 --interface f0 --controller http://127.0.0.1:8480 --controller-token-file "$OUT/cp/api-token" --status 127.0.0.1:9182
  m2=$DAEMON_PID
  DAEMON_PID=''
  local json=$OUT/cp/$v-r$r.json rc=0
  timeout 120 ip netns exec "$NS_MUX" taskset -c "$GEN_CPU" node dist/scripts/bench/control-plane.js --controller http://127.0.0.1:8480 --token-file "$OUT/cp/api-token" \
    --pool p1 --nic h1vm1 --changes "$CP_CHANGES" --json "$json" >"$OUT/logs/$v-client-r$r.log" 2>&1 || rc=$?
  stop_pid "$m1" TERM; stop_pid "$m2" TERM; stop_pid "$cpid" TERM
  ip -n "$NS_MUX" addr del "$MUX2_PA/24" dev f0
  [ $rc = 0 ] || die "the control-plane client exited $rc: $(tail -1 "$OUT/logs/$v-client-r$r.log" 2>/dev/null) (log: $OUT/logs/$v-client-r$r.log)"
  local row
  row=$(node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const f = (x) => x.toFixed(2);
    console.log([j.changes, f(j.clientMs.median), f(j.clientMs.min), f(j.clientMs.max), f(j.clientMs.p90), f(j.lastMuxAckMs.median), f(j.lastMuxAckMs.min), f(j.lastMuxAckMs.max), f(j.lastMuxAckMs.p90)].join("\t"));
  ' "$json")
  printf '%s\t%s\t%s\t%s\n' "$v" "$r" "$row" "$(loadavg1)" >>"$OUT/cp.tsv"
  log "$(printf '%-14s round %s: ' "$v" "$r")$(printf '%s' "$row" | awk -F'\t' '{ printf "%s changes: API -> last MUX ack %s ms median (%s-%s), client-side %s ms median", $1, $6, $7, $8, $2 }')"
}

run_e2e_variant() { # VARIANT ROUND
  local v=$1 r=$2 c
  enter_phase "$(base_phase_of "$v")"
  variant_up "$v" "$r"
  case $v in
    tcp-*) for c in ${TCP_CASES//,/ }; do run_tcp_case "$v" "$r" "$c"; done ;;
    rr-*) for c in ${RR_MODES//,/ }; do run_rr_mode "$v" "$r" "$c"; done ;;
    newflows-*) for c in ${FLOW_RATES//,/ }; do run_newflows_rate "$v" "$r" "$c"; done ;;
    cp-*) run_cp "$v" "$r" ;;
  esac
  variant_down "$v" "$r"
}
