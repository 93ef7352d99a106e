#!/usr/bin/env bash
# 17-syn-flood: a spoofed-source SYN flood at 203.0.113.10:80 (random addresses of 198.19.0.0/16, random
# ports: trafgen from client1) while 200 established keep-alive connections keep asking and a stream of
# new connections (one request each) keeps coming, both from client2. One MUX takes the whole flood, with
# a config derived here whose flow tables are small enough to fill in a fraction of a second (main table
# 20,000 flows, untrusted table 10,000, untrusted timeout 5 s) and whose HTTP probe runs at the product's
# default interval, 5 s, not the lab's 1 s: a probe answer lost in a host agent's full capture during
# an overshooting step would mark a healthy backend down, and each such change of the Maglev table moves
# the new connections that the full untrusted table could not record (the verifier explains any).
# The flood: trafgen (one worker, which pins itself to CPU 0), paced in 1 s steps that follow what the
# lab carries (below): the highest rate this 2-CPU machine can push through its own data plane, whatever
# else runs on it. The daemons use the ring I/O (--io ring: with libpcap the capture ring of a veth with
# offloads holds only 512 frames, docs/performance.md).
# What it shows: the flood's SYNs go to the untrusted table and, once it is full, to the stateless Maglev
# choice (flow_untrusted_full), never to the main table (flow_table_full stays 0); no established
# connection fails and each is still in the main table after the flood; every new connection succeeds
# (any failure must be one in flight when the tables changed); the MUX's resident memory (VmRSS, sampled
# every 0.1 s) stays under a bound derived from its table sizes; the backends answer with SYN cookies and
# their SYN-ACKs to the spoofed addresses die at the router (no route to 198.19.0.0/16, at most one ICMP
# a second, to the VIP); nothing reaches the clients or leaves the lab. Phase 2 measures the generator's
# ceiling (trafgen unpaced, no good traffic): the MUX, short of CPU, reads only part of it; the main
# table and the memory stay within their bounds all the same.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
VIP=203.0.113.10
PORT=80
SPOOF=198.19.0.0/16
FLOOD_S=${FLOOD_S:-12}   # the flood's length: 1 s steps until FLOOD_S seconds have passed, with the good traffic,
FLOOD_MIN_SYNS=30000     # and until it has sent 3 times the untrusted table (below), however slow the generator
FLOOD_MAX_S=90           # (but no longer than this)
STEP_CAP_S=1.5           # a step ends after this even if the generator is short of its rate
P2_S=${P2_S:-3}          # phase 2: the generator's ceiling
LEAD_S=2                 # good traffic before the flood
TAIL_S=3                 # and after it
RATE=${RATE:-200}        # new connections per second
RAMP_START_PPS=20000     # the flood's first step
RAMP_MAX_PPS=2000000
HOLD_SRC=198.51.100.50-198.51.100.65   # client2's addresses
HTTP_SRC=198.51.100.66-198.51.100.81
lab_setup_scenario sc17
SC17_PIDS=()
_sc17_exit() {
  local rc=$? p
  for p in "${SC17_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  set +e
  (exit "$rc")
  _lab_scenario_exit
}
trap _sc17_exit EXIT
now_us() { printf '%s' "${EPOCHREALTIME/./}"; }

mkdir -p "$LAB_DIR.cfg"
cfg=$LAB_DIR.cfg/lab-syn-flood.yaml
lab_derive_config --config examples/lab.yaml --probe-interval-ms 5000 --max-flows 20000 --untrusted-max-flows 10000 --untrusted-timeout-s 5 \
  --out "$cfg" || { echo 'FAIL could not derive the config'; exit 1; }
LAB_DAEMON_IO=ring   # the daemons' batched packet I/O (docs/performance.md): with libpcap a veth's ring holds 512 frames
lab_up --config "$cfg" --muxes 1 --clients 2
mux_pid=$(lab_mux_pid mux1)
for n in mux1 host1 host2; do
  io=$(sc_status_field "$n" io)
  if [ "$io" != ring ]; then
    # the ring path is what this scenario floods: without it the scenario fails (never a skip)
    echo "FAIL 17-syn-flood: $n runs --io $io, not ring (its log in $LAB_DIR/logs says why; is the addon built? npm run build:native, log in runs/build-native.log)"
    exit 1
  fi
done

# the flood's frames: built with the project's packet builder, random fields and checksums per packet
sc_verify gen-syn-flood --out "$LAB_DIR/syn-flood.trafgen" --src-mac "$(lab_exec client1 cat /sys/class/net/eth0/address)" \
  --dst-mac "$(lab_exec router cat /sys/class/net/br0/address)" --vip $VIP --port $PORT --spoof $SPOOF

# captures: a 1/256 slice of the flood (source ports 1024-1279) wherever it goes, the good traffic at the
# MUX (on the fabric bridge's port to it: what it received and what it sent), and anything addressed to
# the spoofed range on the client side
slice_in="src net $SPOOF and tcp[0] = 4"
lab_capture_start router client1 router-client1 "$slice_in" >/dev/null   # trafgen bypasses client1's taps
lab_capture_start client1 eth0 client1 "dst net $SPOOF" >/dev/null
lab_capture_start fabric mux1 mux1 "(dst host $VIP and tcp and (src net 198.51.100.0/24 or ($slice_in))) or (udp dst port 4789 and (ip[62:2] = 0xc633 or (ip[62:2] = 0xc613 and ip[70] = 4)))" >/dev/null
lab_capture_start router fab0 router-fab0 "(src host $VIP and dst net $SPOOF and tcp[2] = 4) or icmp" >/dev/null
lab_capture_start router br0 router-br0 "dst net $SPOOF" >/dev/null

# snapshots: the MUX's and host agents' counters, nstat of the router, the MUX and the backends,
# interface counters, the MUX's tables generation
sc17_snap() {
  local d=$LAB_DIR/snap/$1 n x
  mkdir -p "$d"
  now_us >"$d/us"
  sc_counters mux1 "$d/mux.json"
  for n in $(lab_nodes host); do sc_counters "$n" "$d/host-$n.json"; done
  for n in router mux1 $(lab_nodes nic); do lab_exec "$n" nstat -asz >"$d/nstat-$n.txt"; done
  for x in client1/eth0 client2/eth0 mux1/fab0 router/fab0; do
    printf '%s %s %s %s\n' "${x%/*}" "${x#*/}" "$(lab_exec "${x%/*}" cat "/sys/class/net/${x#*/}/statistics/rx_packets")" \
      "$(lab_exec "${x%/*}" cat "/sys/class/net/${x#*/}/statistics/tx_packets")"
  done >"$d/ifaces.txt"
  sc_status_field mux1 generation >"$d/generation"
}

# the MUX's resident memory (VmRSS, and its anonymous and file-backed parts), every 0.1 s, until the end
(
  trap 'exit 0' TERM
  while :; do
    [ -r "/proc/$mux_pid/status" ] || exit 0
    rss='' anon='' file=''
    while IFS=$': \t' read -r k v _; do
      case $k in VmRSS) rss=$v ;; RssAnon) anon=$v ;; RssFile) file=$v ;; esac
    done <"/proc/$mux_pid/status"
    printf '%s %s %s %s\n' "${EPOCHREALTIME/./}" "$rss" "$anon" "$file"
    sleep 0.1
  done
) >"$LAB_DIR/rss.txt" &
SC17_PIDS+=($!)

flood() {  # NAME SECONDS: trafgen unpaced in client1 for SECONDS (timeout signals its process group)
  local name=$1 s=$2 rc=0 t0
  t0=$(now_us)
  ip netns exec "$(lab_ns client1)" timeout -s INT "$s" trafgen --in "$LAB_DIR/syn-flood.trafgen" --out eth0 --cpus 1 \
    --no-sock-mem --notouch-irq --no-cpu-stats >"$LAB_DIR/trafgen-$name.log" 2>&1 &
  wait $! || rc=$?
  printf '%s %s %s\n' "$name" "$t0" "$(now_us)" >>"$LAB_DIR/flood-times.txt"
  [ "$rc" = 124 ] || { echo "FAIL trafgen ($name) ended with status $rc:"; tail -n 5 "$LAB_DIR/trafgen-$name.log"; return 1; }
}

# The flood of phase 1, for FLOOD_S seconds of wall time (so its length does not depend on how fast the
# generator is), in steps of 1 s of trafgen paced at a rate that follows what the lab carries: it grows
# while the MUX reads >= 97 % of what reached its namespace and the host agents >= 97 % of what it sent
# them, stays at >= 90 % and falls below (scripts/lab/syn-flood.ts: the ramp and its parameters). So it
# settles at the highest rate this lab carries, wherever the CPU goes, and pushes past it now and then.
# One line per step in RUN/ramp.txt.
flood_ramp() {  # SECONDS
  local hosts=() h
  for h in $(lab_nodes host); do hosts+=(--host-ns "$(lab_ns "$h")"); done
  "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/syn-flood.js" --client-ns "$(lab_ns client1)" --trafgen-file "$LAB_DIR/syn-flood.trafgen" \
    --mux-ns "$(lab_ns mux1)" "${hosts[@]}" --seconds "$1" --min-syns "$FLOOD_MIN_SYNS" --max-seconds "$FLOOD_MAX_S" --step-cap-s "$STEP_CAP_S" \
    --start-pps "$RAMP_START_PPS" --max-pps "$RAMP_MAX_PPS" --out "$LAB_DIR/ramp.txt" --times "$LAB_DIR/flood-times.txt" --log "$LAB_DIR/trafgen-flood.log" &
  wait $!
}

rc=0
# The good traffic runs until the scenario ends it (RUN/good.end, TAIL_S after the flood), so it spans
# the flood however long that takes. A packet of a good connection lost in the flood (a full ring
# while the lab is at its limit) is sent again by TCP with exponential backoff, so its next try after
# the flood comes within about the flood's length: a client timeout of twice the longest flood lets
# every connection finish after it, whatever the machine's speed (the latencies are printed)
good_s=$((LEAD_S + FLOOD_MAX_S + 3 + TAIL_S))
good_timeout_ms=$(( (2 * (FLOOD_MAX_S + 3) + 10) * 1000 ))
sc_client client2 hold --url "http://$VIP/health" --connections 200 --duration-ms $((good_s * 1000)) --end-file "$LAB_DIR/good.end" --interval-ms 500 --timeout-ms $good_timeout_ms \
  --source $HOLD_SRC --json "$LAB_DIR/hold.json" >"$LAB_DIR/hold.out" 2>&1 &
hold=$!
sc_client client2 http --url "http://$VIP/" --count $((RATE * good_s)) --end-file "$LAB_DIR/good.end" --rate "$RATE" --concurrency 64 --timeout-ms $good_timeout_ms \
  --source $HTTP_SRC --json "$LAB_DIR/http.json" >"$LAB_DIR/http.out" 2>&1 &
http=$!
sleep "$LEAD_S"
sc17_snap pre
echo "--- 1. the flood: $FLOOD_S s (and $FLOOD_MIN_SYNS SYNs at least) of 1 s steps of spoofed SYNs at the highest rate the lab carries, under 200 established connections and $RATE new ones a second"
flood_ramp "$FLOOD_S" || rc=1
sc17_snap flood
lab_exec mux1 curl -sf 'http://127.0.0.1:9180/flows?limit=10000' >"$LAB_DIR/flows-after-flood.json"
sleep "$TAIL_S"
touch "$LAB_DIR/good.end"
wait "$hold" || rc=1
# the new connections' client exits 1 when any request failed: the verifier judges which failures the
# flood may cause (in flight at a table change) and that this status is the one its records call for
http_rc=0; wait "$http" || http_rc=$?
cat "$LAB_DIR/hold.out" "$LAB_DIR/http.out"
lab_capture_stop_all || rc=1

echo "--- 2. the generator's ceiling: ${P2_S} s of trafgen at normal priority, no good traffic"
sc17_snap p2pre
flood ceiling "$P2_S" || rc=1
sleep 0.5
sc17_snap p2post
kill "${SC17_PIDS[0]}" 2>/dev/null || true

sc_verify syn-flood --run "$LAB_DIR" --vip $VIP --port $PORT --spoof $SPOOF \
  --hold-json "$LAB_DIR/hold.json" --http-json "$LAB_DIR/http.json" --http-status "$http_rc" || rc=1
exit "$rc"
