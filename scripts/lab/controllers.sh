# shellcheck shell=bash
# slbx lab: controller replicas on etcd (docs/controller.md, Replicas). Sourced by lib.sh.
#
#   LAB_CONTROLLERS=N (2..5) before lab_up (scripts/lab.sh up --controllers N sets it): instead of one
#       controller with a state file, N etcd members forming one cluster and N slbx-controller replicas
#       on it (--store etcd://.../slbx/LABNAME). Replica k and etcd member k share namespace
#       `controller` (k = 1, fabric 198.18.0.5, as the single controller) or `controllerK` (k >= 2,
#       fabric 198.18.0.(4+k)), IPv4 fabric only. The API listens on the fabric address and loopback,
#       :8480; etcd on :2379 (clients) and :2380 (peers), its data in RUN/etcdK. One API token file
#       (RUN/api-token) for all of them: the first replica makes it, the others are started after.
#       Every MUX and host agent gets --controller URL1,URL2,..., and slbctl in the lab ($SLBX_CONTROLLER,
#       exported by state.env) the same list. The lab remembers N (SLBX_LAB_CONTROLLERS in state.env).
#   lab_replica_pid K        PID of replica K (status 1 when it does not run)
#   lab_replica_stop K [SIG] stops replica K (TERM; KILL for a crash) and waits until it is gone
#   lab_replica_start K      starts replica K again; waits until its API answers
#   lab_etcd_pid K / lab_etcd_stop K [SIG] / lab_etcd_start K   the same for etcd member K
#   lab_controller_leader    prints the leader's replica number (status 1 when none is known)
#   lab_controllers_status   one line per replica and member, for lab_status (scripts/lab.sh status)

LAB_CONTROLLERS_MAX=5
LAB_ETCD_CLIENT_PORT=2379
LAB_ETCD_PEER_PORT=2380
LAB_ETCD_BIN=${LAB_ETCD_BIN:-etcd}

_lab_replica_node() { if [ "$1" = 1 ]; then printf 'controller'; else printf 'controller%s' "$1"; fi; }
_lab_replica_addr() { printf '198.18.0.%s' $((4 + $1)); }

# Called by _lab_build (lab_up) after the plan: checks N, sets SLBX_LAB_CONTROLLER_URL to the list of
# replica URLs and records N. Does nothing without LAB_CONTROLLERS (or with 1).
_lab_controllers_plan() {  # STATE_FILE
  local state=$1 n=${LAB_CONTROLLERS:-1} k urls='' port a
  [ "$n" = 1 ] && return 0
  [[ $n =~ ^[2-9]$ ]] && [ "$n" -le "$LAB_CONTROLLERS_MAX" ] ||
    { _lab_err "--controllers must be a number 1..$LAB_CONTROLLERS_MAX, got '$n'"; return 1; }
  command -v "$LAB_ETCD_BIN" >/dev/null || { _lab_err "'$LAB_ETCD_BIN' is not installed (apt-get install etcd-server; scripts/lab.sh up installs it)"; return 1; }
  read -r _ a _ _ _ port < <(awk '$1 == "controller"' "$LAB_DIR/plan.txt")
  [ "$a" = "$(_lab_replica_addr 1)" ] || { _lab_err "--controllers needs an IPv4 fabric with the controller at $(_lab_replica_addr 1) (the plan has '$a')"; return 1; }
  for k in $(seq 2 "$n"); do
    a=$(_lab_replica_addr "$k")
    if grep -qw -- "$a" "$LAB_DIR/plan.txt"; then _lab_err "--controllers $n: $a (replica $k) is taken by the plan: $(grep -w -- "$a" "$LAB_DIR/plan.txt" | head -n1)"; return 1; fi
  done
  for k in $(seq 1 "$n"); do urls+="${urls:+,}http://$(_lab_replica_addr "$k"):$port"; done
  SLBX_LAB_CONTROLLER_URL=$urls SLBX_LAB_CONTROLLERS=$n
  export SLBX_CONTROLLER=$urls
  _lab_state_add "$state" SLBX_LAB_CONTROLLERS "$n"
  printf 'export SLBX_CONTROLLER=%q  # slbctl in the lab: every replica\n' "$urls" >>"$state"
}

# Creates namespace controllerK (K >= 2) on the fabric unless it exists (records it for lab_down).
_lab_replica_netns() {  # K
  local k=$1 node ns F=${SLBX_LAB_PREFIX}fabric mtu state=$LAB_DIR/state.env
  node=$(_lab_replica_node "$k") ns=$SLBX_LAB_PREFIX$node
  [ -e "/run/netns/$ns" ] && return 0
  read -r _ mtu < <(awk '$1 == "fabric"' "$LAB_DIR/plan.txt")
  ip netns add "$ns" || return 1
  _lab_state_add "$state" SLBX_LAB_NAMESPACES "$ns" array
  _lab_state_add "$state" SLBX_LAB_NODES "$node" array
  SLBX_LAB_NAMESPACES+=("$ns") SLBX_LAB_NODES+=("$node")
  ip -n "$ns" link set lo up &&
    ip -n "$F" link add "ctl$k" mtu "$mtu" type veth peer name fab0 mtu "$mtu" netns "$ns" &&
    ip -n "$F" link set "ctl$k" master br0 up &&
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 &&
    ip -n "$ns" addr add "$(_lab_replica_addr "$k")/24" dev fab0 &&
    ip -n "$ns" link set fab0 up || { _lab_err "cannot attach namespace $ns to the fabric"; return 1; }
  _lab_tx_off "$ns" fab0
}

_lab_etcd_cluster() {
  local k out=''
  for k in $(seq 1 "$SLBX_LAB_CONTROLLERS"); do out+="${out:+,}e$k=http://$(_lab_replica_addr "$k"):$LAB_ETCD_PEER_PORT"; done
  printf '%s' "$out"
}

_lab_etcd_spawn() {  # K NEW|EXISTING
  local k=$1 a node
  a=$(_lab_replica_addr "$k") node=$(_lab_replica_node "$k")
  _lab_spawn "$node" etcd "etcd e$k" "$LAB_DIR/logs/etcd$k.log" "$LAB_ETCD_BIN" --name "e$k" --data-dir "$LAB_DIR/etcd$k" \
    --listen-client-urls "http://$a:$LAB_ETCD_CLIENT_PORT,http://127.0.0.1:$LAB_ETCD_CLIENT_PORT" \
    --advertise-client-urls "http://$a:$LAB_ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://$a:$LAB_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://$a:$LAB_ETCD_PEER_PORT" \
    --initial-cluster "$(_lab_etcd_cluster)" --initial-cluster-state "$2" --initial-cluster-token "slbx-$LAB_NAME"
}

_lab_replica_spawn() {  # K
  local k=$1 a node port stores='' j init=()
  a=$(_lab_replica_addr "$k") node=$(_lab_replica_node "$k")
  read -r _ _ _ _ _ port < <(awk '$1 == "controller"' "$LAB_DIR/plan.txt")
  for j in $(seq 1 "$SLBX_LAB_CONTROLLERS"); do stores+="${stores:+,}$(_lab_replica_addr "$j"):$LAB_ETCD_CLIENT_PORT"; done
  # --init seeds etcd only when it holds no state yet (a restart with the same command line goes on)
  init=(--init "$LAB_DIR/config.yaml")
  # the memory settings of the single controller (lib.sh; docs/controller.md, Memory)
  _lab_spawn "$node" daemon controller "$LAB_DIR/logs/$node.log" env MALLOC_ARENA_MAX=2 "${LAB_NODE[@]}" --max-semi-space-size=1 "$LAB_CONTROLLER_JS" \
    --store "etcd://$stores/slbx/$LAB_NAME" "${init[@]}" --id "$node" --advertise "http://$a:$port" \
    --listen "$a:$port" --listen "127.0.0.1:$port" --token-file "$LAB_DIR/api-token"
}

# Waits until URL answers inside NODE's namespace while PID lives.
_lab_wait_http() {  # NODE PID URL WHAT LOG
  local deadline=$(( $(_lab_now) + LAB_READY_TIMEOUT_S * 1000000 ))
  until ip netns exec "$SLBX_LAB_PREFIX$1" curl -sf -m 1 -o /dev/null "$3" 2>/dev/null; do
    _lab_pid_alive "$2" || { _lab_err "$4 (pid $2) exited; ${5#"$LAB_DIR"/}:"; _lab_tail "$5"; return 1; }
    [ "$(_lab_now)" -lt "$deadline" ] || { _lab_err "$4 does not answer GET $3 after ${LAB_READY_TIMEOUT_S} s"; _lab_tail "$5"; return 1; }
    sleep 0.1
  done
}

# lab_up's controller step with LAB_CONTROLLERS (from _lab_controller_spawn): the etcd cluster, then
# replica 1 (it makes the token file), then the others; waits until each answers and one leads.
_lab_controllers_spawn() {
  local n=$SLBX_LAB_CONTROLLERS k pids=() port
  read -r _ _ _ _ _ port < <(awk '$1 == "controller"' "$LAB_DIR/plan.txt")
  for k in $(seq 2 "$n"); do _lab_replica_netns "$k" || return 1; done
  for k in $(seq 1 "$n"); do
    rm -rf "$LAB_DIR/etcd$k"
    _lab_etcd_spawn "$k" new
    pids+=("$LAB_SPAWNED_PID")
  done
  for k in $(seq 1 "$n"); do
    _lab_wait_http "$(_lab_replica_node "$k")" "${pids[$((k - 1))]}" "http://127.0.0.1:$LAB_ETCD_CLIENT_PORT/health" "etcd member e$k" "$LAB_DIR/logs/etcd$k.log" || return 1
  done
  for k in $(seq 1 "$n"); do
    _lab_replica_spawn "$k"
    _lab_wait_http "$(_lab_replica_node "$k")" "$LAB_SPAWNED_PID" "http://127.0.0.1:$port/v1/state" "controller replica $k" \
      "$LAB_DIR/logs/$(_lab_replica_node "$k").log" || return 1
  done
  local deadline=$(( $(_lab_now) + LAB_READY_TIMEOUT_S * 1000000 ))
  until lab_controller_leader >/dev/null; do
    [ "$(_lab_now)" -lt "$deadline" ] || { _lab_err "no controller replica leads after ${LAB_READY_TIMEOUT_S} s"; return 1; }
    sleep 0.2
  done
  _lab_log "$n etcd members and $n controller replicas up; replica $(lab_controller_leader) leads"
}

# The PID of the recorded KIND (daemon controller / etcd) process of replica K, alive and not stopped.
_lab_replica_proc_pid() {  # KIND K
  local entry pid k node s stopped want
  want=$(_lab_replica_node "$2")
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r pid k node _ <<<"$entry"
    [ "$k" = "$1" ] && [ "$node" = "$want" ] || continue
    stopped=0
    for s in "${SLBX_LAB_STOPPED[@]}"; do [ "$s" = "$pid" ] && stopped=1; done
    [ "$stopped" = 0 ] && _lab_pid_ours "$pid" && { printf '%s\n' "$pid"; return 0; }
  done
  return 1
}

_lab_replica_check() {  # K
  _lab_ensure_loaded || return 1
  [ "${SLBX_LAB_CONTROLLERS:-1}" -gt 1 ] || { _lab_err "lab '$LAB_NAME' runs no controller replicas (scripts/lab.sh up --controllers 3)"; return 1; }
  [[ ${1:-} =~ ^[1-9]$ ]] && [ "$1" -le "$SLBX_LAB_CONTROLLERS" ] || { _lab_err "replica number 1..$SLBX_LAB_CONTROLLERS expected, got '${1:-}'"; return 2; }
}

lab_replica_pid() { _lab_replica_check "${1:-}" || return; _lab_replica_proc_pid daemon "$1"; }
lab_etcd_pid() { _lab_replica_check "${1:-}" || return; _lab_replica_proc_pid etcd "$1"; }

_lab_replica_stop_kind() {  # KIND LABEL K [SIG]
  local pid sig=${4:-TERM}
  _lab_replica_check "${3:-}" || return
  pid=$(_lab_replica_proc_pid "$1" "$3") || { _lab_err "$2 $3 does not run"; return 1; }
  _lab_stop_pids "$sig" "$pid" || return 1
  _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_STOPPED "$pid" array
  SLBX_LAB_STOPPED+=("$pid")
  _lab_log "$2 $3 (pid $pid) stopped with SIG$sig"
}
lab_replica_stop() { _lab_replica_stop_kind daemon 'controller replica' "$@"; }
lab_etcd_stop() { _lab_replica_stop_kind etcd 'etcd member' "$@"; }

lab_replica_start() {  # K
  local k=${1:-} port log i
  _lab_replica_check "$k" || return
  if _lab_replica_proc_pid daemon "$k" >/dev/null; then _lab_err "controller replica $k is running"; return 1; fi
  read -r _ _ _ _ _ port < <(awk '$1 == "controller"' "$LAB_DIR/plan.txt")
  log=$LAB_DIR/logs/$(_lab_replica_node "$k").log
  if [ -e "$log" ]; then i=1; while [ -e "$log.$i" ]; do i=$((i + 1)); done; mv "$log" "$log.$i"; fi
  _lab_replica_spawn "$k"
  SLBX_LAB_PROCS+=("$LAB_SPAWNED_PID daemon $(_lab_replica_node "$k") controller")
  _lab_wait_http "$(_lab_replica_node "$k")" "$LAB_SPAWNED_PID" "http://127.0.0.1:$port/v1/state" "controller replica $k" "$log" || return 1
  _lab_log "controller replica $k started (pid $LAB_SPAWNED_PID)"
}

lab_etcd_start() {  # K: again, with its data (it rejoins the cluster)
  local k=${1:-} log i
  _lab_replica_check "$k" || return
  if _lab_replica_proc_pid etcd "$k" >/dev/null; then _lab_err "etcd member $k is running"; return 1; fi
  log=$LAB_DIR/logs/etcd$k.log
  if [ -e "$log" ]; then i=1; while [ -e "$log.$i" ]; do i=$((i + 1)); done; mv "$log" "$log.$i"; fi
  _lab_etcd_spawn "$k" existing
  SLBX_LAB_PROCS+=("$LAB_SPAWNED_PID etcd $(_lab_replica_node "$k") etcd e$k")
  _lab_log "etcd member $k started (pid $LAB_SPAWNED_PID)"
}

# GET /v1/replica of replica K (from inside its namespace), or nothing.
_lab_replica_view() {  # K
  local port
  read -r _ _ _ _ _ port < <(awk '$1 == "controller"' "$LAB_DIR/plan.txt")
  ip netns exec "$SLBX_LAB_PREFIX$(_lab_replica_node "$1")" curl -sf -m 2 "http://127.0.0.1:$port/v1/replica" 2>/dev/null
}

lab_controller_leader() {
  local k
  _lab_ensure_loaded || return 1
  [ "${SLBX_LAB_CONTROLLERS:-1}" -gt 1 ] || return 1
  for k in $(seq 1 "$SLBX_LAB_CONTROLLERS"); do
    [ "$(_lab_replica_view "$k" | lab_json_get role 2>/dev/null)" = leader ] && { printf '%s\n' "$k"; return 0; }
  done
  return 1
}

lab_controllers_status() {
  [ "${SLBX_LAB_CONTROLLERS:-1}" -gt 1 ] || return 0
  local k view role gen pid epid health port
  read -r _ _ _ _ _ port < <(awk '$1 == "controller"' "$LAB_DIR/plan.txt")
  printf '\ncontroller replicas on etcd (%s members; lab_replica_stop K, lab_etcd_stop K):\n' "$SLBX_LAB_CONTROLLERS"
  for k in $(seq 1 "$SLBX_LAB_CONTROLLERS"); do
    view=$(_lab_replica_view "$k") role=$(lab_json_get role <<<"$view" 2>/dev/null) || role='no answer'
    gen=$(ip netns exec "$SLBX_LAB_PREFIX$(_lab_replica_node "$k")" curl -sf -m 2 "http://127.0.0.1:$port/v1/state" 2>/dev/null | lab_json_get generation 2>/dev/null) || gen=-
    pid=$(_lab_replica_proc_pid daemon "$k") || pid=-
    epid=$(_lab_replica_proc_pid etcd "$k") || epid=-
    health=$(ip netns exec "$SLBX_LAB_PREFIX$(_lab_replica_node "$k")" curl -s -m 2 "http://127.0.0.1:$LAB_ETCD_CLIENT_PORT/health" 2>/dev/null | lab_json_get health 2>/dev/null) || health=-
    printf '  %-12s http://%s:%s  pid %-7s %-9s generation %-5s etcd e%s pid %-7s healthy %s\n' "$(_lab_replica_node "$k")" \
      "$(_lab_replica_addr "$k")" "$port" "$pid" "$role" "$gen" "$k" "$epid" "$health"
  done
}
