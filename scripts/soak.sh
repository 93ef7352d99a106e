#!/usr/bin/env bash
# The soak (docs/soak.md): a lab with an IPv4 and an IPv6 VIP behind 2 MUXes that announce them by BGP,
# mixed traffic at a bounded rate for DURATION (TCP and UDP, IPv4 and IPv6, a new connection per request,
# UDP flows, keep-alive connections opening and closing), one backend's HTTP server flapping every 30 s,
# one MUX restarting about every 2 minutes (every 15 s in runs shorter than 5 minutes), every daemon
# sampled each second. Then the judge (scripts/soak/judge.ts): zero failed requests but the predicted
# ones, resident memory after the warm-up at most 10 % up per daemon, no file descriptor growth.
#   scripts/soak.sh [DURATION] [options]     DURATION: seconds (600), 90s, 10m, 1m30s; default 600
# Results: runs/soak/NAME/ (plan, events, every request's record, samples, result.json, summary.md);
# exit 0 pass, 1 fail, 2 usage; 77 when it cannot run here (no root or namespaces), 1 then under CI.
set -euo pipefail
cd "$(dirname "$0")/.."
SLBX_ROOT=$(pwd)
export SLBX_ROOT

usage() {
  cat <<'EOF'
usage: scripts/soak.sh [DURATION] [--duration DURATION] [--rate N] [--keepalive N] [--warmup S] [--name NAME] [--no-setup]

The soak of docs/soak.md: a lab (examples/lab.yaml: IPv4 and IPv6 VIPs, 2 MUXes with BGP to BIRD, a
controller, 2 hosts with 2 backends each) under mixed traffic for DURATION, with h1vm1's HTTP server
flapping (15 s down every 30 s) and mux2 restarting (SIGTERM, 2 s down; about every 2 minutes, every
15 s in runs under 5 minutes), every daemon sampled each second (resident memory, file descriptors,
CPU), then judged: zero failed requests but the predicted ones (refused or reset connections to the
flapping backend before the MUXes take it out), resident memory after the warm-up at most 10 % up per
daemon, no file descriptor growth. Installs and builds what is missing first (as scripts/test.sh).

  DURATION, --duration D  run length: seconds (600), or 90s, 10m, 1m30s; at least 30 s (default 600)
  --rate N                new flows per second of each of http4, http6, udp4, udp6 (default 20)
  --keepalive N           keep-alive connections open per family (default 4)
  --warmup S              seconds before memory is judged (default 20 % of the run, 12..60 s; at
                          higher rates the MUXes' flow tables fill for 240 s: give 300)
  --name NAME             results folder runs/soak/NAME (default: UTC time and duration)
  --no-setup              do not install or build (it is done)
  -h, --help              this help

Results: runs/soak/NAME/summary.md (printed at the end), result.json, plan.json, events.jsonl,
records.jsonl (every request), samples.jsonl (every daemon, each second), meta.json; the lab's logs stay
in runs/lab/soak-PID/logs. Exit 0 pass, 1 fail, 2 usage, 77 cannot run here (1 under CI).
CI runs the 64-second version: scripts/soak.sh 64 (the 60 s plan with 4 s more for a slid timeline)
EOF
}

# seconds from 600, 600s, 10m, 1m30s
soak_parse_duration() {
  local d=$1
  if [[ $d =~ ^([0-9]+)s?$ ]]; then echo $((10#${BASH_REMATCH[1]})); return 0; fi
  if [[ $d =~ ^([0-9]+)m$ ]]; then echo $((10#${BASH_REMATCH[1]} * 60)); return 0; fi
  if [[ $d =~ ^([0-9]+)m([0-9]+)s$ ]]; then echo $((10#${BASH_REMATCH[1]} * 60 + 10#${BASH_REMATCH[2]})); return 0; fi
  return 1
}

DURATION=600 RATE=20 KEEPALIVE=4 WARMUP='' NAME='' SETUP=1 dur_given=''
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --duration) dur_given=${2:-}; shift 2 || { echo 'soak: --duration needs a value' >&2; exit 2; } ;;
    --duration=*) dur_given=${1#*=}; shift ;;
    --rate) RATE=${2:-}; shift 2 || { echo 'soak: --rate needs a value' >&2; exit 2; } ;;
    --keepalive) KEEPALIVE=${2:-}; shift 2 || { echo 'soak: --keepalive needs a value' >&2; exit 2; } ;;
    --warmup) WARMUP=${2:-}; shift 2 || { echo 'soak: --warmup needs a value' >&2; exit 2; } ;;
    --name) NAME=${2:-}; shift 2 || { echo 'soak: --name needs a value' >&2; exit 2; } ;;
    --no-setup) SETUP=0; shift ;;
    -*) echo "soak: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) [ -z "$dur_given" ] || { echo "soak: one duration only (got '$dur_given' and '$1')" >&2; exit 2; }; dur_given=$1; shift ;;
  esac
done
if [ -n "$dur_given" ]; then
  DURATION=$(soak_parse_duration "$dur_given") || { echo "soak: bad duration '$dur_given' (seconds, or 90s, 10m, 1m30s)" >&2; exit 2; }
fi
[ "$DURATION" -ge 30 ] || { echo "soak: the duration must be at least 30 s (one flap and one MUX restart), got $DURATION" >&2; exit 2; }
[[ $RATE =~ ^[1-9][0-9]{0,2}$ ]] || { echo "soak: --rate must be 1..999, got '$RATE'" >&2; exit 2; }
[[ $KEEPALIVE =~ ^[0-9]{1,3}$ ]] || { echo "soak: --keepalive must be 0..999, got '$KEEPALIVE'" >&2; exit 2; }
[ -z "$WARMUP" ] || { [[ $WARMUP =~ ^[0-9]{1,5}$ ]] && [ "$WARMUP" -lt "$DURATION" ]; } || { echo "soak: --warmup must be whole seconds below the duration, got '$WARMUP'" >&2; exit 2; }
[ -n "$NAME" ] || NAME="$(date -u +%Y%m%dT%H%M%SZ)-${DURATION}s"
[[ $NAME =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]] || { echo "soak: bad --name '$NAME' (letters, digits, _ . -)" >&2; exit 2; }

FLAP_NIC=h1vm1
RESTART_MUX=mux2
VIP4=203.0.113.10
VIP6=2001:db8:ff::10
KA_LIFE=2-5
KA_INTERVAL_MS=250
NODE=(node --enable-source-maps)

source scripts/lib/setup.sh
[ "$SETUP" = 0 ] || slbx_setup
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh

RUN=$SLBX_ROOT/runs/soak/$NAME
[ ! -e "$RUN" ] || { echo "soak: $RUN exists; give another --name" >&2; exit 2; }

soak_log() { printf '[soak] %s\n' "$*" >&2; }
soak_now_ms() { local t=${EPOCHREALTIME/./}; printf '%s' $((t / 1000)); }

# Stops a process this script started, by its PID: TERM, up to 10 s, then KILL.
soak_stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -s TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  soak_log "pid $pid still running 10 s after TERM: KILL"
  kill -s KILL "$pid" 2>/dev/null || return 0
}

SOAK_SAMPLER_PID='' SOAK_TRAFFIC_PID=''
soak_exit() {
  local rc=$?
  trap - EXIT INT TERM
  [ -z "$SOAK_TRAFFIC_PID" ] || soak_stop_pid "$SOAK_TRAFFIC_PID"
  [ -z "$SOAK_SAMPLER_PID" ] || soak_stop_pid "$SOAK_SAMPLER_PID"
  if [ -n "${LAB_NAME:-}" ] && [ -f "$(_lab_dir_of "$LAB_NAME")/state.env" ]; then
    if ! lab_down "$LAB_NAME"; then
      _lab_err "teardown of lab '$LAB_NAME' failed"
      [ "$rc" = 0 ] && rc=1
    fi
  fi
  exit "$rc"
}

# Root and namespaces (exit 77, or 1 under CI), LAB_NAME=soak-PID; then our own EXIT trap, which also
# stops the sampler and the traffic (by PID) before the lab goes down.
lab_setup_scenario soak
trap soak_exit EXIT
mkdir -p "$RUN"
OTHER_LABS=$(lab_list 2>/dev/null | awk '$1 != "no" && $1 != "orphan" { print $1 }' | paste -sd' ' -)

T_SETUP=$(soak_now_ms)
soak_log "lab $LAB_NAME: up (examples/lab.yaml: 2 MUXes with BGP, a controller, IPv4 and IPv6 VIPs)"
lab_up
for n in $(lab_nodes nic); do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 20; done
hc_wait_mux_candidates web/http80 h1vm1,h1vm2,h2vm1,h2vm2 20 >/dev/null
T_LAB=$(soak_now_ms)
soak_log "lab up and every backend healthy in $(( (T_LAB - T_SETUP) / 1000 )) s"

"${NODE[@]}" dist/scripts/soak/plan.js --duration-s "$DURATION" --config "$LAB_DIR/config.yaml" --flap-nic $FLAP_NIC --restart-mux $RESTART_MUX \
  --ka-life-s $KA_LIFE --ka-interval-ms $KA_INTERVAL_MS ${WARMUP:+--warmup-s "$WARMUP"} --json "$RUN/plan.json" >"$RUN/plan.txt"
soak_log "plan: $(grep -c backend-stop "$RUN/plan.txt") flaps of $FLAP_NIC, $(grep -c mux-stop "$RUN/plan.txt") restarts of $RESTART_MUX in $DURATION s ($RUN/plan.txt)"

# The daemons the sampler watches, "NAME PID" (rewritten when a MUX restarts): the MUXes, the host
# agents, the controller and BIRD, from the lab's process records.
soak_write_daemons() {
  local m pid entry k node n tmp=$RUN/daemons.txt.tmp
  {
    for m in $(lab_nodes mux); do pid=$(lab_mux_pid "$m") && printf '%s %s\n' "$m" "$pid"; done
    for entry in "${SLBX_LAB_PROCS[@]}"; do
      read -r pid k node n _ <<<"$entry"
      if [ "$k" = daemon ] && [ "$n" = host-agent ] && _lab_pid_ours "$pid"; then printf '%s %s\n' "$node" "$pid"; fi
      if [ "$k" = bird ] && _lab_pid_ours "$pid"; then printf 'bird %s\n' "$pid"; fi
    done
    pid=$(lab_controller_pid) && printf 'controller %s\n' "$pid"
  } >"$tmp"
  mv "$tmp" "$RUN/daemons.txt"
}
soak_write_daemons
soak_log "daemons: $(paste -sd' ' "$RUN/daemons.txt")"

"${NODE[@]}" dist/scripts/soak/sample.js --daemons "$RUN/daemons.txt" --out "$RUN/samples.jsonl" --interval-ms 1000 >"$RUN/sampler.log" 2>&1 &
SOAK_SAMPLER_PID=$!
# ip netns exec execs node, so $! is the generator's own PID (lab_exec, a function, would be a subshell)
ip netns exec "$(lab_ns client1)" "${NODE[@]}" "$SLBX_ROOT/dist/scripts/soak/traffic.js" --duration-s "$DURATION" --out "$RUN/records.jsonl" \
  --rate "$RATE" --keepalive "$KEEPALIVE" --ka-life-s $KA_LIFE --ka-interval-ms $KA_INTERVAL_MS --vip4 $VIP4 --vip6 $VIP6 \
  >"$RUN/traffic.out" 2>"$RUN/traffic.err" &
SOAK_TRAFFIC_PID=$!
# the plan's times count from the traffic's own start (its first line)
deadline=$(( $(soak_now_ms) + 10000 ))
until lab_json_get --file "$RUN/traffic.out" --lines --where event=traffic_started --type number t >/dev/null 2>&1; do
  kill -0 "$SOAK_TRAFFIC_PID" 2>/dev/null || { soak_log "the traffic generator exited:"; cat "$RUN/traffic.err" >&2; exit 1; }
  [ "$(soak_now_ms)" -lt "$deadline" ] || { soak_log 'the traffic generator did not start within 10 s'; exit 1; }
  sleep 0.05
done
T0=$(lab_json_get --file "$RUN/traffic.out" --lines --where event=traffic_started --type number t)
cat >"$RUN/meta.json" <<EOF
{"name":"$NAME","durationS":$DURATION,"rate":$RATE,"keepAlive":$KEEPALIVE,"startMs":$T0,"endMs":$((T0 + DURATION * 1000)),
 "vip4":"$VIP4","vip6":"$VIP6","httpPort":80,"udpPort":7,"labName":"$LAB_NAME","labDir":"$LAB_DIR","labSetupS":$(( (T_LAB - T_SETUP) / 1000 )),
 "otherLabs":"$OTHER_LABS","cores":$(nproc),"commit":"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"}
EOF
soak_log "traffic started: $RATE new flows/s of each of http4, http6, udp4, udp6, $KEEPALIVE keep-alive connections per family, for $DURATION s"

# The plan's events, each at its time, or AFTER_MS after the end of the event before it when that one
# ended late (a busy machine): the timeline slides rather than squeeze a restart out of its slot, and
# catches up in the cycles without one. events.jsonl keeps both times; the judge reads the real ones.
SOAK_PREV_T1=0
soak_event() {  # AT_S ACTION TARGET AFTER_MS
  local at=$1 action=$2 target=$3 after=${4:-0} planned due t0 t1 ok=true pid=null wait_ms
  planned=$((T0 + at * 1000))
  due=$planned
  [ $((SOAK_PREV_T1 + after)) -le "$due" ] || due=$((SOAK_PREV_T1 + after))
  wait_ms=$((due - $(soak_now_ms)))
  if [ "$wait_ms" -gt 0 ]; then sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))" & wait $!; fi
  kill -0 "$SOAK_TRAFFIC_PID" 2>/dev/null || { soak_log "the traffic generator is gone at ${at} s"; return 1; }
  t0=$(soak_now_ms)
  case $action in
    backend-stop) lab_backend_stop "$target" http || ok=false ;;
    backend-start) lab_backend_start "$target" http || ok=false ;;
    mux-stop) pid=$(lab_mux_pid "$target") || pid=null; lab_mux_stop "$target" TERM || ok=false ;;
    mux-start) if lab_mux_start "$target"; then pid=$(lab_mux_pid "$target") || pid=null; else ok=false; fi ;;
    *) soak_log "unknown plan action '$action'"; ok=false ;;
  esac
  t1=$(soak_now_ms)
  case $action in mux-*) soak_write_daemons ;; esac
  SOAK_PREV_T1=$(soak_now_ms)
  printf '{"atS":%s,"action":"%s","target":"%s","planned":%s,"due":%s,"t0":%s,"t1":%s,"ok":%s,"pid":%s}\n' \
    "$at" "$action" "$target" "$planned" "$due" "$t0" "$t1" "$ok" "$pid" >>"$RUN/events.jsonl"
  soak_log "+$(( (t0 - T0) / 1000 )).$(( (t0 - T0) % 1000 / 100 )) s $action $target ($((t1 - t0)) ms$([ "$due" = "$planned" ] || echo ", due $(( (due - planned) / 1000 )).$(( (due - planned) % 1000 / 100 )) s after the plan"))$([ "$ok" = true ] || echo ': FAILED')"
}
: >"$RUN/events.jsonl"
rc=0
while read -r -u 3 at action target after; do
  soak_event "$at" "$action" "$target" "$after" || { soak_log "the plan stopped at its event at ${at} s: the later events did not run"; rc=1; break; }
done 3<"$RUN/plan.txt"

wait "$SOAK_TRAFFIC_PID" || { soak_log "the traffic generator failed (exit $?): $RUN/traffic.err"; rc=1; }
SOAK_TRAFFIC_PID=''
soak_stop_pid "$SOAK_SAMPLER_PID"
SOAK_SAMPLER_PID=''
soak_log "traffic done: $(tail -n 1 "$RUN/traffic.out")"
for n in $(lab_nodes mux) $(lab_nodes host); do
  sc_counters "$n" "$RUN/counters-$n.json" || soak_log "no counters from $n"
done

"${NODE[@]}" dist/scripts/soak/judge.js --run "$RUN" --lab "$LAB_DIR" || rc=1
soak_log "results: ${RUN#"$SLBX_ROOT"/}/summary.md (lab logs: ${LAB_DIR#"$SLBX_ROOT"/}/logs)"
exit "$rc"
