#!/usr/bin/env bash
# scripts/bench/east-west.sh: issue 14's bench (docs/east-west.md "Bench"): east-west request/response
# latency (p50/p99) and TCP throughput from the tenant VM h1cl1 on host1 to one backend, h2vm1 on host2,
# three ways, measured in one lab and one run, alternating (round 1: fastpath, direct, through-mux;
# round 2 the other way round; ...):
#   fastpath     to the internal VIP 198.19.0.101 with the lab as it is: the MUX places the flow and
#                redirects it, the rest goes host1 PA -> host2 PA (host agents both ways)
#   through-mux  the same VIP with both MUXes restarted without the policy key (no --controller-token-file,
#                no controller, no BGP: east-west needs neither): they send no redirect (redirects_skipped),
#                so every client packet goes host1 -> MUX -> host2; replies host2 -> host1 as always
#   direct       VM to VM over an overlay without a VIP: a second interface in h1cl1 and h2vm1 (eth1,
#                198.19.250.1 and .2) bridged in host1 and host2 to a kernel VXLAN device (VNI 4242, UDP
#                4790) between the two hosts' PAs on the same fabric. slbx's host agents carry no VM-to-VM
#                traffic but an internal VIP's, so the kernel's overlay is the direct baseline
# Each measurement: scripts/bench/rr.ts (one TCP connection, 64-byte request and echo, --rate per second
# for --seconds after 1 s of warm-up) and iperf3 (one stream, --seconds after 1 s omitted). Before and
# after each, the daemons' counters and the kernel's interface counters, from which the report checks
# that the measurement took its variant's path (scripts/bench/east-west.ts). No timing assertion: the
# goals (Fastpath latency within +20 % of direct, throughput 1.5x through the MUX) are reported.
#
#   scripts/bench/east-west.sh                   3 rounds of 5 s (about 4 minutes); root
#   scripts/bench/east-west.sh --smoke           1 round of 1 s, to check the harness (numbers mean nothing)
#   scripts/bench/east-west.sh --runs 5 --seconds 10 --rate 2000 --io ring --out DIR
#
# Options: --runs N (3), --seconds S (5), --rate R (1000 requests/s, never two outstanding), --io pcap|ring
# (the daemons' packet I/O; default: the lab's, pcap), --name NAME (lab name, default slbx-hD-ew-PID),
# --out DIR (default results/east-west-<UTC time>), --smoke. Writes DIR/results.md and results.json
# (east-west.ts report), DIR/rows/rNN-VARIANT/ (counters, rr.json, iperf3.json, loadavg), the lab's logs
# in runs/lab/NAME/. Exit 1 when a measurement failed or did not take its path; 77 without root.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
SLBX_ROOT=$ROOT; export SLBX_ROOT

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }
die() { printf 'east-west bench: %s\n' "$*" >&2; exit 2; }
log() { printf '[east-west] %s\n' "$*" >&2; }

RUNS=3
SECS=5
RATE=1000
IO=''
NAME="slbx-hD-ew-$$"
OUT=''
SMOKE=0
while [ $# -gt 0 ]; do
  case $1 in
    --runs) [ $# -ge 2 ] || die '--runs needs a value'; RUNS=$2; shift 2 ;;
    --seconds) [ $# -ge 2 ] || die '--seconds needs a value'; SECS=$2; shift 2 ;;
    --rate) [ $# -ge 2 ] || die '--rate needs a value'; RATE=$2; shift 2 ;;
    --io) [ $# -ge 2 ] || die '--io needs a value'; IO=$2; shift 2 ;;
    --name) [ $# -ge 2 ] || die '--name needs a value'; NAME=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die '--out needs a value'; OUT=$2; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ $RUNS =~ ^[0-9]+$ ]] && [ "$RUNS" -ge 1 ] || die "--runs must be an integer >= 1 (got $RUNS)"
[[ $SECS =~ ^[0-9]+$ ]] && [ "$SECS" -ge 1 ] || die "--seconds must be an integer >= 1 (got $SECS)"
[[ $RATE =~ ^[0-9]+$ ]] && [ "$RATE" -ge 1 ] || die "--rate must be an integer >= 1 (got $RATE)"
case $IO in ''|pcap|ring) ;; *) die "--io must be pcap or ring (got $IO)" ;; esac
if [ $SMOKE = 1 ]; then RUNS=1; SECS=1; fi
if [ "$(id -u)" != 0 ]; then
  log 'needs root (network namespaces): skipped'
  [ -z "${CI:-}" ] || exit 1
  exit 77
fi
command -v iperf3 >/dev/null || die 'iperf3 is not installed (apt-get install -y iperf3)'
[ -f dist/scripts/bench/east-west.js ] && [ -f dist/scripts/bench/rr.js ] || die 'not built: npx tsc -p tsconfig.json'

OUT=${OUT:-$ROOT/results/east-west-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/rows"
OUT=$(cd "$OUT" && pwd)

# The daemons and tools run from a copy of dist/ taken now (under runs/, so node_modules resolves): on a
# shared checkout another build rewrites dist/ file by file, and a daemon restarted mid-run could load a
# half-written build. The copy is checked by loading each entry point, and taken again if that fails.
SNAP=$ROOT/runs/east-west-dist-$$
snapshot_ok() {
  local f
  for f in mux/main.js host-agent/main.js controller/main.js cli/slbctl.js scripts/bench/east-west.js; do
    SNAP_F=$SNAP/$f node --input-type=module -e 'await import(process.env.SNAP_F)' </dev/null >/dev/null 2>&1 || return 1
  done
}
for i in 1 2 3 4 5; do
  rm -rf "$SNAP"
  cp -a dist "$SNAP"
  snapshot_ok && break
  [ "$i" = 5 ] && { rm -rf "$SNAP"; die 'dist/ does not load (a build in progress?); try again'; }
  log "dist/ did not load (a build in progress?): copying again in 5 s"
  sleep 5
done
export LAB_MUX_JS=$SNAP/mux/main.js LAB_HOST_JS=$SNAP/host-agent/main.js LAB_CONTROLLER_JS=$SNAP/controller/main.js LAB_SLBCTL_JS=$SNAP/cli/slbctl.js

# shellcheck source=../lab/lib.sh
source scripts/lab/lib.sh
LAB_DAEMON_IO=$IO
LAB_NAME=$NAME
LAB_DIR=$(_lab_dir_of "$NAME")
MY_PIDS=()        # the servers and the key-less MUXes this script started (ended by PID)
KEYLESS=()        # "NODE PID" of the MUXes running without the policy key
LAB_STARTED=0
RC=0

cleanup() {
  local st=$? pid
  trap - EXIT INT TERM
  for pid in "${MY_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  if [ "$LAB_STARTED" = 1 ]; then
    lab_check_send_errors || { [ "$st" != 0 ] || st=1; }
    lab_down "$NAME" || { [ "$st" != 0 ] || st=1; }
  fi
  rm -rf "$SNAP"
  exit "$st"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "results in $OUT (load average $LOAD_START)"
lab_derive_config --config examples/lab.yaml --east-west --out "$OUT/lab-east-west.yaml"
node "$SNAP/scripts/bench/east-west.js" config --in "$OUT/lab-east-west.yaml" --out "$OUT/config.yaml"
LAB_STARTED=1
# The lab starts from the east-west config: its backends listen on every rule's backend port, so the bench
# VIP's rules (7100, 5201) are given to the controller afterwards, leaving those ports to the servers below
lab_up --name "$NAME" --config "$OUT/lab-east-west.yaml"
ns() { lab_ns "$1"; }
node --input-type=module -e '
  import { readFileSync, writeFileSync } from "node:fs";
  import { parse } from "yaml";
  writeFileSync(process.argv[2], JSON.stringify({ config: parse(readFileSync(process.argv[1], "utf8")) }));
' "$OUT/config.yaml" "$OUT/config-put.json"
ip netns exec "$(ns controller)" curl -sf -m 20 -X PUT -H "Authorization: Bearer $(cat "$LAB_DIR/api-token")" \
  -H 'content-type: application/json' --data-binary "@$OUT/config-put.json" http://127.0.0.1:8480/v1/state >"$OUT/config-put.answer" ||
  die "the controller refused the bench config (see $OUT/config-put.answer)"
lab_slbctl wait --wait-s 60 >/dev/null || die 'not every agent applied the bench config within 60 s'
log "bench VIP 198.19.0.101 (pool ew-bench: h2vm1) applied by every agent"

# ---- the servers in h2vm1 (both paths reach the same processes) ---------------------------------------
ip netns exec "$(ns h2vm1)" node "$SNAP/scripts/bench/rr.js" server --port 7100 >"$OUT/rr-server.log" 2>&1 &
MY_PIDS+=($!)
ip netns exec "$(ns h2vm1)" iperf3 -s -p 5201 >"$OUT/iperf3-server.log" 2>&1 &
MY_PIDS+=($!)
listening() { [ -n "$(ip netns exec "$(ns h2vm1)" ss -Hltn "sport = :$1")" ]; }
for i in $(seq 1 200); do
  listening 7100 && listening 5201 && break
  sleep 0.1
done
listening 7100 || die "the request/response server did not start (see $OUT/rr-server.log)"
listening 5201 || die "iperf3 -s did not start (see $OUT/iperf3-server.log)"

# ---- the direct overlay: kernel VXLAN between host1 and host2, eth1 in h1cl1 and h2vm1 -----------------
direct_leg() {  # HOST LOCAL_PA REMOTE_PA VM VM_ADDR
  local host=$1 local_pa=$2 remote_pa=$3 vm=$4 addr=$5 hns vns
  hns=$(ns "$host") vns=$(ns "$vm")
  ip -n "$hns" link add ewd0 type vxlan id 4242 local "$local_pa" remote "$remote_pa" dstport 4790 dev fab0
  ip -n "$hns" link add ewdbr0 type bridge
  ip -n "$hns" link add ewdvm type veth peer name eth1 netns "$vns"
  ip -n "$hns" link set ewd0 master ewdbr0
  ip -n "$hns" link set ewdvm master ewdbr0
  ip -n "$vns" addr add "$addr/24" dev eth1
  # checksum offload off as on every lab veth: TCP leaves in MTU-sized segments, as on the slbx path
  ip netns exec "$hns" ethtool -K ewdvm tx off >/dev/null
  ip netns exec "$vns" ethtool -K eth1 tx off >/dev/null
  for l in ewd0 ewdbr0 ewdvm; do ip -n "$hns" link set "$l" up; done
  ip -n "$vns" link set eth1 up
}
direct_leg host1 198.18.0.21 198.18.0.22 h1cl1 198.19.250.1
direct_leg host2 198.18.0.22 198.18.0.21 h2vm1 198.19.250.2

# ---- the key-less MUXes (through-mux) -------------------------------------------------------------------
mux_status_ready() {  # NODE
  ip netns exec "$(ns "$1")" curl -sf -m 2 "http://127.0.0.1:$LAB_MUX_STATUS_PORT/status" 2>/dev/null | lab_json_get --default false ready 2>/dev/null
}
muxes_keyless() {
  local m pid i
  for m in $(lab_nodes mux); do
    lab_mux_stop "$m"
    ip netns exec "$(ns "$m")" node --enable-source-maps "$SNAP/mux/main.js" --config "$OUT/config.yaml" --name "$m" \
      --status "127.0.0.1:$LAB_MUX_STATUS_PORT" --no-bgp ${IO:+--io "$IO"} >"$LAB_DIR/logs/$m-keyless.log" 2>&1 &
    pid=$!
    MY_PIDS+=("$pid")
    KEYLESS+=("$m $pid")
    for i in $(seq 1 300); do
      [ "$(mux_status_ready "$m")" = true ] && break
      kill -0 "$pid" 2>/dev/null || die "the key-less MUX $m exited (see $LAB_DIR/logs/$m-keyless.log)"
      sleep 0.1
    done
    [ "$(mux_status_ready "$m")" = true ] || die "the key-less MUX $m is not ready after 30 s"
    log "$m runs without the policy key (pid $pid)"
  done
}
muxes_keyed() {
  local e m pid i
  for e in "${KEYLESS[@]}"; do
    m=${e% *} pid=${e#* }
    counters_of "$m" "$OUT/keyless-$m-counters.json"
    kill -TERM "$pid"
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; sleep 0.2; }
    lab_mux_start "$m"
  done
  KEYLESS=()
}

# ---- counters -------------------------------------------------------------------------------------------
counters_of() {  # NODE FILE
  local port=$LAB_MUX_STATUS_PORT
  case $1 in host*) port=$LAB_HOST_STATUS_PORT ;; esac
  ip netns exec "$(ns "$1")" curl -sf -m 5 "http://127.0.0.1:$port/counters" >"$2"
}
tx_of() { ip netns exec "$(ns "$1")" cat "/sys/class/net/$2/statistics/tx_packets"; }
snapshot() {  # DIR WHEN (before|after)
  local d=$1 when=$2 n
  mkdir -p "$d/$when"
  for n in $(lab_nodes mux) host1 host2; do counters_of "$n" "$d/$when/$n.json"; done
  printf '{"client_eth0": %s, "client_eth1": %s, "host1_ewd": %s}\n' "$(tx_of h1cl1 eth0)" "$(tx_of h1cl1 eth1)" "$(tx_of host1 ewd0)" >"$d/if-$when.json"
}

measure() {  # ROUND VARIANT
  local r=$1 v=$2 d target
  d=$OUT/rows/$(printf 'r%02d' "$r")-$v
  mkdir -p "$d"
  case $v in direct) target=198.19.250.2 ;; *) target=198.19.0.101 ;; esac
  snapshot "$d" before
  cut -d' ' -f1-3 /proc/loadavg >"$d/loadavg"
  # bounded: a path that carries nothing would otherwise wait out TCP's SYN retries (about 2 minutes)
  ip netns exec "$(ns h1cl1)" timeout $((SECS + 60)) node "$SNAP/scripts/bench/rr.js" client --target "$target:7100" --mode persistent --rate "$RATE" \
    --seconds "$SECS" --warmup 1 --json "$d/rr.json" >"$d/rr.out" 2>&1 || log "round $r $v: the request/response client failed (see $d/rr.out)"
  ip netns exec "$(ns h1cl1)" timeout $((SECS + 60)) iperf3 -c "$target" -p 5201 -t "$SECS" -O 1 --connect-timeout 10000 -J >"$d/iperf3.json" 2>"$d/iperf3.err" ||
    log "round $r $v: iperf3 failed (see $d/iperf3.json)"
  # the flows' last packets and the counters settle (the daemons count as they forward)
  sleep 1
  snapshot "$d" after
  log "round $r $v: rr p50 $(lab_json_get --file "$d/rr.json" --default '?' p50Us 2>/dev/null) µs, iperf3 $(node -e '
    try { const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log((j.end.sum_received.bits_per_second / 1e9).toFixed(3) + " Gbit/s"); }
    catch { console.log("?"); }' "$d/iperf3.json"), load $(cut -d' ' -f1 /proc/loadavg)"
}

ORDER=(fastpath direct through-mux)
for r in $(seq 1 "$RUNS"); do
  if [ $((r % 2)) = 1 ]; then seq_v=("${ORDER[@]}"); else seq_v=(through-mux direct fastpath); fi
  for v in "${seq_v[@]}"; do
    if [ "$v" = through-mux ] && [ ${#KEYLESS[@]} = 0 ]; then muxes_keyless; fi
    if [ "$v" = fastpath ] && [ ${#KEYLESS[@]} != 0 ]; then muxes_keyed; fi
    measure "$r" "$v"
  done
done
[ ${#KEYLESS[@]} = 0 ] || muxes_keyed

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
printf '{"loadavgStart": "%s", "loadavgEnd": "%s", "runs": %s, "seconds": %s, "rate": %s, "io": "%s", "smoke": %s}\n' \
  "$LOAD_START" "$LOAD_END" "$RUNS" "$SECS" "$RATE" "${IO:-pcap}" "$([ $SMOKE = 1 ] && echo true || echo false)" >"$OUT/run.json"
node "$SNAP/scripts/bench/east-west.js" report --dir "$OUT" || RC=1
log "load average at the start $LOAD_START, at the end $LOAD_END; results: $OUT"
exit "$RC"
