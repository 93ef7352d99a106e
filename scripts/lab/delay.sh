# shellcheck shell=bash
# slbx lab: delay links (docs/lab.md, "Delay links"), sourced by scripts/lab/lib.sh. A lab device that adds
# round-trip time between two lab nodes, per pair, changeable live; the kernel here has no netem, so the
# frames wait in user space (scripts/lab/delay-link.ts, in the fabric namespace). Never a knob of the MUX
# or the host agent: they see only a longer wire.
#
#   lab_up --delays FILE ...        (or LAB_DELAYS=FILE) builds a delay link for every node that carries a
#                                   pair of FILE (scripts/lab/delay-config.ts: the first fabric node of
#                                   the pair), before the daemons start; the file is kept as RUN/delays.yaml
#   lab_delay_set A B MS            sets the delay between A and B to MS ms of round trip (MS/2 each way),
#                                   live; waits until the device applied it. A new pair needs a link on
#                                   its owner (name the pair at lab_up, 0 ms is fine)
#   lab_delay_status                the device's GET /status (settings, per pair and direction: frames,
#                                   drop_queue_full, queue depth, lateness)
#   lab_delay_pid                   PID of the running device (status 1 when none runs)
#
# Wiring (fabric namespace), per owner node N with fabric port P: P leaves the bridge, a veth dlK/dlKb
# joins it (dlKb the bridge port), and the device forwards between P and dlK.

LAB_DELAYS=${LAB_DELAYS:-}
LAB_DELAY_STATUS_PORT=9190
LAB_DELAY_JS=${LAB_DELAY_JS:-$SLBX_ROOT/dist/scripts/lab/delay-link.js}

_lab_delay_state() {  # VAR: its value in the current lab's state.env (empty when absent)
  [ -f "$LAB_DIR/state.env" ] || return 0
  ( SLBX_LAB_DELAY_OWNERS='' SLBX_LAB_DELAY_PID=''; source "$LAB_DIR/state.env"; printf '%s' "${!1}" )
}

# Called by _lab_build (errexit subshell) after the fabric and backends are built, before the daemons.
_lab_delay_build() {
  [ -n "$LAB_DELAYS" ] || return 0
  local plan=$LAB_DIR/plan.txt state=$LAB_DIR/state.env F=${SLBX_LAB_PREFIX}fabric
  [ -f "$LAB_DELAYS" ] || { _lab_err "--delays: no file '$LAB_DELAYS'"; return 1; }
  [ -f "$LAB_DELAY_JS" ] || { _lab_err "${LAB_DELAY_JS#"$SLBX_ROOT"/} is missing: build first (npx tsc -p tsconfig.json)"; return 1; }
  local owners
  owners=$("${LAB_NODE[@]}" "$LAB_DELAY_JS" check --plan "$plan" --delays "$LAB_DELAYS") || {
    _lab_err "the delays file is refused (see above): $LAB_DELAYS"; return 1; }
  cp "$LAB_DELAYS" "$LAB_DIR/delays.yaml"
  local mtu vxlan_port k=0 o port links=() list=''
  read -r _ mtu < <(awk '$1 == "fabric"' "$plan")
  vxlan_port=$(sed -n 's/^[[:space:]]*vxlanPort:[[:space:]]*\([0-9]*\).*/\1/p' "$LAB_DIR/config.yaml" | head -n 1)
  for o in $owners; do
    k=$((k + 1))
    port=$(awk -v n="$o" '($1 == "mux" || $1 == "host") && $2 == n { print $5 } $1 == "router" && n == "router" { print $6 }
      $1 == "controller" && n == "controller" { print $4 }' "$plan")
    [ -n "$port" ] && [ -e "/run/netns/$F" ] && ip -n "$F" link show "$port" >/dev/null 2>&1 || {
      _lab_err "delay link: $o has no fabric port in this lab (is it built? the controller needs the daemons)"; return 1; }
    ip -n "$F" link add "dl$k" mtu "$mtu" type veth peer name "dl${k}b" mtu "$mtu"
    _lab_tx_off "$F" "dl$k" "dl${k}b"
    ip -n "$F" link set "dl$k" up
    ip -n "$F" link set "$port" nomaster
    ip -n "$F" link set "dl${k}b" master br0 up
    links+=(--link "$o:$port:dl$k")
    list+=${list:+,}$o
  done
  _lab_spawn fabric delay-link "delay links $list" "$LAB_DIR/logs/delay-link.log" \
    "${LAB_NODE[@]}" "$LAB_DELAY_JS" run --plan "$plan" --delays "$LAB_DIR/delays.yaml" "${links[@]}" \
    --vxlan-port "${vxlan_port:-4789}" --status "127.0.0.1:$LAB_DELAY_STATUS_PORT"
  _lab_state_add "$state" SLBX_LAB_DELAY_OWNERS "$list"
  _lab_state_add "$state" SLBX_LAB_DELAY_PID "$LAB_SPAWNED_PID"
  local i
  for i in $(seq 1 100); do
    ip netns exec "$F" curl -sf -m 1 "http://127.0.0.1:$LAB_DELAY_STATUS_PORT/status" >/dev/null 2>&1 && {
      _lab_log "delay links on $list ($(grep -c between "$LAB_DIR/delays.yaml") pairs)"; return 0; }
    _lab_pid_alive "$LAB_SPAWNED_PID" || break
    sleep 0.1
  done
  _lab_err "the delay link device did not start:"
  _lab_tail "$LAB_DIR/logs/delay-link.log"
  return 1
}

lab_delay_pid() {
  _lab_require_up || return 1
  local pid
  pid=$(_lab_delay_state SLBX_LAB_DELAY_PID)
  [ -n "$pid" ] && _lab_pid_ours "$pid" || return 1
  printf '%s\n' "$pid"
}

lab_delay_status() {
  _lab_require_up || return 1
  [ -n "$(_lab_delay_state SLBX_LAB_DELAY_PID)" ] || { _lab_err "lab '$LAB_NAME' has no delay links (lab_up --delays FILE)"; return 1; }
  ip netns exec "${SLBX_LAB_PREFIX}fabric" curl -sf -m 5 "http://127.0.0.1:$LAB_DELAY_STATUS_PORT/status"
}

_lab_delay_generation() {
  lab_delay_status | sed -n 's/^  "generation": \([0-9]*\),$/\1/p'
}

lab_delay_set() {  # A B MS
  [ $# = 3 ] || { _lab_err 'usage: lab_delay_set A B MS (MS: ms of round trip added between nodes A and B)'; return 2; }
  _lab_require_up || return 1
  local pid owners before after i
  pid=$(lab_delay_pid) || { _lab_err "lab '$LAB_NAME' has no running delay link device (lab_up --delays FILE builds one)"; return 1; }
  owners=$(_lab_delay_state SLBX_LAB_DELAY_OWNERS)
  "${LAB_NODE[@]}" "$LAB_DELAY_JS" set --plan "$LAB_DIR/plan.txt" --delays "$LAB_DIR/delays.yaml" --links "$owners" "$1" "$2" "$3" || return 1
  before=$(_lab_delay_generation) || return 1
  kill -HUP "$pid"
  for i in $(seq 1 200); do
    after=$(_lab_delay_generation) || return 1
    if [ -n "$after" ] && [ "$after" -gt "$before" ]; then
      _lab_log "delay $1 $2: $3 ms (generation $after)"
      return 0
    fi
    if lab_delay_status | grep -q '"lastReloadError": "'; then
      _lab_err "the delay link refused the file:"; lab_delay_status | grep lastReloadError >&2; return 1
    fi
    sleep 0.05
  done
  _lab_err "the delay link did not apply $1 $2 $3 within 10 s"
  return 1
}
