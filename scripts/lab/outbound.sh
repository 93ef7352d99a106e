# shellcheck shell=bash
# Outbound NAT in the lab (docs/outbound.md; examples/lab-outbound.yaml). Sourced by lib.sh.
#
# The remote server (scripts/lab/snat-server.ts: TCP and UDP echo that tells each peer the source it saw
# and records it) runs in a client namespace, on the client side of the router (198.51.100.0/24,
# 2001:db8:c::/48): a backend's own connection reaches it through the router only, from the frontend IP.
# The client tool (scripts/lab/snat-client.ts) runs inside a backend's namespace.
#
#   lab_snat_server_start NODE [TCP_PORT UDP_PORT]   starts the server in NODE (a client), ports 9000/9001
#                                                    by default; waits for its ready line
#   lab_snat_server_records                          writes the server's records now (SIGUSR2) and prints the file
#   lab_snat_server_stop                             stops it (TERM: the records are written) and prints the file
#   lab_snat_client NIC ARGS...                      snat-client.js ARGS in NIC's namespace, in the foreground

LAB_SNAT_TCP_PORT=${LAB_SNAT_TCP_PORT:-9000}
LAB_SNAT_UDP_PORT=${LAB_SNAT_UDP_PORT:-9001}

_lab_snat_server_pid() {
  local p
  for p in "${SLBX_LAB_PROCS[@]}"; do
    # shellcheck disable=SC2086
    set -- $p
    [ "$2" = snat-server ] && _lab_pid_alive "$1" && ! _lab_snat_stopped "$1" && { printf '%s\n' "$1"; return 0; }
  done
  return 1
}

_lab_snat_stopped() {
  local s
  for s in "${SLBX_LAB_STOPPED[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}

lab_snat_server_start() {
  local node=${1:-} tcp=${2:-$LAB_SNAT_TCP_PORT} udp=${3:-$LAB_SNAT_UDP_PORT} log
  [ -n "$node" ] || { _lab_err 'usage: lab_snat_server_start NODE [TCP_PORT UDP_PORT]'; return 2; }
  _lab_ensure_loaded || return 1
  _lab_node_known "$node" || { _lab_err "lab '$LAB_NAME' has no node '$node' (nodes: ${SLBX_LAB_NODES[*]})"; return 1; }
  if _lab_snat_server_pid >/dev/null; then _lab_err "lab_snat_server_start: a snat-server runs already (pid $(_lab_snat_server_pid))"; return 1; fi
  log=$LAB_DIR/logs/snat-server.log
  rm -f "$LAB_DIR/snat-server.json"
  _lab_spawn "$node" snat-server "$node snat-server" "$log" \
    "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/snat-server.js" --tcp-port "$tcp" --udp-port "$udp" --records "$LAB_DIR/snat-server.json"
  SLBX_LAB_PROCS+=("$LAB_SPAWNED_PID snat-server $node $node snat-server")
  local pids=("$LAB_SPAWNED_PID") logs=("$log")
  _lab_wait_backends pids logs || return 1
  _lab_log "snat-server in $node (pid $LAB_SPAWNED_PID): TCP $tcp, UDP $udp"
}

lab_snat_server_records() {
  local pid f
  _lab_ensure_loaded || return 1
  pid=$(_lab_snat_server_pid) || { _lab_err 'lab_snat_server_records: no snat-server runs'; return 1; }
  f=$LAB_DIR/snat-server.json
  rm -f "$f"  # the server writes it whole (a rename): its presence is the answer
  kill -s USR2 "$pid" || return 1
  local deadline=$(( $(_lab_now) + 30000000 ))
  until [ -e "$f" ]; do
    [ "$(_lab_now)" -lt "$deadline" ] || { _lab_err "snat-server wrote no records in 30 s"; return 1; }
    sleep 0.1
  done
  printf '%s\n' "$f"
}

lab_snat_server_stop() {
  local pid
  _lab_ensure_loaded || return 1
  pid=$(_lab_snat_server_pid) || { _lab_err 'lab_snat_server_stop: no snat-server runs'; return 1; }
  _lab_stop_pids TERM "$pid" || return 1
  _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_STOPPED "$pid" array
  SLBX_LAB_STOPPED+=("$pid")
  [ -s "$LAB_DIR/snat-server.json" ] || { _lab_err "snat-server left no records ($LAB_DIR/snat-server.json)"; return 1; }
  printf '%s\n' "$LAB_DIR/snat-server.json"
}

lab_snat_client() {
  local nic=${1:-}
  [ $# -ge 2 ] || { _lab_err 'usage: lab_snat_client NIC ARGS... (snat-client.js --help)'; return 2; }
  shift
  lab_exec "$nic" "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/snat-client.js" "$@"
}
