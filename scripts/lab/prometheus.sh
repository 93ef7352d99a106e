# shellcheck shell=bash
# slbx lab: a real Prometheus (Debian's `prometheus`) in its own namespace on the fabric, scraping
# GET /metrics of every MUX, host agent and the controller (docs/metrics.md). Sourced by lib.sh.
#
#   LAB_PROMETHEUS=1 before lab_up (scripts/lab.sh up --prometheus sets it): every MUX and host agent
#       the lab starts (lab_up, lab_mux_start, lab_host_agent_start) also gets --metrics on its fabric
#       address (MUX :9280, host agent :9281); their status endpoints stay on loopback. The lab then
#       remembers it (SLBX_LAB_PROMETHEUS in state.env).
#   lab_prometheus_up       after lab_up: the `prometheus` namespace (fabric address 198.18.0.9), its
#                           config RUN/prometheus.yml (scrape every LAB_PROMETHEUS_SCRAPE_S, 2 s), the
#                           TSDB in RUN/prometheus-data; starts prometheus (recorded: lab_down stops it
#                           by PID and deletes the namespace) and waits until it is ready and every
#                           target was scraped up once (LAB_PROMETHEUS_TIMEOUT_S, 60 s)
#   lab_prometheus_url      prints its URL (http://198.18.0.9:9090); status 1 when the lab runs none
#   lab_prometheus_api PATH [ARG=VALUE...]
#                           GET PATH of its HTTP API from inside its namespace, each ARG=VALUE sent
#                           url-encoded: lab_prometheus_api /api/v1/query 'query=up'
#   lab_prometheus_status   one line for lab_status: URL, pid, targets up

LAB_PROMETHEUS_ADDR=198.18.0.9
LAB_PROMETHEUS_PORT=9090
LAB_PROMETHEUS_MUX_PORT=9280
LAB_PROMETHEUS_HOST_PORT=9281
LAB_PROMETHEUS_SCRAPE_S=${LAB_PROMETHEUS_SCRAPE_S:-2}
LAB_PROMETHEUS_TIMEOUT_S=${LAB_PROMETHEUS_TIMEOUT_S:-60}
LAB_PROMETHEUS_BIN=${LAB_PROMETHEUS_BIN:-prometheus}

# Prints `--metrics ADDR:PORT` for the daemon of NODE (KIND mux or host-agent) when the lab runs a
# Prometheus, else nothing. Used by _lab_daemon_spawn.
_lab_prometheus_daemon_args() {  # KIND NODE
  [ "${SLBX_LAB_PROMETHEUS:-${LAB_PROMETHEUS:-0}}" = 1 ] || return 0
  local kind=mux port=$LAB_PROMETHEUS_MUX_PORT a4
  [ "$1" = host-agent ] && kind=host port=$LAB_PROMETHEUS_HOST_PORT
  a4=$(awk -v k="$kind" -v n="$2" '$1 == k && $2 == n { print $3; exit }' "$LAB_DIR/plan.txt")
  [ -n "$a4" ] && printf -- '--metrics %s:%s' "$a4" "$port"
}

lab_prometheus_url() {
  _lab_ensure_loaded || return 1
  [ "${SLBX_LAB_PROMETHEUS:-0}" = 1 ] || { _lab_err "lab '$LAB_NAME' runs no Prometheus (scripts/lab.sh up --prometheus)"; return 1; }
  printf 'http://%s:%s\n' "$LAB_PROMETHEUS_ADDR" "$LAB_PROMETHEUS_PORT"
}

lab_prometheus_api() {  # PATH [ARG=VALUE...]
  local path=$1 a args=()
  shift
  _lab_ensure_loaded || return 1
  for a in "$@"; do args+=(--data-urlencode "$a"); done
  ip netns exec "${SLBX_LAB_PREFIX}prometheus" curl -sfG -m 10 "http://$LAB_PROMETHEUS_ADDR:$LAB_PROMETHEUS_PORT$path" "${args[@]}"
}

# The scrape config: one job per daemon kind, a `node` label per target.
_lab_prometheus_config() {
  local kind n a4 _
  printf 'global:\n  scrape_interval: %ss\n  scrape_timeout: %ss\n  evaluation_interval: %ss\nscrape_configs:\n' \
    "$LAB_PROMETHEUS_SCRAPE_S" "$LAB_PROMETHEUS_SCRAPE_S" "$LAB_PROMETHEUS_SCRAPE_S"
  for kind in mux host; do
    printf '  - job_name: slbx-%s\n    static_configs:\n' "$kind"
    while read -r -u 3 k n a4 _; do
      [ "$k" = "$kind" ] || continue
      printf "      - targets: ['%s:%s']\n        labels: {node: '%s'}\n" "$a4" \
        "$([ "$kind" = mux ] && echo "$LAB_PROMETHEUS_MUX_PORT" || echo "$LAB_PROMETHEUS_HOST_PORT")" "$n"
    done 3<"$LAB_DIR/plan.txt"
  done
  if [ -n "${SLBX_LAB_CONTROLLER_URL:-}" ]; then
    printf "  - job_name: slbx-controller\n    static_configs:\n      - targets: ['%s']\n        labels: {node: 'controller'}\n" \
      "${SLBX_LAB_CONTROLLER_URL#http://}"
  fi
}

lab_prometheus_up() {
  _lab_ensure_loaded || return 1
  [ "${LAB_PROMETHEUS:-0}" = 1 ] || [ "${SLBX_LAB_PROMETHEUS:-0}" = 1 ] || {
    _lab_err 'lab_prometheus_up: the daemons serve no --metrics address: set LAB_PROMETHEUS=1 before lab_up (scripts/lab.sh up --prometheus)'; return 1; }
  command -v "$LAB_PROMETHEUS_BIN" >/dev/null || { _lab_err "'$LAB_PROMETHEUS_BIN' is not installed (apt-get install prometheus; scripts/lab.sh up installs it)"; return 1; }
  local ns=${SLBX_LAB_PREFIX}prometheus F=${SLBX_LAB_PREFIX}fabric state=$LAB_DIR/state.env mtu data=$LAB_DIR/prometheus-data
  [ -e "/run/netns/$ns" ] && { _lab_err "lab '$LAB_NAME' runs a Prometheus already"; return 1; }
  read -r _ mtu < <(awk '$1 == "fabric"' "$LAB_DIR/plan.txt")
  ip netns add "$ns" || return 1
  _lab_state_add "$state" SLBX_LAB_NAMESPACES "$ns" array
  _lab_state_add "$state" SLBX_LAB_NODES prometheus array
  _lab_state_add "$state" SLBX_LAB_PROMETHEUS 1
  SLBX_LAB_NAMESPACES+=("$ns") SLBX_LAB_NODES+=(prometheus) SLBX_LAB_PROMETHEUS=1
  ip -n "$ns" link set lo up &&
    ip -n "$F" link add prom0 mtu "$mtu" type veth peer name fab0 mtu "$mtu" netns "$ns" &&
    ip -n "$F" link set prom0 master br0 up &&
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 &&
    ip -n "$ns" addr add "$LAB_PROMETHEUS_ADDR/24" dev fab0 &&
    ip -n "$ns" link set fab0 up || { _lab_err 'cannot attach the prometheus namespace to the fabric'; return 1; }
  _lab_prometheus_config >"$LAB_DIR/prometheus.yml" || return 1
  rm -rf "$data"
  _lab_spawn prometheus prometheus prometheus "$LAB_DIR/logs/prometheus.log" "$LAB_PROMETHEUS_BIN" \
    --config.file="$LAB_DIR/prometheus.yml" --storage.tsdb.path="$data" --storage.tsdb.retention.time=1d \
    --web.listen-address="$LAB_PROMETHEUS_ADDR:$LAB_PROMETHEUS_PORT"
  local pid=$LAB_SPAWNED_PID deadline targets up
  deadline=$(( $(_lab_now) + LAB_PROMETHEUS_TIMEOUT_S * 1000000 ))
  targets=$(grep -c "targets:" "$LAB_DIR/prometheus.yml")
  while :; do
    _lab_pid_alive "$pid" || { _lab_err "prometheus (pid $pid) exited; logs/prometheus.log:"; _lab_tail "$LAB_DIR/logs/prometheus.log"; return 1; }
    # not answering yet (curl fails): 0 up
    up=$(lab_prometheus_api /api/v1/query 'query=count(up == 1)' 2>/dev/null |
      "${LAB_NODE[@]}" -e 'let t="";process.stdin.on("data",d=>t+=d).on("end",()=>{try{console.log(JSON.parse(t).data.result[0]?.value[1]??0)}catch{console.log(0)}})') || up=0
    [ "$up" = "$targets" ] && break
    if [ "$(_lab_now)" -gt "$deadline" ]; then
      _lab_err "prometheus: ${up:-0} of $targets targets up after ${LAB_PROMETHEUS_TIMEOUT_S} s (lab_prometheus_api /api/v1/targets)"
      return 1
    fi
    sleep 0.5
  done
  _lab_log "prometheus up at $(lab_prometheus_url) (pid $pid): $targets targets, scraped every ${LAB_PROMETHEUS_SCRAPE_S} s"
}

lab_prometheus_status() {
  [ "${SLBX_LAB_PROMETHEUS:-0}" = 1 ] || return 0
  local pid='' entry p k rest
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r p k rest <<<"$entry"
    [ "$k" = prometheus ] && pid=$p
  done
  local n=''
  [ "$LAB_NAME" = default ] || n=" --name $LAB_NAME"
  printf '\nprometheus %s (pid %s%s; scripts/lab.sh exec%s prometheus curl -s %s/api/v1/targets)\n' "$(lab_prometheus_url)" "${pid:-?}" \
    "$({ [ -n "$pid" ] && _lab_pid_alive "$pid"; } && echo ', running' || echo ', not running')" "$n" "$(lab_prometheus_url)"
}
