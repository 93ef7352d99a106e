# shellcheck shell=bash
# slbx lab: delay links (docs/lab.md, "Delay links"), sourced by scripts/lab/lib.sh. A lab device that adds
# round-trip time between two lab nodes, per pair, changeable live; the kernel here has no netem, so the
# frames wait in user space (scripts/lab/delay-link.ts, a process per namespace). Never a knob of the MUX
# or the host agent: they see only a longer wire.
#
#   lab_up --delays FILE ...        (or LAB_DELAYS=FILE) builds a delay link for every node that carries a
#                                   pair of FILE (its owner, see Wiring below),
#                                   before the daemons start; the file is kept as RUN/delays.yaml
#   lab_delay_set A B MS            sets the delay between A and B to MS ms of round trip (MS/2 each way),
#                                   live; waits until the device applied it. A new pair needs a link on
#                                   its owner (name the pair at lab_up, 0 ms is fine)
#   lab_delay_status [NODE]         GET /status of the device in NODE's namespace (fabric, or a host with
#                                   nic links; default: every device, as {"fabric": ..., "host1": ...}):
#                                   settings, per pair and direction frames, drop_queue_full, queue depth,
#                                   lateness; per link the drops of its ring and send errors
#   lab_delay_pids                  "NODE PID" of each running device
#
# Wiring, per owner node N (delay-config.ts: the pair's fabric node; a nic for a nic and its host):
#   fabric node: in the fabric namespace, N's port P leaves the bridge, a veth dlK/dlKb joins it (dlKb the
#     bridge port), and the device forwards between P and dlK;
#   nic: in its host's namespace, the nic's port P is renamed dlK (its peer is still the nic's eth0), a new
#     veth P/dlKb takes its name (the host agent's port, built before the agent starts), and the device
#     forwards between dlK and dlKb.
# One device process per namespace that has links; each status on 127.0.0.1:9190 there.

LAB_DELAYS=${LAB_DELAYS:-}
LAB_DELAY_STATUS_PORT=9190
LAB_DELAY_JS=${LAB_DELAY_JS:-$SLBX_ROOT/dist/scripts/lab/delay-link.js}
# The device runs at real-time priority (SCHED_FIFO 10) so that a busy machine delays its timers no more
# than a wire would: at load averages 23-38 on 2 cores the median round trip then stays within about
# 1 ms of the delay, with rare frames tens of ms late (docs/lab.md, "Measured"; each scenario's end
# prints the latest). LAB_DELAY_RT=0 runs it as an ordinary process. Under a real-time CPU limit
# (RLIMIT_RTTIME, LAB_DELAY_RTTIME_US of CPU without sleeping; a healthy device sleeps every few ms): a
# device that reaches it gets SIGXCPU, drops to ordinary priority and logs realtime_cpu_limit, instead
# of starving the lab's ordinary processes; ten times that and the kernel kills it.
LAB_DELAY_RT=${LAB_DELAY_RT:-1}
LAB_DELAY_RTTIME_US=${LAB_DELAY_RTTIME_US:-500000}

_lab_delay_state() {  # VAR: its value in the current lab's state.env (empty when absent)
  [ -f "$LAB_DIR/state.env" ] || return 0
  ( SLBX_LAB_DELAY_OWNERS='' SLBX_LAB_DELAY_DEVICES=(); source "$LAB_DIR/state.env"; eval "printf '%s\\n' \"\${$1[@]}\"" )
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
  local mtu vxlan_port o kind port host all='' k=0
  read -r _ mtu < <(awk '$1 == "fabric"' "$plan")
  vxlan_port=$(sed -n 's/^[[:space:]]*vxlanPort:[[:space:]]*\([0-9]*\).*/\1/p' "$LAB_DIR/config.yaml" | head -n 1)
  declare -A links=()  # namespace node -> --link arguments
  for o in $owners; do
    all+=${all:+,}$o
    k=$((k + 1))
    read -r kind port host < <(awk -v n="$o" '($1 == "mux" || $1 == "host") && $2 == n { print $1, $5, "-" }
      $1 == "router" && n == "router" { print "router", $6, "-" } $1 == "controller" && n == "controller" { print "controller", $4, "-" }
      $1 == "nic" && $2 == n { print "nic", $4, $3 }' "$plan")
    if [ "$kind" = nic ]; then
      local H=$SLBX_LAB_PREFIX$host nmtu
      nmtu=$(ip netns exec "$H" cat "/sys/class/net/$port/mtu")
      ip -n "$H" link set "$port" down
      ip -n "$H" link set "$port" name "dl$k"
      ip -n "$H" link add "$port" mtu "$nmtu" type veth peer name "dl${k}b" mtu "$nmtu"
      ip netns exec "$H" sysctl -q -w "net/ipv6/conf/$port/disable_ipv6=1" "net/ipv6/conf/dl${k}b/disable_ipv6=1" "net/ipv6/conf/dl$k/disable_ipv6=1"
      _lab_tx_off "$H" "$port" "dl$k" "dl${k}b"
      ip -n "$H" link set "dl$k" up
      ip -n "$H" link set "dl${k}b" up
      ip -n "$H" link set "$port" up
      links[$host]+=" --link $o:dl$k:dl${k}b"
    else
      [ -n "$port" ] && ip -n "$F" link show "$port" >/dev/null 2>&1 || {
        _lab_err "delay link: $o has no fabric port in this lab (the controller is there only with the daemons)"; return 1; }
      ip -n "$F" link add "dl$k" mtu "$mtu" type veth peer name "dl${k}b" mtu "$mtu"
      _lab_tx_off "$F" "dl$k" "dl${k}b"
      ip -n "$F" link set "dl$k" up
      ip -n "$F" link set "$port" nomaster
      ip -n "$F" link set "dl${k}b" master br0 up
      links[fabric]+=" --link $o:$port:dl$k"
    fi
  done
  _lab_state_add "$state" SLBX_LAB_DELAY_OWNERS "$all"
  local node pids=() nodes=() prio=()
  if [ "$LAB_DELAY_RT" = 1 ] && command -v chrt >/dev/null; then
    prio=(chrt -f 10)
    if command -v prlimit >/dev/null; then prio=(prlimit "--rttime=$LAB_DELAY_RTTIME_US:$((LAB_DELAY_RTTIME_US * 10))" "${prio[@]}")
    else _lab_log "delay links: no prlimit: real-time without a CPU limit"; fi
  fi
  for node in "${!links[@]}"; do
    # shellcheck disable=SC2086  # the --link arguments: node names and interface names, no spaces
    _lab_spawn "$node" delay-link "delay links of $node" "$LAB_DIR/logs/delay-link-$node.log" \
      "${prio[@]}" "${LAB_NODE[@]}" "$LAB_DELAY_JS" run --plan "$plan" --delays "$LAB_DIR/delays.yaml" --owners "$all" ${links[$node]} \
      --vxlan-port "${vxlan_port:-4789}" --status "127.0.0.1:$LAB_DELAY_STATUS_PORT"
    _lab_state_add "$state" SLBX_LAB_DELAY_DEVICES "$node $LAB_SPAWNED_PID" array
    pids+=("$LAB_SPAWNED_PID") nodes+=("$node")
  done
  local i j
  for j in "${!nodes[@]}"; do
    for i in $(seq 1 150); do
      ip netns exec "$SLBX_LAB_PREFIX${nodes[$j]}" curl -sf -m 1 "http://127.0.0.1:$LAB_DELAY_STATUS_PORT/status" >/dev/null 2>&1 && continue 2
      _lab_pid_alive "${pids[$j]}" || break
      sleep 0.1
    done
    _lab_err "the delay link device of ${nodes[$j]} did not start:"
    _lab_tail "$LAB_DIR/logs/delay-link-${nodes[$j]}.log"
    return 1
  done
  _lab_log "delay links on $all ($(grep -c between "$LAB_DIR/delays.yaml") pairs; devices in ${nodes[*]})"
}

# _lab_delay_report: a line per running device (lab_setup_scenario's EXIT trap, before lab_down), from
# its /status, also kept as RUN/delay-status-NODE.json: its scheduling, and per pair and direction the
# frames, how late they left (max), and anything dropped. Reports; never fails.
_lab_delay_report() {
  local devs node pid json
  devs=$(lab_delay_pids 2>/dev/null) || return 0
  while read -r node pid; do
    if ! json=$(_lab_delay_get "$node"); then _lab_log "delay link $node (pid $pid): no /status"; continue; fi
    printf '%s\n' "$json" >"$LAB_DIR/delay-status-$node.json"
    _lab_log "delay link $node (pid $pid): $(printf '%s' "$json" | node -e '
      let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
        const st = JSON.parse(s);
        const sch = st.scheduling ?? {};
        const parts = [sch.demoted ? `DEMOTED at ${sch.demoted.at} (${sch.demoted.result})` : sch.policy ?? "?"];
        if (st.loop) parts.push(`its event loop late by up to ${st.loop.delayMaxMs} ms (p99 ${st.loop.delayP99Ms}; ${st.loop.gcPauses} GC pauses, longest ${st.loop.gcMaxMs} ms)`);
        for (const p of st.pairs ?? []) for (const d of ["out", "in"]) {
          const c = p[d];
          parts.push(`${p.owner}-${p.peer} ${p.ms} ms ${d}: ${c.frames} frames, late max ${c.lateMaxMs} ms` + (c.drop_queue_full ? `, ${c.drop_queue_full} dropped (queue full)` : ""));
        }
        for (const l of st.links ?? []) {
          const bad = ["drop_ring_full_out", "drop_ring_full_in", "send_error_out", "send_error_in", "drop_truncated"].filter((k) => l[k] > 0);
          if (bad.length > 0) parts.push(`${l.owner}: ${bad.map((k) => `${k} ${l[k]}`).join(", ")}`);
        }
        console.log(parts.join("; "));
      });' 2>&1)"
  done <<<"$devs"
  return 0
}

lab_delay_pids() {
  _lab_require_up || return 1
  local line n=0
  while read -r line; do
    [ -n "$line" ] || continue
    _lab_pid_ours "${line#* }" || continue
    printf '%s\n' "$line"
    n=$((n + 1))
  done < <(_lab_delay_state SLBX_LAB_DELAY_DEVICES)
  [ "$n" -gt 0 ]
}

_lab_delay_get() {  # NODE: the device's /status there
  ip netns exec "$SLBX_LAB_PREFIX$1" curl -sf -m 5 "http://127.0.0.1:$LAB_DELAY_STATUS_PORT/status"
}

lab_delay_status() {  # [NODE]
  _lab_require_up || return 1
  local devs
  devs=$(lab_delay_pids) || { _lab_err "lab '$LAB_NAME' has no running delay links (lab_up --delays FILE)"; return 1; }
  if [ $# -gt 0 ]; then _lab_delay_get "$1"; return; fi
  local node pid sep='{'
  while read -r node pid; do
    printf '%s\n"%s": ' "$sep" "$node"
    _lab_delay_get "$node" || return 1
    sep=','
  done <<<"$devs"
  printf '}\n'
}

_lab_delay_generation() {  # NODE
  _lab_delay_get "$1" | sed -n 's/^  "generation": \([0-9]*\),$/\1/p'
}

lab_delay_set() {  # A B MS
  [ $# = 3 ] || { _lab_err 'usage: lab_delay_set A B MS (MS: ms of round trip added between nodes A and B)'; return 2; }
  _lab_require_up || return 1
  local devs owners node pid before=() after i j
  devs=$(lab_delay_pids) || { _lab_err "lab '$LAB_NAME' has no running delay links (lab_up --delays FILE builds them)"; return 1; }
  owners=$(_lab_delay_state SLBX_LAB_DELAY_OWNERS)
  "${LAB_NODE[@]}" "$LAB_DELAY_JS" set --plan "$LAB_DIR/plan.txt" --delays "$LAB_DIR/delays.yaml" --links "$owners" "$1" "$2" "$3" || return 1
  local nodes=() pids=()
  while read -r node pid; do nodes+=("$node") pids+=("$pid"); done <<<"$devs"
  for j in "${!nodes[@]}"; do before[$j]=$(_lab_delay_generation "${nodes[$j]}") || return 1; done
  for j in "${!nodes[@]}"; do kill -HUP "${pids[$j]}"; done
  for j in "${!nodes[@]}"; do
    for i in $(seq 1 200); do
      after=$(_lab_delay_generation "${nodes[$j]}") || return 1
      [ -n "$after" ] && [ "$after" -gt "${before[$j]}" ] && continue 2
      if _lab_delay_get "${nodes[$j]}" | grep -q '"lastReloadError": "'; then
        _lab_err "the delay link of ${nodes[$j]} refused the file:"; _lab_delay_get "${nodes[$j]}" | grep lastReloadError >&2; return 1
      fi
      sleep 0.05
    done
    _lab_err "the delay link of ${nodes[$j]} did not apply $1 $2 $3 within 10 s"
    return 1
  done
  _lab_log "delay $1 $2: $3 ms"
}
