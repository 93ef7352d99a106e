#!/usr/bin/env bash
# scripts/bench/send-paths.sh: measures the daemons' I/O paths against the kernel, in the same run, on the
# same namespaces (docs/io-paths.md explains the paths and records the numbers and the choice).
#
#   gen ── router ── fabric (bridge, MTU 1600) ──┬── mux    198.18.0.11
#  (trafgen) (kernel    198.18.0.1                └── host   198.18.0.21 ── vm (backend 192.0.2.10)
#            forwarding: 203.0.113.10 via mux)
#
# MUX phase: trafgen in `gen` sends 64-byte UDP frames to the VIP 203.0.113.10:7 from random source
# ports (a new random 16-bit port per packet: tens of thousands of flows for the flow table and Maglev);
# the router forwards them to the mux namespace; what arrives at the host's fabric interface is counted
# (the host namespace drops it with an nftables rule, so it never answers with ICMP). Variants:
#   kernel-forward  baseline: the mux namespace forwards the packets itself (ip_forward=1, VIP via host PA)
#   kernel-vxlan    baseline: the mux namespace's own VXLAN device encapsulates them to the host PA
#   mux-cap         slbx-mux --send-path cap   (capture in, whole frame out with pcap_sendpacket)
#   mux-raw         slbx-mux --send-path raw   (capture in, outer IPv4 onwards on an IPPROTO_RAW socket)
#   mux-udp         slbx-mux --send-path udp   (capture in, VXLAN onwards on a connected UDP socket)
# Host agent phase: trafgen in the (idle) mux namespace sends the same client frame VXLAN-encapsulated
# (114 bytes) from the MUX's PA to the host's PA; what arrives at the backend's interface is counted:
#   kernel-vxlan-decap  baseline: the host namespace's own VXLAN device decapsulates, the kernel routes
#                       the inner packet to the backend (ip_forward=1)
#   agent-capture       slbx-host-agent --receive-path capture (pcap in + nftables drop, pcap_sendpacket out)
#   agent-udp           slbx-host-agent --receive-path udp     (UDP socket on PA:4789 in, pcap_sendpacket out)
# The batched fast path (--io ring: native/slbx_ring.c, docs/performance.md) in the same two phases:
#   mux-ring            slbx-mux --send-path cap --io ring (packet ring in, sendmmsg out, one JS call per batch)
#   mux-ring-w2         the same with --workers 2 (PACKET_FANOUT over two worker threads), the MUX on every
#                       CPU (the generator's CPU 0 included): on a 2-CPU machine the workers share the
#                       generator's core, so this measures what a second core buys here, not the 1.7x target
#   agent-ring          slbx-host-agent --receive-path capture --io ring
#   agent-ring-w2       the same with --workers 2 (PACKET_FANOUT_CBPF over two worker threads), on every CPU
#                       as mux-ring-w2 (the generator's core shared the same way)
# DSR phase (the return path): trafgen in `vm` sends the backend's 64-byte replies (192.0.2.10:7 -> the
# client, destination ports 1024..65023: 64,000 flows) to its gateway; what arrives at the router's fabric
# interface is counted (the router drops it in its forward hook, so the client's kernel never answers).
# The host agent sends a backend's packet from the VIP only for a flow it recorded from the client's side
# (docs/design.md "Return path"), so before the agent-dsr* runs' traffic the seed (send-paths.js seed, from
# the mux namespace) sends each flow's client packet once through the agent, VXLAN-encapsulated as a MUX
# would; the run checks the agent recorded all 64,000 (dsr_flows_learned; else the run fails) and records
# in dsr-seed.tsv how many replies it still dropped as unsolicited (drop_out_dsr_unsolicited, over warm-up
# and measured seconds; 0 when the seed worked). Their UDP idle timeout is an hour (slbx-bench-dsr.yaml):
# only the client's datagrams refresh a UDP flow. SEND_PATHS_DSR_SEED=0 leaves the seed out (to see the
# replies dropped; never for a measurement).
#   kernel-forward-return  baseline: the host namespace forwards the replies itself (ip_forward=1)
#   agent-dsr              slbx-host-agent (pcap): capture on the port, NAT to VIP:7, raw socket to the router
#   agent-dsr-ring         the same with --io ring (packet ring in, batched raw-socket sendmmsg out)
# VARIANT@BYTES runs a packet-rate variant with BYTES-byte client frames (default 64; e.g. mux-ring@1400);
# ratios are computed within one size. End-to-end phases (TCP with iperf3, request/response latency, new
# flows per second: tcp-*, rr-*, newflows-*) are described in scripts/bench/e2e-phases.sh.
#
# Each variant runs --runs times (default 3), interleaved (round 1 of every variant, then round 2, ...),
# each run = --warmup s of traffic (default 1) then --seconds s measured (default 5). trafgen runs one
# worker pinned to CPU 0 (it pins itself there); the process under test is pinned to --dut-cpu (default 1)
# with taskset. Delivered packets are the delta of /sys/class/net/IF/statistics/rx_packets of the
# receiving interface, read by the kernel, not by a user process; "offered" is the delta of tx_packets on
# the generator's interface. Results: runs.tsv, results.json and results.md in the results folder
# (default results/send-paths-<UTC timestamp>/, gitignored), with the config, the trafgen configs, the
# daemons' logs and their /status after each run. The folder is printed at the end.
# --rps steers the receive processing of the mux's and the host's fabric interfaces to the DUT CPU (RPS,
# /sys/class/net/f0/queues/rx-0/rps_cpus in those namespaces): then that CPU pays for everything done in
# the namespace under test, the kernel's capture copy and the kernel baselines' own work included. Without
# it (the default, as in the prototype measured before the project, docs/design.md) that work runs in the generator CPU's softirq, so the
# kernel baselines are generator-limited and the capture's kernel half is free for the daemons.
# Wire check: in round 1 of each variant, tcpdump on the receiving interface keeps the first 2000 packets
# of the warm-up (never of the measured seconds) in wire/VARIANT.pcap; the report decodes them with the
# project's dissector (outer addresses, distinct outer UDP source ports, VNI, inner MAC, inner destination,
# IPv4 checksums), which shows what each path puts on the wire, e.g. the udp send path's single source port.
#
# Needs root, ip, bridge, nft, trafgen (netsniff-ng), taskset, curl, node, and 2 CPUs. Everything it
# creates lives in network namespaces named slbx-bench-<random>-*, with addresses from 198.18.0.0/15,
# 198.51.100.0/24, 192.0.2.0/24 and 203.0.113.0/24; nothing touches the root namespace. A trap stops the
# processes it started (by PID) and deletes its namespaces, on success and on failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() {
  cat <<'EOF'
usage: scripts/bench/send-paths.sh [options]

Measures the MUX send paths (cap, raw, udp) and the host agent receive paths (capture, udp) against the
kernel's IP forwarding and VXLAN device, in network namespaces it builds and removes (run as root).

options:
  --runs N         runs per variant, at least 1; 3 or more for a result worth recording (default 3)
  --seconds S      measured seconds per run (default 5)
  --warmup S       seconds of traffic before each measurement (default 1)
  --variants LIST  comma-separated subset of: kernel-forward,kernel-vxlan,mux-cap,mux-raw,mux-udp,
                   kernel-vxlan-decap,agent-capture,agent-udp (the default: these eight), and
                   mux-ring, mux-ring-w2 (2 workers, every CPU), agent-ring, agent-ring-w2, kernel-forward-return,
                   agent-dsr, agent-dsr-ring; a packet-rate
                   variant takes @BYTES for another frame size (mux-ring@1400); end-to-end variants:
                   tcp-direct, tcp-pcap, tcp-ring, tcp-ring-w2 (2 workers per daemon, every CPU), rr-direct,
                   rr-pcap, rr-ring, rr-ring-w2, newflows-pcap, newflows-ring, cp-propagation
                   (scripts/bench/e2e-phases.sh, with its options below)
  --tcp-cases LIST iperf3 cases of the tcp-* variants: STREAMS or STREAMSr (reverse), default 1,8,1r,8r
  --rr-modes LIST  latency modes of the rr-* variants: persistent, connect (default both)
  --rr-rate N      requests per second of the latency client (default 2000; connect mode: a quarter)
  --flow-rates L   offered packets/s of the newflows-* variants, each packet a new flow
                   (default 100000,200000,300000,400000)
  --cp-changes N   policy changes per run of the cp-propagation variant (default 20)
  --dsr-rate PPS   pace the DSR phase's generator at PPS packets/s (trafgen --rate; default: as fast as it
                   can): a rate a working host agent keeps up with even on a busy machine, so delivered /
                   offered says whether the replies pass (scripts/bench.sh --smoke), not how fast
  --dut-cpu N      CPU of the process under test (default 1; the generator always runs on CPU 0; 0 puts
                   everything on one CPU, for latency experiments without cross-CPU wake-ups)
  --rps            steer the receive processing of the mux's and the host's fabric interfaces to the
                   DUT CPU too (RPS), so it pays for the kernel's share of each path (see the header)
  --out DIR        results folder (default results/send-paths-<UTC timestamp>/)
  --perf           in round 1, record a CPU profile of each process under test over its measured seconds
                   (perf record, cpu-clock, with --perf-basic-prof for JavaScript symbols): perf/VARIANT.txt
                   (by symbol) and perf/VARIANT-dso.txt (kernel, node, JIT code, libraries)
  --no-build       do not run the TypeScript build first
  --help           show this help

Each (variant, round) runs on its own: one that fails is recorded with its reason in failures.tsv (and
results.json, results.md) and the others go on. Exit status: 0 all measured; 3 some runs failed; 2 a
usage error or the harness could not run (root, tools, build, topology).

Details (topology, counting, what each variant is): the header of this script and docs/io-paths.md.
EOF
}

RUNS=3
SECONDS_MEASURED=5
WARMUP=1
DUT_CPU=1
GEN_CPU=0
OUT=''
BUILD=1
RPS=0
PERF=0
ALL_VARIANTS=(kernel-forward kernel-vxlan mux-cap mux-raw mux-udp kernel-vxlan-decap agent-capture agent-udp)
VARIANTS=("${ALL_VARIANTS[@]}")
# not in the default set (the default is what docs/io-paths.md measured)
MORE_VARIANTS=(mux-ring mux-ring-w2 agent-ring agent-ring-w2 kernel-forward-return agent-dsr agent-dsr-ring
  tcp-direct tcp-pcap tcp-ring tcp-ring-w2 rr-direct rr-pcap rr-ring rr-ring-w2 newflows-pcap newflows-ring cp-propagation)
TCP_CASES=1,8,1r,8r
CP_CHANGES=20
RR_MODES=persistent,connect
RR_RATE=2000
FLOW_RATES=100000,200000,300000,400000
DSR_RATE=''

# Exit codes: 0 every run measured; 2 a usage error or the harness could not run (root, tools, build,
# topology); 3 some runs failed: each is a row of failures.tsv (phase, variant, round, case, reason) and
# in results.json and results.md, and the other runs went on.
# die inside a run (RUN_ID "PHASE VARIANT ROUND", set by run_isolated) records the reason first; the run's
# subshell then stops and cleans up, and the next run starts.
RUN_ID=''
die() {
  printf 'send-paths: %s\n' "$*" >&2
  [ -z "$RUN_ID" ] || note_failure '' "$*"
  exit 2
}
# note_failure CASE REASON: one failed measurement of the current run (the run itself may go on)
note_failure() {
  local ph v r
  read -r ph v r <<<"$RUN_ID"
  printf '%s\t%s\t%s\t%s\t%s\n' "$ph" "$v" "$r" "${1:--}" "$(printf '%s' "$2" | tr '\t\n' '  ')" >>"$OUT/failures.tsv"
  printf '[send-paths] FAILED %s %s round %s%s: %s\n' "$ph" "$v" "$r" "${1:+ $1}" "$2" >&2
}
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

while [ $# -gt 0 ]; do
  case $1 in
    --runs) [ $# -ge 2 ] || die '--runs needs a value'; RUNS=$2; shift 2 ;;
    --seconds) [ $# -ge 2 ] || die '--seconds needs a value'; SECONDS_MEASURED=$2; shift 2 ;;
    --warmup) [ $# -ge 2 ] || die '--warmup needs a value'; WARMUP=$2; shift 2 ;;
    --variants) [ $# -ge 2 ] || die '--variants needs a value'; IFS=, read -r -a VARIANTS <<<"$2"; shift 2 ;;
    --dut-cpu) [ $# -ge 2 ] || die '--dut-cpu needs a value'; DUT_CPU=$2; shift 2 ;;
    --dsr-rate) [ $# -ge 2 ] || die '--dsr-rate needs a value'; DSR_RATE=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die '--out needs a value'; OUT=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --rps) RPS=1; shift ;;
    --perf) PERF=1; shift ;;
    --tcp-cases) [ $# -ge 2 ] || die '--tcp-cases needs a value'; TCP_CASES=$2; shift 2 ;;
    --rr-modes) [ $# -ge 2 ] || die '--rr-modes needs a value'; RR_MODES=$2; shift 2 ;;
    --rr-rate) [ $# -ge 2 ] || die '--rr-rate needs a value'; RR_RATE=$2; shift 2 ;;
    --flow-rates) [ $# -ge 2 ] || die '--flow-rates needs a value'; FLOW_RATES=$2; shift 2 ;;
    --cp-changes) [ $# -ge 2 ] || die '--cp-changes needs a value'; CP_CHANGES=$2; shift 2 ;;
    --help|-h) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
is_uint "$RUNS" && [ "$RUNS" -ge 1 ] || die "--runs must be an integer >= 1, got $RUNS"
is_uint "$SECONDS_MEASURED" && [ "$SECONDS_MEASURED" -ge 1 ] || die "--seconds must be an integer >= 1, got $SECONDS_MEASURED"
is_uint "$WARMUP" || die "--warmup must be an integer >= 0, got $WARMUP"
is_uint "$DUT_CPU" || die "--dut-cpu must be a CPU number, got $DUT_CPU"
[ -z "$DSR_RATE" ] || { is_uint "$DSR_RATE" && [ "$DSR_RATE" -ge 1 ]; } || die "--dsr-rate must be an integer >= 1 (packets/s), got $DSR_RATE"
base_of() { printf '%s' "${1%@*}"; }
size_of() { if [[ $1 == *@* ]]; then printf '%s' "${1#*@}"; else printf 64; fi; }
SIZES=(64)
E2E=0
for v in "${VARIANTS[@]}"; do
  b=$(base_of "$v")
  [[ " ${ALL_VARIANTS[*]} ${MORE_VARIANTS[*]} " == *" $b "* ]] || die "unknown variant $v (known: ${ALL_VARIANTS[*]} ${MORE_VARIANTS[*]})"
  case $b in
    tcp-*|rr-*|newflows-*|cp-*) E2E=1; [[ $v != *@* ]] || die "$v: @BYTES is for the packet-rate variants" ;;
    *) sz=$(size_of "$v")
       is_uint "$sz" && [ "$sz" -ge 64 ] && [ "$sz" -le 1500 ] || die "$v: the frame size must be 64..1500 bytes"
       [[ " ${SIZES[*]} " == *" $sz "* ]] || SIZES+=("$sz") ;;
  esac
done
is_uint "$RR_RATE" && [ "$RR_RATE" -ge 1 ] || die "--rr-rate must be an integer >= 1, got $RR_RATE"
[ "$(id -u)" = 0 ] || die 'needs root (network namespaces, packet sockets, raw sockets)'
NCPU=$(nproc)
[ "$NCPU" -ge 2 ] || die "needs 2 CPUs (one for the generator, one for the process under test); this machine has $NCPU"
[ "$DUT_CPU" -lt "$NCPU" ] || die "--dut-cpu must be 0..$((NCPU - 1))"
[ "$DUT_CPU" -ne "$GEN_CPU" ] || printf 'send-paths: warning: --dut-cpu %s: the process under test shares the generator'"'"'s CPU (for latency experiments: no cross-CPU wake-ups; rates mean little)\n' "$DUT_CPU" >&2
for t in ip bridge nft trafgen taskset curl node tcpdump ethtool; do
  command -v "$t" >/dev/null || die "$t is not installed (Debian: iproute2 nftables netsniff-ng util-linux curl nodejs tcpdump ethtool)"
done
[ $E2E = 0 ] || command -v iperf3 >/dev/null || die 'iperf3 is not installed (Debian: iperf3)'
[ "$RUNS" -ge 3 ] || printf 'send-paths: warning: --runs %s: fewer than 3 runs per variant is a smoke test, not a result\n' "$RUNS" >&2

cd "$ROOT"
if [ "$BUILD" = 1 ]; then
  npx tsc -p tsconfig.json || die 'TypeScript build failed'
fi
for f in dist/mux/main.js dist/host-agent/main.js dist/scripts/bench/send-paths.js; do
  [ -f "$f" ] || die "$f is missing: build first (npx tsc -p tsconfig.json)"
done

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$ROOT/results/send-paths-$STAMP}
mkdir -p "$OUT/logs" "$OUT/status" "$OUT/wire"
[ "$PERF" = 0 ] || { command -v perf >/dev/null || die '--perf needs perf (Debian: linux-perf)'; mkdir -p "$OUT/perf"; }
OUT=$(cd "$OUT" && pwd)

# trafgen's send buffer (scripts/bench/trafgen-sndbuf.c): without it, a path slower than the generator
# behind an RPS-steered interface fills the buffer and trafgen exits (docs/io-paths.md).
# SEND_PATHS_TRAFGEN_SNDBUF=0 leaves it out (to see that failure recorded; never for a measurement).
TG_PRELOAD=''
if [ "${SEND_PATHS_TRAFGEN_SNDBUF:-1}" = 0 ]; then
  printf 'send-paths: warning: SEND_PATHS_TRAFGEN_SNDBUF=0: trafgen keeps its 208 KB send buffer\n' >&2
elif command -v cc >/dev/null && cc -shared -fPIC -O2 -Wall -o "$OUT/trafgen-sndbuf.so" scripts/bench/trafgen-sndbuf.c -ldl 2>"$OUT/logs/trafgen-sndbuf-build.log"; then
  TG_PRELOAD=$OUT/trafgen-sndbuf.so
else
  printf 'send-paths: warning: scripts/bench/trafgen-sndbuf.c did not build (cc: Debian gcc; see %s): trafgen keeps its 208 KB send buffer and may exit under --rps\n' "$OUT/logs/trafgen-sndbuf-build.log" >&2
fi

# ---- names, addresses, MACs -------------------------------------------------------------------------
P="slbx-bench-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')-"
NS_GEN=${P}gen NS_ROUTER=${P}router NS_FABRIC=${P}fabric NS_MUX=${P}mux NS_HOST=${P}host NS_VM=${P}vm
VIP=203.0.113.10
ROUTER_FABRIC=198.18.0.1
MUX_PA=198.18.0.11
MUX2_PA=198.18.0.12
HOST_PA=198.18.0.21
DIP=192.0.2.10
MAC_GEN=02:00:00:00:01:10
MAC_ROUTER_CLIENT=02:00:00:00:01:01
MAC_ROUTER_FABRIC=02:00:00:00:00:01
MAC_MUX=02:00:00:00:00:11
MAC_HOST=02:00:00:00:00:21
MAC_PORT=02:00:00:01:00:01
MAC_NIC=02:00:c0:00:02:0a
MUX_STATUS=127.0.0.1:9180
HOST_STATUS=127.0.0.1:9181

NSS=()
PIDS=()
RUN_PID=''
log() { printf '[send-paths] %s\n' "$*" >&2; }

cleanup() {
  local rc=$? pid ns i
  set +e
  trap - EXIT INT TERM
  # a run in progress (run_isolated's subshell) stops its own processes and undoes its variant
  if [ -n "$RUN_PID" ] && kill -0 "$RUN_PID" 2>/dev/null; then
    kill -TERM "$RUN_PID" 2>/dev/null
    for i in $(seq 1 100); do kill -0 "$RUN_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null; done
  for i in $(seq 1 30); do
    local alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; done
  for ns in "${NSS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  # --perf: the JIT symbol maps node wrote for perf (/tmp/perf-PID.map), ours only
  for pid in "${PIDS[@]}"; do rm -f "/tmp/perf-$pid.map"; done
  for ns in "${NSS[@]}"; do [ -e "/var/run/netns/$ns" ] && log "could not delete namespace $ns"; done
  if [ $rc = 3 ]; then log "some runs failed (exit 3; failures.tsv); the others are in $OUT"
  elif [ $rc != 0 ]; then log "failed (exit $rc); partial results in $OUT"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# ---- topology ---------------------------------------------------------------------------------------
new_ns() {
  ip netns add "$1"
  NSS+=("$1")
  ip -n "$1" link set lo up
  # no IPv6 chatter (router solicitations, MLD) in the counters; no reverse-path filter on the test paths
  nsx "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
    net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0
}

# veth NS1 IF1 MAC1 NS2 IF2 MAC2: a veth pair created directly between two of our namespaces
veth() {
  ip -n "$1" link add "$2" address "$3" type veth peer name "$5" address "$6" netns "$4"
  ip -n "$1" link set "$2" up
  ip -n "$4" link set "$5" up
}

build_topology() {
  log "namespaces ${P}{gen,router,fabric,mux,host,vm}"
  local n
  for n in "$NS_GEN" "$NS_ROUTER" "$NS_FABRIC" "$NS_MUX" "$NS_HOST" "$NS_VM"; do new_ns "$n"; done
  # client side
  veth "$NS_GEN" eth0 "$MAC_GEN" "$NS_ROUTER" c0 "$MAC_ROUTER_CLIENT"
  ip -n "$NS_GEN" addr add 198.51.100.10/24 dev eth0
  ip -n "$NS_ROUTER" addr add 198.51.100.1/24 dev c0
  # fabric: a bridge in its own namespace, MTU 1600 everywhere (VXLAN adds 50 bytes)
  ip -n "$NS_FABRIC" link add br0 type bridge stp_state 0
  # bridged frames must not run through IP netfilter (br_netfilter, when some other user loaded it): the
  # lab turns it off too, and here its cost would land on whichever CPU sends into the bridge
  local k
  for k in bridge-nf-call-iptables bridge-nf-call-ip6tables bridge-nf-call-arptables; do
    [ ! -e "/proc/sys/net/bridge/$k" ] || nsx "$NS_FABRIC" sysctl -qw "net.bridge.$k=0" 2>/dev/null || true
  done
  ip -n "$NS_FABRIC" link set br0 mtu 1600 up
  veth "$NS_ROUTER" f0 "$MAC_ROUTER_FABRIC" "$NS_FABRIC" p-router 02:00:00:00:f0:01
  veth "$NS_MUX" f0 "$MAC_MUX" "$NS_FABRIC" p-mux 02:00:00:00:f0:11
  veth "$NS_HOST" f0 "$MAC_HOST" "$NS_FABRIC" p-host 02:00:00:00:f0:21
  local p
  for p in p-router p-mux p-host; do
    ip -n "$NS_FABRIC" link set "$p" mtu 1600 master br0
  done
  # static forwarding entries: no flooding, whatever the ageing
  bridge -n "$NS_FABRIC" fdb replace "$MAC_ROUTER_FABRIC" dev p-router master static
  bridge -n "$NS_FABRIC" fdb replace "$MAC_MUX" dev p-mux master static
  bridge -n "$NS_FABRIC" fdb replace "$MAC_HOST" dev p-host master static
  ip -n "$NS_ROUTER" link set f0 mtu 1600
  ip -n "$NS_MUX" link set f0 mtu 1600
  ip -n "$NS_HOST" link set f0 mtu 1600
  ip -n "$NS_ROUTER" addr add "$ROUTER_FABRIC/24" dev f0
  ip -n "$NS_MUX" addr add "$MUX_PA/24" dev f0
  ip -n "$NS_HOST" addr add "$HOST_PA/24" dev f0
  ip -n "$NS_MUX" route add default via "$ROUTER_FABRIC"
  ip -n "$NS_HOST" route add default via "$ROUTER_FABRIC"
  # the router: kernel forwarding, the VIP via the MUX (what BGP would install)
  nsx "$NS_ROUTER" sysctl -qw net.ipv4.ip_forward=1
  ip -n "$NS_ROUTER" route add "$VIP/32" via "$MUX_PA"
  # the backend behind the host: port h1vm1 (the host agent's side), eth0 with the nic's MAC in vm
  veth "$NS_HOST" h1vm1 "$MAC_PORT" "$NS_VM" eth0 "$MAC_NIC"
  ip -n "$NS_VM" addr add "$DIP/24" dev eth0
  # checksum offload off on the client's and the backend's interfaces, as in the lab (veth offload): TCP
  # leaves in MTU-sized segments, not 64 KB ones the MUX would refuse (too_big)
  nsx "$NS_GEN" ethtool -K eth0 tx off >/dev/null
  nsx "$NS_VM" ethtool -K eth0 tx off >/dev/null
  # (neighbours are resolved by the first packets of each run's warm-up)
  if [ "$RPS" = 1 ]; then
    local mask
    mask=$(printf '%x' $((1 << DUT_CPU)))
    nsx "$NS_MUX" sh -c "echo $mask > /sys/class/net/f0/queues/rx-0/rps_cpus"
    nsx "$NS_HOST" sh -c "echo $mask > /sys/class/net/f0/queues/rx-0/rps_cpus"
    log "RPS: receive processing of mux/f0 and host/f0 on CPU $DUT_CPU (mask $mask)"
  fi
}

write_files() {
  CFG=$OUT/slbx-bench.yaml
  cat >"$CFG" <<EOF
# written by scripts/bench/send-paths.sh: one mux, one host, one nic, one VIP with a UDP rule
version: 1
fabric:
  mtu: 1600
  vxlanPort: 4789
flowTable:
  maxFlows: 4000000   # the newflows phase records up to a million flows per run
networks:
  - name: tenant-a
    vni: 5001
    gateway: 192.0.2.1
muxes:
  - name: mux1
    address: $MUX_PA
  - name: mux2            # only in the cp-propagation variant (a second MUX watching the controller)
    address: $MUX2_PA
hosts:
  - name: host1
    address: $HOST_PA
nics:
  - name: h1vm1
    host: host1
    network: tenant-a
    port: h1vm1
    mac: "$MAC_NIC"
    addresses: [$DIP]
pools:
  - name: p1
    backends:
      - nic: h1vm1
vips:
  - address: $VIP
    rules:
      - name: echo
        protocol: udp
        frontendPort: 7
        pool: p1
        distribution: 5-tuple
      - name: iperf
        protocol: tcp
        frontendPort: 5201
        pool: p1
      - name: rr
        protocol: tcp
        frontendPort: 7100
        pool: p1
EOF
  # the DSR variants' agent: the same with a UDP idle timeout longer than any run (the seeded flows must
  # outlive the warm-up and the measured seconds; a reply does not refresh its UDP flow)
  CFG_DSR=$OUT/slbx-bench-dsr.yaml
  sed 's/^flowTable:$/flowTable:\n  udpIdleTimeoutS: 3600   # send-paths.sh: the seeded DSR flows outlive the run/' "$CFG" >"$CFG_DSR"
  grep -q udpIdleTimeoutS "$CFG_DSR" || die "$CFG_DSR: no udpIdleTimeoutS written"
  node dist/scripts/bench/send-paths.js frames --gen-mac "$MAC_GEN" --router-mac "$MAC_ROUTER_CLIENT" \
    --mux-mac "$MAC_MUX" --host-mac "$MAC_HOST" --nic-mac "$MAC_NIC" --port-mac "$MAC_PORT" \
    --sizes "$(IFS=,; echo "${SIZES[*]}")" --out-dir "$OUT"
}

# ---- processes --------------------------------------------------------------------------------------
TG_PID=''
TG_CHILDREN=()
start_trafgen() { # NS IF CONFIG LOG [PPS: paced]
  # not through nsx: a backgrounded shell function would be a subshell, and $! its PID, not trafgen's
  ip netns exec "$1" env ${TG_PRELOAD:+LD_PRELOAD="$TG_PRELOAD"} taskset -c "$GEN_CPU" trafgen --in "$3" --out "$2" --cpus 1 \
    ${5:+--rate "${5}pps"} --no-sock-mem --notouch-irq --no-cpu-stats >"$4" 2>&1 &
  TG_PID=$!
  PIDS+=("$TG_PID")
  # trafgen forks its worker (and pins it to CPU 0): record it too, to stop it by PID
  local c i
  TG_CHILDREN=()
  for i in $(seq 1 50); do
    kill -0 "$TG_PID" 2>/dev/null || die "trafgen exited at start: $(trafgen_said "$4")"
    for c in $(pgrep -P "$TG_PID" || true); do TG_CHILDREN+=("$c"); PIDS+=("$c"); done
    [ ${#TG_CHILDREN[@]} -gt 0 ] && return 0
    sleep 0.1
  done
  die "trafgen started no worker in 5 s (log: $4)"
}

# the last line trafgen wrote that says why (e.g. "Flushing TX_RING failed: ..."), with its log's name
trafgen_said() { printf '%s (log: %s)' "$(grep -v '^ *$' "$1" 2>/dev/null | grep -iv 'packets to schedule\|bytes in total\|Running!' | tail -1 || true)" "$1"; }

stop_pid() { # PID [SIGNAL]: stop one process we started and wait for it
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -"${2:-TERM}" "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

stop_trafgen() {
  # the parent and its worker at once: the parent alone lets the worker run on for seconds
  local pid i alive
  for pid in "$TG_PID" "${TG_CHILDREN[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for i in $(seq 1 50); do
    alive=0
    for pid in "$TG_PID" "${TG_CHILDREN[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.05
  done
  for pid in "$TG_PID" "${TG_CHILDREN[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; done
  wait "$TG_PID" 2>/dev/null || true
  TG_PID=''
  TG_CHILDREN=()
}

DAEMON_PID=''
DAEMON_NS=''
DAEMON_STATUS=''
status_of() { nsx "$DAEMON_NS" curl -sf --max-time "${1:-2}" "http://$DAEMON_STATUS/status"; }

# start_daemon NS STATUS LOG READY_REGEX COMMAND...: starts it pinned to the DUT CPU, waits until /status matches
start_daemon() {
  local ns=$1 status=$2 logf=$3 ready=$4 i s=''
  shift 4
  # ip netns exec and taskset exec: $! is the daemon's own PID
  # DAEMON_CPUS (a taskset list) for a daemon that spreads over several CPUs: --workers
  ip netns exec "$ns" taskset -c "${DAEMON_CPUS:-$DUT_CPU}" node $([ "$PERF" = 1 ] && echo --perf-basic-prof) "$@" >"$logf" 2>&1 &
  DAEMON_PID=$!
  DAEMON_NS=$ns
  DAEMON_STATUS=$status
  PIDS+=("$DAEMON_PID")
  for i in $(seq 1 150); do
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$logf" >&2; die "daemon exited at start (log: $logf)"; }
    s=$(status_of 2>/dev/null || true)
    if [ -n "$s" ] && printf '%s' "$s" | tr -d ' \n' | grep -Eq "$ready"; then return 0; fi
    sleep 0.1
  done
  printf '%s\n' "$s" >&2
  die "daemon not ready after 15 s (log: $logf)"
}

stop_daemon() {
  [ -n "$DAEMON_PID" ] || return 0
  stop_pid "$DAEMON_PID" TERM
  DAEMON_PID=''
}

# ---- variants ---------------------------------------------------------------------------------------
# the phase of a variant: what it is compared with (a packet-rate phase at another frame size is its own)
base_phase_of() {
  case $(base_of "$1") in
    kernel-forward|kernel-vxlan|mux-*) echo mux ;;
    kernel-vxlan-decap|agent-capture|agent-udp|agent-ring|agent-ring-w2) echo host-agent ;;
    kernel-forward-return|agent-dsr|agent-dsr-ring) echo dsr ;;
    tcp-*) echo tcp ;;
    rr-*) echo latency ;;
    newflows-*) echo newflows ;;
    cp-*) echo control ;;
  esac
}
phase_of() {
  local p sz
  p=$(base_phase_of "$1")
  sz=$(size_of "$1")
  if [ "$sz" = 64 ]; then echo "$p"; else echo "$p@$sz"; fi
}

MUX_PHASE_ACTIVE=0
# The MUX phase counts VXLAN at the host's fabric interface; the host namespace drops it in netfilter
# (after the interface counted it) so it never answers with ICMP port unreachable.
enter_phase() {
  local want=0
  case $1 in mux|newflows) want=1 ;; esac
  enter_dsr_phase "$1"
  enter_vm_sink_phase "$1"
  if [ $want = 1 ] && [ $MUX_PHASE_ACTIVE = 0 ]; then
    nsx "$NS_HOST" nft -f - <<'EOF'
table inet slbx_bench {
  chain input {
    type filter hook input priority -20; policy accept;
    udp dport 4789 counter drop comment "send-paths.sh: the MUX phase only counts what arrives"
  }
}
EOF
    MUX_PHASE_ACTIVE=1
  elif [ $want = 0 ] && [ $MUX_PHASE_ACTIVE = 1 ]; then
    nsx "$NS_HOST" nft delete table inet slbx_bench
    MUX_PHASE_ACTIVE=0
  fi
}

# The host agent phase counts at the backend's interface; the backend drops the datagrams right there
# (prerouting, after the count), so its kernel does not look for a socket or try an ICMP port
# unreachable for each one on the CPU that delivered them (the process under test's).
VM_SINK_ACTIVE=0
enter_vm_sink_phase() {
  local want=0
  # the DSR phase too: the seed's client packets reach the backend (no ICMP port unreachable for them)
  case $1 in host-agent|dsr) want=1 ;; esac
  if [ $want = 1 ] && [ $VM_SINK_ACTIVE = 0 ]; then
    nsx "$NS_VM" nft -f - <<'EOF'
table inet slbx_bench_vm {
  chain prerouting {
    type filter hook prerouting priority -300; policy accept;
    udp dport 7 counter drop comment "send-paths.sh: the host agent phase only counts what arrives"
  }
}
EOF
    VM_SINK_ACTIVE=1
  elif [ $want = 0 ] && [ $VM_SINK_ACTIVE = 1 ]; then
    nsx "$NS_VM" nft delete table inet slbx_bench_vm
    VM_SINK_ACTIVE=0
  fi
}

# The DSR phase counts the replies arriving at the router's fabric interface; the router drops them in
# its forward hook (after the count), so the client's kernel never answers them.
DSR_PHASE_ACTIVE=0
enter_dsr_phase() {
  if [ "$1" = dsr ] && [ $DSR_PHASE_ACTIVE = 0 ]; then
    nsx "$NS_ROUTER" nft -f - <<EOF
table inet slbx_bench_dsr {
  chain forward {
    type filter hook forward priority -20; policy accept;
    ip daddr 198.51.100.0/24 udp sport 7 counter drop comment "send-paths.sh: the DSR phase only counts what arrives"
  }
}
EOF
    DSR_PHASE_ACTIVE=1
  elif [ "$1" != dsr ] && [ $DSR_PHASE_ACTIVE = 1 ]; then
    nsx "$NS_ROUTER" nft delete table inet slbx_bench_dsr
    DSR_PHASE_ACTIVE=0
  fi
}

variant_up() { # VARIANT ROUND
  local v r=$2
  v=$(base_of "$1")
  case $v in
    kernel-forward)
      nsx "$NS_MUX" sysctl -qw net.ipv4.ip_forward=1
      ip -n "$NS_MUX" route add "$VIP/32" via "$HOST_PA" ;;
    kernel-vxlan)
      ip -n "$NS_MUX" link add vx0 type vxlan id 5001 local "$MUX_PA" remote "$HOST_PA" dstport 4789 dev f0
      ip -n "$NS_MUX" link set vx0 up
      ip -n "$NS_MUX" route add "$VIP/32" dev vx0
      # the inner destination MAC: the nic's, as the MUX writes it
      ip -n "$NS_MUX" neigh replace "$VIP" lladdr "$MAC_NIC" dev vx0 nud permanent
      nsx "$NS_MUX" sysctl -qw net.ipv4.ip_forward=1 ;;
    mux-cap|mux-raw|mux-udp)
      local path=${v#mux-} ready='"ready":true'
      [ "$path" = udp ] && ready='"ready":true.*"connected":true'
      start_daemon "$NS_MUX" "$MUX_STATUS" "$OUT/logs/$1-r$r.log" "$ready" \
        dist/mux/main.js --config "$CFG" --name mux1 --interface f0 --send-path "$path" --status "$MUX_STATUS" ;;
    mux-ring)
      start_daemon "$NS_MUX" "$MUX_STATUS" "$OUT/logs/$1-r$r.log" '"ready":true.*"io":"ring"' \
        dist/mux/main.js --config "$CFG" --name mux1 --interface f0 --send-path cap --io ring --status "$MUX_STATUS" ;;
    mux-ring-w2)
      DAEMON_CPUS=0-$(($(nproc) - 1)) start_daemon "$NS_MUX" "$MUX_STATUS" "$OUT/logs/$1-r$r.log" '"ready":true.*"io":"ring"' \
        dist/mux/main.js --config "$CFG" --name mux1 --interface f0 --send-path cap --io ring --workers 2 --status "$MUX_STATUS" ;;
    kernel-vxlan-decap)
      # the device's MAC must be the inner destination MAC, or it drops the frames
      ip -n "$NS_HOST" link add vx0 address "$MAC_NIC" type vxlan id 5001 local "$HOST_PA" dstport 4789 dev f0 nolearning
      nsx "$NS_HOST" sysctl -qw net.ipv4.conf.vx0.rp_filter=0
      ip -n "$NS_HOST" link set vx0 up
      ip -n "$NS_HOST" route add "$VIP/32" via "$DIP" dev h1vm1 onlink
      ip -n "$NS_HOST" neigh replace "$DIP" lladdr "$MAC_NIC" dev h1vm1 nud permanent
      nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=1 ;;
    agent-capture|agent-udp)
      start_daemon "$NS_HOST" "$HOST_STATUS" "$OUT/logs/$1-r$r.log" '"ready":true' \
        dist/host-agent/main.js --config "$CFG" --name host1 --interface f0 --receive-path "${v#agent-}" --status "$HOST_STATUS" ;;
    agent-ring)
      start_daemon "$NS_HOST" "$HOST_STATUS" "$OUT/logs/$1-r$r.log" '"ready":true.*"io":"ring"' \
        dist/host-agent/main.js --config "$CFG" --name host1 --interface f0 --receive-path capture --io ring --status "$HOST_STATUS" ;;
    agent-ring-w2)
      DAEMON_CPUS=0-$(($(nproc) - 1)) start_daemon "$NS_HOST" "$HOST_STATUS" "$OUT/logs/$1-r$r.log" '"ready":true.*"io":"ring"' \
        dist/host-agent/main.js --config "$CFG" --name host1 --interface f0 --receive-path capture --io ring --workers 2 --status "$HOST_STATUS" ;;
    agent-dsr-ring)
      start_daemon "$NS_HOST" "$HOST_STATUS" "$OUT/logs/$1-r$r.log" '"ready":true.*"io":"ring"' \
        dist/host-agent/main.js --config "$CFG_DSR" --name host1 --interface f0 --receive-path capture --io ring --status "$HOST_STATUS"
      seed_dsr "$1" "$r" ;;
    agent-dsr)
      start_daemon "$NS_HOST" "$HOST_STATUS" "$OUT/logs/$1-r$r.log" '"ready":true' \
        dist/host-agent/main.js --config "$CFG_DSR" --name host1 --interface f0 --receive-path capture --status "$HOST_STATUS"
      seed_dsr "$1" "$r" ;;
    kernel-forward-return)
      nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=1 ;;
    *) e2e_variant_up "$1" "$r" ;;
  esac
}

# a counter of the daemon's /status (0 when absent); FILE instead of asking it: from that saved /status
counter_of() { # NAME [FILE]
  local s
  if [ -n "${2:-}" ]; then s=$(cat "$2" 2>/dev/null || true); else s=$(status_of 5 2>/dev/null || true); fi
  printf '%s' "$s" | tr -d ' \n' | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2 | grep . || echo 0
}

# seed_dsr VARIANT ROUND: the DSR variants' flows recorded by the host agent before any reply (see the
# header). The seed sends each flow's client packet once, at 10,000 packets/s; when the agent's capture
# lost some (a busy machine), every flow is sent again at 5,000 packets/s (a flow already recorded is only
# refreshed), up to 4 sends; the run fails when flows are still missing.
DSR_SEED_FLOWS=0 DSR_SEED_LEARNED=0 DSR_SEED_SENDS=0 DSR_UNSOLICITED0=0
seed_dsr() {
  local v=$1 r=$2 out flows=0 learned=0 prev same i k
  DSR_SEED_SENDS=0
  if [ "${SEND_PATHS_DSR_SEED:-1}" = 0 ]; then
    log "warning: SEND_PATHS_DSR_SEED=0: $v round $r without the seed: the host agent drops the replies as unsolicited"
    DSR_SEED_FLOWS=0 DSR_SEED_LEARNED=0
    DSR_UNSOLICITED0=$(counter_of drop_out_dsr_unsolicited)
    return 0
  fi
  for k in 1 2 3 4; do
    DSR_SEED_SENDS=$k
    out=$(nsx "$NS_MUX" taskset -c "$GEN_CPU" node dist/scripts/bench/send-paths.js seed --interface f0 --mux-mac "$MAC_MUX" \
      --host-mac "$MAC_HOST" --nic-mac "$MAC_NIC" --rate $([ "$k" = 1 ] && echo 10000 || echo 5000) 2>&1) || die "the DSR seed failed: $out"
    printf '%s\n' "$out" >>"$OUT/logs/seed-$v-r$r.log"
    flows=$(printf '%s' "$out" | grep -o '"flows":[0-9]*' | cut -d: -f2)
    [ -n "$flows" ] || die "the DSR seed said no flow count: $out"
    # the agent may still be draining its capture: wait until its count stops moving for 2 s (up to 30 s)
    prev=-1 same=0
    for i in $(seq 1 60); do
      learned=$(counter_of dsr_flows_learned)
      [ "$learned" -ge "$flows" ] && break
      if [ "$learned" = "$prev" ]; then same=$((same + 1)); [ $same -lt 4 ] || break; else same=0; fi
      prev=$learned
      sleep 0.5
    done
    [ "$learned" -lt "$flows" ] || break
    log "$v round $r: the seed's send $k: the host agent recorded $learned of $flows flows; sending again"
  done
  [ "$learned" -ge "$flows" ] || die "the DSR seed: the host agent recorded $learned of $flows flows after $DSR_SEED_SENDS sends (dsr_flows_full $(counter_of dsr_flows_full); logs: $OUT/logs)"
  DSR_SEED_FLOWS=$flows DSR_SEED_LEARNED=$learned
  DSR_UNSOLICITED0=$(counter_of drop_out_dsr_unsolicited)
}

# dsr_seed_note VARIANT ROUND: after the run, from its saved /status: the replies dropped as unsolicited
# over the warm-up and the measured seconds (0 when every reply's flow was recorded), in dsr-seed.tsv
dsr_seed_note() {
  local v=$1 r=$2 f=$OUT/status/$1-r$2.json u1
  [ -s "$f" ] || die "no /status after the run: the DSR seed cannot be checked"
  u1=$(counter_of drop_out_dsr_unsolicited "$f")
  [ -s "$OUT/dsr-seed.tsv" ] || printf 'variant\tround\tflows\tlearned\tseed_sends\tunsolicited_during_run\n' >"$OUT/dsr-seed.tsv"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$v" "$r" "$DSR_SEED_FLOWS" "$DSR_SEED_LEARNED" "$DSR_SEED_SENDS" "$((u1 - DSR_UNSOLICITED0))" >>"$OUT/dsr-seed.tsv"
  log "$v round $r: seed: $DSR_SEED_LEARNED of $DSR_SEED_FLOWS flows recorded ($DSR_SEED_SENDS send(s)); replies dropped as unsolicited during the run: $((u1 - DSR_UNSOLICITED0))"
}

variant_down() { # VARIANT ROUND
  local v r=$2
  v=$(base_of "$1")
  case $v in
    kernel-forward)
      ip -n "$NS_MUX" route del "$VIP/32"
      nsx "$NS_MUX" sysctl -qw net.ipv4.ip_forward=0 ;;
    kernel-vxlan)
      ip -n "$NS_MUX" link del vx0
      nsx "$NS_MUX" sysctl -qw net.ipv4.ip_forward=0 ;;
    kernel-vxlan-decap)
      ip -n "$NS_HOST" route del "$VIP/32"
      ip -n "$NS_HOST" neigh del "$DIP" dev h1vm1
      ip -n "$NS_HOST" link del vx0
      nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=0 ;;
    kernel-forward-return)
      nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=0 ;;
    mux-*|agent-*)
      kill -0 "$DAEMON_PID" 2>/dev/null || die "$1 round $r: the daemon died during the run (log: $OUT/logs/$1-r$r.log)"
      # its counters after the run (it may still be draining its capture buffer: give it time)
      status_of 10 >"$OUT/status/$1-r$r.json" 2>/dev/null || log "$1 round $r: no status"
      stop_daemon ;;
    *) e2e_variant_down "$1" "$r" ;;
  esac
}

counter() { nsx "$1" cat "/sys/class/net/$2/statistics/$3"; }
now_ns() { date +%s%N; }
# "user system softirq idle steal" of one CPU, in clock ticks, from /proc/stat
cpu_ticks() { awk -v c="cpu$1" '$1 == c { print $2 + $3, $4, $8, $5 + $6, $9 }' /proc/stat; }
# utime + stime of a process, in clock ticks (0 when there is none)
proc_ticks() { if [ -n "$1" ] && [ -r "/proc/$1/stat" ]; then awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; else echo 0; fi; }
# percentages of the interval: "user system softirq idle steal" of CPU $1 between two cpu_ticks samples
cpu_share() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); t = 0; for (i = 1; i <= 5; i++) { d[i] = y[i] - x[i]; t += d[i] }
  if (t <= 0) t = 1; printf "%.0f/%.0f/%.0f/%.0f/%.0f", 100*d[1]/t, 100*d[2]/t, 100*d[3]/t, 100*d[4]/t, 100*d[5]/t }'; }

printf 'phase\tvariant\tround\tseconds\tdelivered\tdelivered_pps\toffered\toffered_pps\tgen_cpu_usr_sys_sirq_idle_steal\tdut_cpu_usr_sys_sirq_idle_steal\tdut_process_cpu_pct\tloadavg_1m\n' >"$OUT/runs.tsv"

run_variant() { # VARIANT ROUND
  local v=$1 r=$2 phase gen_ns gen_if cfg rx_ns rx_if sz pace=''
  phase=$(phase_of "$v")
  sz=$(size_of "$v")
  enter_phase "$(base_phase_of "$v")"
  case $(base_phase_of "$v") in
    mux) gen_ns=$NS_GEN gen_if=eth0 cfg=$OUT/client-$sz.trafgen rx_ns=$NS_HOST rx_if=f0 ;;
    host-agent) gen_ns=$NS_MUX gen_if=f0 cfg=$OUT/vxlan-$sz.trafgen rx_ns=$NS_VM rx_if=eth0 ;;
    dsr) gen_ns=$NS_VM gen_if=eth0 cfg=$OUT/reply-$sz.trafgen rx_ns=$NS_ROUTER rx_if=f0 pace=$DSR_RATE ;;
    *) run_e2e_variant "$v" "$r"; return ;;
  esac
  variant_up "$v" "$r"
  local dump_pid=''
  if [ "$r" = 1 ] && [ "${NO_WIRE:-0}" = 0 ]; then
    ip netns exec "$rx_ns" tcpdump -i "$rx_if" -Q in -n -c 2000 -s 2048 -Z root -w "$OUT/wire/$v.pcap" >"$OUT/logs/tcpdump-$v.log" 2>&1 &
    dump_pid=$!
    PIDS+=("$dump_pid")
    local i
    for i in $(seq 1 50); do grep -q 'listening on' "$OUT/logs/tcpdump-$v.log" 2>/dev/null && break; sleep 0.05; done
  fi
  start_trafgen "$gen_ns" "$gen_if" "$cfg" "$OUT/logs/trafgen-$v-r$r.log" "$pace"
  sleep "$WARMUP"
  # the wire sample is taken in the warm-up only (2000 packets take milliseconds)
  [ -z "$dump_pid" ] || stop_pid "$dump_pid" TERM
  local t0a t0b t1a t1b d0 d1 o0 o1 g0 g1 u0 u1 p0 p1 dut=''
  case $v in mux-*|agent-*) dut=$DAEMON_PID ;; esac
  t0a=$(now_ns); d0=$(counter "$rx_ns" "$rx_if" rx_packets); o0=$(counter "$gen_ns" "$gen_if" tx_packets); t0b=$(now_ns)
  g0=$(cpu_ticks "$GEN_CPU"); u0=$(cpu_ticks "$DUT_CPU"); p0=$(proc_ticks "$dut")
  local perf_pid=''
  if [ "$PERF" = 1 ] && [ "$r" = 1 ] && [ -n "$dut" ]; then
    # a CPU profile of the process under test over the measured seconds: kernel and JIT symbols
    perf record -q -e cpu-clock -F 2000 -g -p "$dut" -o "$OUT/perf/$v.data" -- sleep "$SECONDS_MEASURED" >"$OUT/logs/perf-$v.log" 2>&1 &
    perf_pid=$!
    PIDS+=("$perf_pid")
  fi
  sleep "$SECONDS_MEASURED"
  t1a=$(now_ns); d1=$(counter "$rx_ns" "$rx_if" rx_packets); o1=$(counter "$gen_ns" "$gen_if" tx_packets); t1b=$(now_ns)
  g1=$(cpu_ticks "$GEN_CPU"); u1=$(cpu_ticks "$DUT_CPU"); p1=$(proc_ticks "$dut")
  [ -z "$perf_pid" ] || wait "$perf_pid" 2>/dev/null || true
  kill -0 "$TG_PID" 2>/dev/null || die "trafgen exited during the run: $(trafgen_said "$OUT/logs/trafgen-$v-r$r.log")"
  stop_trafgen
  if [ -n "$perf_pid" ]; then
    perf report -i "$OUT/perf/$v.data" --stdio --no-children -g none --sort dso,sym --percent-limit 0.5 2>/dev/null \
      | grep '%' | head -60 >"$OUT/perf/$v.txt" || true
    perf report -i "$OUT/perf/$v.data" --stdio --no-children -g none --sort dso 2>/dev/null | grep '%' | head -15 >"$OUT/perf/$v-dso.txt" || true
  fi
  variant_down "$v" "$r"
  case $(base_of "$v") in agent-dsr|agent-dsr-ring) dsr_seed_note "$v" "$r" ;; esac
  local dt_ns=$(( (t1a + t1b) / 2 - (t0a + t0b) / 2 ))
  local delivered=$((d1 - d0)) offered=$((o1 - o0))
  local dpps=$(( delivered * 1000000000 / dt_ns )) opps=$(( offered * 1000000000 / dt_ns ))
  # a run that offered or delivered nothing is a failed run, not a row of zeros
  [ "$offered" -gt 0 ] || die "the generator offered nothing: $(trafgen_said "$OUT/logs/trafgen-$v-r$r.log")"
  [ "$delivered" -gt 0 ] || die "delivered nothing of $offered offered (logs: $OUT/logs)"
  local secs gshare ushare ppct
  secs=$(awk -v n="$dt_ns" 'BEGIN { printf "%.3f", n / 1e9 }')
  gshare=$(cpu_share "$g0" "$g1")
  ushare=$(cpu_share "$u0" "$u1")
  ppct=$(awk -v a="$p0" -v b="$p1" -v hz="$(getconf CLK_TCK)" -v n="$dt_ns" 'BEGIN { printf "%.0f", 100 * (b - a) / hz / (n / 1e9) }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$v" "$r" "$secs" "$delivered" "$dpps" "$offered" "$opps" "$gshare" "$ushare" "$ppct" "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/runs.tsv"
  log "$(printf '%-19s round %s: %8s pps delivered (%8s offered) over %s s; cpu%s %s, cpu%s %s (usr/sys/softirq/idle/steal %%), process %s %%' \
    "$v" "$r" "$dpps" "$opps" "$secs" "$GEN_CPU" "$gshare" "$DUT_CPU" "$ushare" "$ppct")"
}

write_meta() {
  local variants_json='' v what base first=1
  for v in "${VARIANTS[@]}"; do
    case $(base_of "$v") in
      kernel-forward) what='kernel IP forwarding in the mux namespace, no encapsulation'; base=true ;;
      kernel-vxlan) what='kernel VXLAN device in the mux namespace encapsulating to the host PA'; base=true ;;
      mux-cap) what='slbx-mux --send-path cap: capture in, whole frame out with pcap_sendpacket'; base=false ;;
      mux-raw) what='slbx-mux --send-path raw: capture in, outer IPv4 onwards on an IPPROTO_RAW socket'; base=false ;;
      mux-udp) what='slbx-mux --send-path udp: capture in, VXLAN onwards on a connected UDP socket'; base=false ;;
      kernel-vxlan-decap) what='kernel VXLAN device in the host namespace decapsulating, routed to the backend'; base=true ;;
      agent-capture) what='slbx-host-agent --receive-path capture: pcap in (+ nftables drop), NAT, pcap_sendpacket to the port'; base=false ;;
      agent-udp) what='slbx-host-agent --receive-path udp: UDP socket in, NAT, pcap_sendpacket to the port'; base=false ;;
      mux-ring) what='slbx-mux --io ring: packet ring in, one JS call per batch, whole frames out with one sendmmsg per batch'; base=false ;;
      mux-ring-w2) what='slbx-mux --io ring --workers 2 on every CPU (the generator CPU too): PACKET_FANOUT hash over two worker threads'; base=false ;;
      agent-ring) what='slbx-host-agent --io ring: packet ring in (+ nftables drop), NAT, batched sendmmsg to the port'; base=false ;;
      agent-ring-w2) what='slbx-host-agent --io ring --workers 2 on every CPU (the generator CPU too): PACKET_FANOUT_CBPF over two worker threads'; base=false ;;
      kernel-forward-return) what='kernel IP forwarding of the replies in the host namespace, no NAT'; base=true ;;
      agent-dsr) what='slbx-host-agent (pcap): capture on the port, NAT to the VIP, raw socket to the router (DSR)'; base=false ;;
      agent-dsr-ring) what='slbx-host-agent --io ring: packet ring on the port, NAT to the VIP, batched raw-socket sendmmsg (DSR)'; base=false ;;
      tcp-direct) what='iperf3 client -> backend by plain routing (router -> host forwarding -> backend)'; base=true ;;
      tcp-pcap) what='iperf3 client -> VIP -> slbx-mux -> slbx-host-agent -> backend, replies by DSR (pcap)'; base=false ;;
      tcp-ring) what='the same through the VIP with --io ring on both daemons'; base=false ;;
      rr-direct) what='request/response client -> backend by plain routing'; base=true ;;
      rr-pcap) what='request/response through the VIP (pcap)'; base=false ;;
      tcp-ring-w2) what='the same with --io ring --workers 2 on both daemons, each on every CPU (the client and servers CPU too)'; base=false ;;
      rr-ring) what='request/response through the VIP (--io ring)'; base=false ;;
      rr-ring-w2) what='request/response through the VIP (--io ring --workers 2 on both daemons, on every CPU)'; base=false ;;
      newflows-pcap) what='slbx-mux (pcap), every packet a new flow, at paced offered rates'; base=false ;;
      newflows-ring) what='slbx-mux --io ring, every packet a new flow, at paced offered rates'; base=false ;;
      cp-propagation) what='a backend weight changed at the controller API until both MUXes applied it'; base=false ;;
    esac
    [ $first = 1 ] || variants_json+=','
    first=0
    variants_json+=$(printf '\n    {"variant": "%s", "phase": "%s", "what": "%s", "baseline": %s}' "$v" "$(phase_of "$v")" "$what" "$base")
  done
  local cpu sz baselines='' sfx
  cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
  for sz in "${SIZES[@]}"; do
    sfx=''
    [ "$sz" = 64 ] || sfx="@$sz"
    baselines+=$(printf '"mux%s": ["kernel-forward%s", "kernel-vxlan%s"], "host-agent%s": ["kernel-vxlan-decap%s"], "dsr%s": ["kernel-forward-return%s"], ' \
      "$sfx" "$sfx" "$sfx" "$sfx" "$sfx" "$sfx" "$sfx")
  done
  cat >"$OUT/meta.json" <<EOF
{
  "bench": "send-paths",
  "started": "$STAMP",
  "loadavgAtStart": "$(cat /proc/loadavg)",
  "frameSizes": [$(IFS=,; echo "${SIZES[*]}")],
  "setup": "$RUNS runs per variant (interleaved), ${WARMUP} s warm-up + ${SECONDS_MEASURED} s measured each; $(IFS=/; echo "${SIZES[*]}")-byte UDP client frames from random source ports (114-byte VXLAN frames in the host agent phase); trafgen on CPU $GEN_CPU, the process under test on CPU $DUT_CPU; $([ "$RPS" = 1 ] && echo "RPS: the mux's and the host's fabric interfaces' receive processing on CPU $DUT_CPU" || echo "no RPS: receive processing in the sender's CPU")$([ -z "$DSR_RATE" ] || echo "; the DSR phase's generator paced at $DSR_RATE packets/s"); delivered = rx_packets delta of the receiving interface",
  "dsrRatePps": $([ -n "$DSR_RATE" ] && echo "$DSR_RATE" || echo null),
  "runsPerVariant": $RUNS,
  "warmupS": $WARMUP,
  "measuredS": $SECONDS_MEASURED,
  "generatorCpu": $GEN_CPU,
  "dutCpu": $DUT_CPU,
  "rps": $([ "$RPS" = 1 ] && echo true || echo false),
  "machine": {"kernel": "$(uname -r)", "cpus": $NCPU, "cpu": "${cpu//\"/}", "node": "$(node --version)", "trafgen": "$(trafgen -v 2>/dev/null | head -1 | sed 's/"//g')"},
  "counted": {"mux": "rx_packets of the host namespace's fabric interface", "host-agent": "rx_packets of the backend namespace's interface", "dsr": "rx_packets of the router's fabric interface"},
  "baselines": {${baselines}"tcp": ["tcp-direct"], "latency": ["rr-direct"], "newflows": [], "control": []},
  "variants": [$variants_json
  ]
}
EOF
}

# variant_reset VARIANT: after a failed run, undo whatever variant_up (and the e2e phases) may have left
# in the namespaces, ignoring what is not there (the daemons and generators died with the run's subshell)
variant_reset() {
  set +e
  case $(base_of "$1") in
    kernel-forward|kernel-vxlan)
      ip -n "$NS_MUX" route del "$VIP/32" 2>/dev/null
      ip -n "$NS_MUX" link del vx0 2>/dev/null
      nsx "$NS_MUX" sysctl -qw net.ipv4.ip_forward=0 ;;
    kernel-vxlan-decap)
      ip -n "$NS_HOST" route del "$VIP/32" 2>/dev/null
      ip -n "$NS_HOST" neigh del "$DIP" dev h1vm1 2>/dev/null
      ip -n "$NS_HOST" link del vx0 2>/dev/null
      nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=0 ;;
    kernel-forward-return)
      nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=0 ;;
    tcp-*|rr-*)
      ip -n "$NS_ROUTER" route del 192.0.2.0/24 2>/dev/null
      ip -n "$NS_HOST" addr del 192.0.2.1/24 dev h1vm1 2>/dev/null
      nsx "$NS_HOST" sysctl -qw net.ipv4.ip_forward=0
      ip -n "$NS_VM" route del default 2>/dev/null ;;
    cp-*)
      ip -n "$NS_MUX" addr del "$MUX2_PA/24" dev f0 2>/dev/null ;;
  esac
  set -e
}

# run_isolated VARIANT ROUND: one run in a subshell of its own, so that a failure (die, or any failing
# command under set -e) ends that run alone: the subshell records why (failures.tsv), stops every process
# the run started (by PID) and undoes the variant; then the next run starts. The phase's nftables rules
# are set here, in this shell, which keeps their state.
run_isolated() {
  local v=$1 r=$2 rc=0 before after
  enter_phase "$(base_phase_of "$v")"
  before=$(wc -l <"$OUT/failures.tsv")
  set +e
  (
    set -e
    RUN_ID="$(phase_of "$v") $v $r"
    N0=${#PIDS[@]}
    run_exit() {
      local rc=$? i pid
      set +e
      trap - EXIT INT TERM
      for pid in "${PIDS[@]:$N0}"; do kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null; done
      for i in $(seq 1 50); do
        local alive=0
        for pid in "${PIDS[@]:$N0}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
      done
      for pid in "${PIDS[@]:$N0}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; done
      for pid in "${PIDS[@]:$N0}"; do rm -f "/tmp/perf-$pid.map"; done
      [ $rc = 0 ] || variant_reset "$v"
      exit $rc
    }
    trap run_exit EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    run_variant "$v" "$r"
  ) &
  RUN_PID=$!
  wait "$RUN_PID" || rc=$?
  RUN_PID=''
  set -e
  after=$(wc -l <"$OUT/failures.tsv")
  if [ $rc != 0 ] && [ "$after" = "$before" ]; then
    # a command failed under set -e without a reason of ours: say where to look
    RUN_ID="$(phase_of "$v") $v $r" note_failure '' "the run stopped (exit $rc) on a failing command; its error is in the output above this line"
  fi
  return 0
}

# the end-to-end phases (tcp-*, rr-*, newflows-*): e2e_variant_up, e2e_variant_down, run_e2e_variant
# shellcheck source=e2e-phases.sh
source "$ROOT/scripts/bench/e2e-phases.sh"

# ---- main -------------------------------------------------------------------------------------------
build_topology
write_files
write_meta
# one phase after the other in each round (MUX-phase variants first), so the nftables rules change a few
# times a round, not every run
ORDERED=()
for ph in mux newflows host-agent dsr tcp latency control; do
  for v in "${VARIANTS[@]}"; do [ "$(base_phase_of "$v")" = $ph ] && ORDERED+=("$v"); done
done
[ $E2E = 0 ] || e2e_init
printf 'phase\tvariant\tround\tcase\treason\n' >"$OUT/failures.tsv"
for r in $(seq 1 "$RUNS"); do
  for v in "${ORDERED[@]}"; do run_isolated "$v" "$r"; done
done
enter_phase none
if grep -q . <(tail -n +2 "$OUT/runs.tsv"); then node dist/scripts/bench/send-paths.js report --dir "$OUT"; fi
[ $E2E = 0 ] || node dist/scripts/bench/report.js e2e --dir "$OUT"
echo "results: $OUT"
NFAILED=$(tail -n +2 "$OUT/failures.tsv" | grep -c . || true)
if [ "$NFAILED" -gt 0 ]; then
  log "$NFAILED failed measurement(s), recorded in $OUT/failures.tsv (and results.json, results.md):"
  tail -n +2 "$OUT/failures.tsv" | awk -F'\t' '{ printf "[send-paths]   %s %s round %s%s: %s\n", $1, $2, $3, ($4 == "-" ? "" : " " $4), $5 }' >&2
  exit 3
fi
