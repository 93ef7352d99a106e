#!/usr/bin/env bash
# scripts/bench/io-probe/run.sh: the I/O layer alone (issue 19, the per-core path): frames/s and CPU per
# frame of three ways to receive a frame and send it back (io-probe.c: mmsg = what native/slbx_ring.c does,
# txring = a PACKET_MMAP TX ring, xdp = AF_XDP in copy mode) against the kernel doing the same in its
# softirq (kernel = IP forwarding back out of the interface the frame came in on: no process at all),
# then the round-trip latency through the probe at a low rate with and without a bounded spin on the
# receive ring. docs/io-paths.md records the results.
#
#   gen (g0) ──veth── dut (d0): trafgen in gen, pinned to CPU 0, sends 64-byte IPv4/UDP frames (random
#   source port) to d0; the probe in dut, pinned to CPU 1, sends each back out of d0 with its MACs swapped.
#   d0's receive processing is steered to CPU 1 (RPS), so the probe's core pays for the kernel's receive
#   work too (the fair layout of send-paths.sh --rps); the frames sent back are received by g0 in the
#   probe's send call, on CPU 1 as well. Forwarded = delta of g0's rx_packets, offered = of its tx_packets
#   (both read from the kernel). The frames go to 198.18.0.99, which nobody has: dut drops them in IP (no
#   addresses, no forwarding) and gen at g0's ingress hook (nftables, after the count), so nothing answers.
#
# options:
#   --rounds N         interleaved rounds (round 1 of every variant, then round 2, ...; default 5)
#   --seconds S        measured seconds per run, after 1 s of warm-up (default 5)
#   --variants LIST    comma-separated, from kernel, mmsg, mmsg-drop, txring, xdp, xdp-drv (default mmsg,txring,xdp)
#                      kernel: no probe; dut's IP stack forwards each frame back to gen (198.18.0.99 routed
#                      via 198.18.0.1 out of d0, a permanent neighbour, no redirects, TTL decremented): the
#                      floor a user-space forwarder on this core is held against (its CPU is CPU 1's softirq)
#   --latency LIST     ping-pong variants MODE:SPIN_US (default mmsg:0,mmsg:50,xdp:0,xdp:50; "" for none)
#   --pings N          ping-pong frames per latency run, one per ms (default 2000)
#   --out DIR          results folder (default results/io-probe-<UTC timestamp>/)
# Results: runs.tsv, latency.tsv and summary.txt (medians with min-max) in the folder.
# Needs root, ip, nft, trafgen (netsniff-ng), taskset, cc, bc, 2 CPUs (AF_XDP: libxdp-dev, libbpf-dev). Its
# namespaces are slbx-hP-<random>-gen and -dut (addresses only from 198.18.0.0/15); a trap stops what it
# started (by PID) and deletes them.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
ROUNDS=5 SECONDS_RUN=5 VARIANTS=mmsg,txring,xdp LATENCY=mmsg:0,mmsg:50,xdp:0,xdp:50 PINGS=2000
OUT=$ROOT/results/io-probe-$(date -u +%Y%m%dT%H%M%SZ)
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --variants) VARIANTS=$2; shift 2 ;;
    --latency) LATENCY=$2; shift 2 ;;
    --pings) PINGS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
done
case ",$LATENCY," in *,kernel:*) echo "run.sh: --latency: kernel forwarding changes the TTL, so the echo client cannot match its frames; the kernel is a --variants entry only" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (network namespaces)" >&2; exit 2; }
for t in ip nft trafgen taskset cc bc; do command -v $t >/dev/null || { echo "run.sh: needs $t" >&2; exit 2; }; done
mkdir -p "$OUT/logs"
BIN=$OUT/io-probe
bash "$ROOT/scripts/bench/io-probe/build.sh" "$BIN" >"$OUT/logs/build.log"
TG_PRELOAD=''
if cc -shared -fPIC -O2 -o "$OUT/trafgen-sndbuf.so" "$ROOT/scripts/bench/trafgen-sndbuf.c" -ldl 2>>"$OUT/logs/build.log"; then
  TG_PRELOAD=$OUT/trafgen-sndbuf.so
fi

P=slbx-hP-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
GEN=$P-gen DUT=$P-dut
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$GEN" 2>/dev/null || true
  ip netns del "$DUT" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$GEN"
ip netns add "$DUT"
ip link add g0 netns "$GEN" type veth peer name d0 netns "$DUT"
for ns in "$GEN" "$DUT"; do ip -n "$ns" link set lo up; done
ip -n "$GEN" link set g0 up
ip -n "$DUT" link set d0 up
ip netns exec "$DUT" sh -c 'echo 2 > /sys/class/net/d0/queues/rx-0/rps_cpus'
# the frames sent back end at g0's ingress hook (nftables netdev, after the interface counted them and
# the packet taps saw them, before IP): their routing and drop in gen's IP stack would otherwise be paid on
# CPU 1, the same for every variant
ingress_drop() { # NS DEV
  ip netns exec "$1" nft add table netdev iodrop
  ip netns exec "$1" nft add chain netdev iodrop in "{ type filter hook ingress device $2 priority 0; policy drop; }"
}
ingress_drop "$GEN" g0
# IPv6 off: no router solicitations or DAD frames in the counts
ip netns exec "$GEN" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.g0.disable_ipv6=1
ip netns exec "$DUT" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.d0.disable_ipv6=1
GMAC=$(ip netns exec "$GEN" cat /sys/class/net/g0/address)
DMAC=$(ip netns exec "$DUT" cat /sys/class/net/d0/address)

# the trafgen frame: Ethernet g0 -> d0, IPv4 198.18.0.1 -> 198.18.0.99 (checksum computed here), UDP random
# source port -> 7, 22 bytes of zeros: 64 bytes
hexbytes() { echo "$1" | tr ':' ' '; }
ip_hdr=(45 00 00 32 00 00 00 00 40 11 00 00 c6 12 00 01 c6 12 00 63)
sum=0
for ((i = 0; i < 20; i += 2)); do sum=$((sum + 0x${ip_hdr[i]}${ip_hdr[i + 1]})); done
while [ $sum -gt 65535 ]; do sum=$(((sum & 0xffff) + (sum >> 16))); done
csum=$((~sum & 0xffff))
ip_hdr[10]=$(printf '%02x' $((csum >> 8)))
ip_hdr[11]=$(printf '%02x' $((csum & 0xff)))
{
  printf '{ '
  for b in $(hexbytes "$DMAC") $(hexbytes "$GMAC") 08 00 "${ip_hdr[@]}"; do printf '0x%s, ' "$b"; done
  printf 'drnd(), drnd(), 0x00, 0x07, 0x00, 0x1e, 0x00, 0x00, '
  for i in $(seq 1 22); do printf '0x00%s' "$([ "$i" = 22 ] || echo ', ')"; done
  printf ' }\n'
} >"$OUT/frame.cfg"

stat_of() { [ -n "$1" ] && awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; } # utime + stime, ticks (no probe: 0)
cpu_of() { awk -v c="cpu$1" '$1 == c { print $2 + $3, $4, $7 + $8, $5 + $6, $9 }' /proc/stat; } # user system irq+softirq idle steal
counter() { ip netns exec "$GEN" cat "/sys/class/net/g0/statistics/$1"; }
HZ=$(getconf CLK_TCK)

# kernel: dut forwards the frames back by IP (set up for the run, undone after it)
kernel_forward() { # on|off
  local a=add
  if [ "$1" = on ]; then
    ip netns exec "$DUT" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.d0.send_redirects=0 \
      net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.d0.rp_filter=0
  else
    a=del
    ip netns exec "$DUT" sysctl -qw net.ipv4.ip_forward=0
  fi
  ip -n "$DUT" addr $a 198.18.0.2/24 dev d0
  [ $a = del ] || ip -n "$DUT" neigh replace 198.18.0.1 lladdr "$GMAC" dev d0 nud permanent
  [ $a = del ] || ip -n "$DUT" route replace 198.18.0.99/32 via 198.18.0.1 dev d0
}

start_probe() { # MODE SPIN LOG
  local mode=$1 attach=skb
  if [ "$mode" = kernel ]; then
    kernel_forward on
    PROBE=
    echo "kernel forwarding, no probe" >"$3"
    return 0
  fi
  [ "$mode" = xdp-drv ] && { mode=xdp; attach=drv; }
  # mmsg-drop: mmsg with d0's frames dropped at its ingress hook, after the packet socket's tap took its
  # copy, so dut's IP stack never sees them (what an AF_XDP redirect also saves)
  ip netns exec "$DUT" nft delete table netdev iodrop 2>/dev/null || true
  if [ "$mode" = mmsg-drop ]; then
    mode=mmsg
    ingress_drop "$DUT" d0
  fi
  # its own mount namespace (ip netns exec) with a bpffs, for libxdp's program
  ip netns exec "$DUT" sh -c 'mount -t bpf bpf /sys/fs/bpf 2>/dev/null; exec "$@"' sh \
    taskset -c 1 "$BIN" forward --iface d0 --mode "$mode" --xdp-attach "$attach" --spin-us "$2" >"$3" 2>&1 &
  PROBE=$!
  PIDS+=("$PROBE")
  local i
  for i in $(seq 1 100); do
    grep -q '^ready' "$3" && return 0
    kill -0 "$PROBE" 2>/dev/null || { echo "run.sh: the probe exited: $(tail -3 "$3")" >&2; exit 1; }
    sleep 0.1
  done
  echo "run.sh: the probe did not get ready in 10 s ($3)" >&2
  exit 1
}
# trafgen forks one worker; a background job ignores SIGINT, so both get SIGTERM, by PID
stop_trafgen() {
  local c kids
  kids=$(pgrep -P "$TG" || true)
  kill -TERM "$TG" $kids 2>/dev/null || true
  wait "$TG" 2>/dev/null || true
  for c in $kids; do while kill -0 "$c" 2>/dev/null; do sleep 0.1; done; done
}
stop_probe() {
  [ -n "$PROBE" ] || { kernel_forward off; return 0; }
  kill -TERM "$PROBE" 2>/dev/null || true
  wait "$PROBE" 2>/dev/null || true
}

printf 'round\tvariant\toffered_pps\tforwarded_pps\tprobe_cpu_pct\tcpu1_softirq_pct\tcpu0_softirq_pct\tcpu1_idle_pct\tprobe_ns_per_frame\tcpu1_softirq_ns_per_frame\ttotal_ns_per_frame\tcpu0_softirq_ns_per_frame\tprobe_counters\n' >"$OUT/runs.tsv"
IFS=, read -r -a VLIST <<<"$VARIANTS"
for r in $(seq 1 "$ROUNDS"); do
  for v in "${VLIST[@]}"; do
    log=$OUT/logs/$v-$r.log
    start_probe "$v" 0 "$log"
    ip netns exec "$GEN" env ${TG_PRELOAD:+LD_PRELOAD="$TG_PRELOAD"} taskset -c 0 trafgen --in "$OUT/frame.cfg" --out g0 --cpus 1 \
      --no-sock-mem --notouch-irq --no-cpu-stats >"$OUT/logs/trafgen-$v-$r.log" 2>&1 &
    TG=$!
    PIDS+=("$TG")
    sleep 1
    kill -0 "$TG" 2>/dev/null || { echo "run.sh: trafgen exited: $(tail -2 "$OUT/logs/trafgen-$v-$r.log")" >&2; exit 1; }
    tx0=$(counter tx_packets) rx0=$(counter rx_packets) p0=$(stat_of "$PROBE") c0=($(cpu_of 1)) g0=($(cpu_of 0)) t0=$(date +%s.%N)
    sleep "$SECONDS_RUN"
    tx1=$(counter tx_packets) rx1=$(counter rx_packets) p1=$(stat_of "$PROBE") c1=($(cpu_of 1)) g1=($(cpu_of 0)) t1=$(date +%s.%N)
    stop_trafgen
    stop_probe
    awk -v r="$r" -v v="$v" -v dt="$(echo "$t1 - $t0" | bc -l)" -v tx=$((tx1 - tx0)) -v rx=$((rx1 - rx0)) -v p=$((p1 - p0)) \
      -v sirq=$((c1[2] - c0[2])) -v gsirq=$((g1[2] - g0[2])) -v idle=$((c1[3] - c0[3])) -v hz="$HZ" -v cnt="$(tail -1 "$log" | tr ' ' '_')" 'BEGIN {
        ticks = dt * hz; fw = rx / dt
        pns = rx > 0 ? p / hz * 1e9 / rx : 0; sns = rx > 0 ? sirq / hz * 1e9 / rx : 0; gns = rx > 0 ? gsirq / hz * 1e9 / rx : 0
        printf "%d\t%s\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\n", r, v, tx / dt, fw, 100 * p / ticks, 100 * sirq / ticks,
          100 * gsirq / ticks, 100 * idle / ticks, pns, sns, pns + sns, gns, cnt }' >>"$OUT/runs.tsv"
    tail -1 "$OUT/runs.tsv"
  done
done

printf 'round\tmode\tspin_us\tpings\tlost\tp50_us\tp90_us\tp99_us\tmax_us\tprobe_cpu_pct\n' >"$OUT/latency.tsv"
if [ -n "$LATENCY" ]; then
  IFS=, read -r -a LLIST <<<"$LATENCY"
  for r in $(seq 1 "$ROUNDS"); do
    for l in "${LLIST[@]}"; do
      mode=${l%%:*} spin=${l##*:}
      log=$OUT/logs/lat-$mode-$spin-$r.log
      start_probe "$mode" "$spin" "$log"
      p0=$(stat_of "$PROBE") t0=$(date +%s.%N)
      res=$(ip netns exec "$GEN" taskset -c 0 "$BIN" echo --iface g0 --count "$PINGS" --interval-us 1000 --timeout-ms 200)
      p1=$(stat_of "$PROBE") t1=$(date +%s.%N)
      stop_probe
      # "rtt_us n N lost L p50 A p90 B p99 C max D"
      set -- $res
      printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\n' "$r" "$mode" "$spin" "$3" "$5" "$7" "$9" "${11}" "${13}" \
        "$(echo "100 * ($p1 - $p0) / ($HZ * ($t1 - $t0))" | bc -l)" >>"$OUT/latency.tsv"
      tail -1 "$OUT/latency.tsv"
    done
  done
fi

# medians with min-max per variant
summ() { # FILE KEYCOLS... : VALUE columns by name
  awk -F'\t' -v keys="$2" -v vals="$3" '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; nk = split(keys, K, ","); nv = split(vals, V, ","); next }
    { k = ""; for (i = 1; i <= nk; i++) k = k (i > 1 ? ":" : "") $(col[K[i]]); if (!(k in seen)) { seen[k] = 1; order[++n] = k }
      for (j = 1; j <= nv; j++) { c = ++cnt[k, j]; x[k, j, c] = $(col[V[j]]) } }
    END { for (o = 1; o <= n; o++) { k = order[o]; line = k
        for (j = 1; j <= nv; j++) { m = cnt[k, j]; delete a; for (i = 1; i <= m; i++) a[i] = x[k, j, i] + 0
          for (i = 2; i <= m; i++) { t = a[i]; for (q = i - 1; q >= 1 && a[q] > t; q--) a[q + 1] = a[q]; a[q + 1] = t }
          med = m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
          line = line sprintf("  %s %.1f (%.1f-%.1f)", V[j], med, a[1], a[m]) }
        print line } }' "$1"
}
{
  echo "forwarding (median (min-max) of $ROUNDS rounds, $SECONDS_RUN s each):"
  summ "$OUT/runs.tsv" variant offered_pps,forwarded_pps,probe_cpu_pct,cpu1_softirq_pct,probe_ns_per_frame,cpu1_softirq_ns_per_frame,total_ns_per_frame,cpu0_softirq_ns_per_frame
  if [ -n "$LATENCY" ]; then
    echo "ping-pong through the probe, one frame per ms (round trip, µs):"
    summ "$OUT/latency.tsv" mode,spin_us p50_us,p99_us,lost,probe_cpu_pct
  fi
} | tee "$OUT/summary.txt"
echo "results: $OUT"
