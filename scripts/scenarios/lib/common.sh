# Shared steps of the scenario scripts (source after scripts/lab/lib.sh).
#   sc_capture_path          captures on every link the north-south path crosses, each named after its
#                            node: client1 (eth0), every mux and host (fab0), every nic (eth0)
#   sc_verify KIND ARGS...   runs a verifier (scripts/scenarios/lib/verify.ts) and returns its status
#   sc_client NODE ARGS...   runs the lab client in a node; returns its status without failing the script
#   sc_counters NODE FILE    saves a daemon's GET /counters JSON to FILE
#   sc_wait_for WHAT S CMD...  polls CMD every 0.1 s until it succeeds, up to S seconds; else names WHAT
#                            and returns 1 (wait for evidence that something happened, never a fixed sleep)
#   sc_established NODE ADDR [PORT]  prints how many TCP connections NODE has established to ADDR[:PORT]
#   sc_mux_flows [MUX...]    prints the new flows the MUXes (default: every MUX) placed so far, summed
#                            (flow_new + flow_replaced of their own /status)

SC_NODE=(node --enable-source-maps)

sc_capture_path() {
  local n
  lab_capture_start client1 eth0 client1 >/dev/null || return 1
  for n in $(lab_nodes mux) $(lab_nodes host); do lab_capture_start "$n" fab0 "$n" >/dev/null || return 1; done
  for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" >/dev/null || return 1; done
}

sc_verify() {
  local kind=$1; shift
  "${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/verify.js" "$kind" "$@"
}

sc_client() {
  local node=$1; shift
  lab_exec "$node" "${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/client.js" "$@"
}

sc_counters() {
  local node=$1 file=$2 port=9180
  [ "$(_lab_node_kind "$node")" = host ] && port=9181
  lab_exec "$node" curl -sf "http://127.0.0.1:$port/counters" >"$file"
}

# Prints a field of a daemon's status JSON (a path: io, counters.rx_packets; an object as one line of
# JSON) through lab_json_get; status 1 when the daemon does not answer or has no such field.
sc_status_field() {
  local node=$1 key=$2 body
  body=$(lab_daemon_status "$node") || return 1
  lab_json_get "$key" <<<"$body"
}

sc_now_us() { printf '%s' "${EPOCHREALTIME/./}"; }

# sc_wait_for WHAT SECONDS CMD...: the deadline is generous on purpose: a loaded machine is slow, not wrong
sc_wait_for() {
  local what=$1 s=$2 deadline; shift 2
  deadline=$(( $(sc_now_us) + s * 1000000 ))
  until "$@"; do
    if [ "$(sc_now_us)" -ge "$deadline" ]; then echo "[scenario] not seen within $s s: $what" >&2; return 1; fi
    sleep 0.1
  done
}

sc_established() {
  local node=$1 addr=$2 port=${3:-}
  [[ $addr == *:* ]] && addr="[$addr]"
  if [ -n "$port" ]; then lab_exec "$node" ss -Htn state established "( dport = :$port )" dst "$addr" | wc -l
  else lab_exec "$node" ss -Htn state established dst "$addr" | wc -l; fi
}

sc_mux_flows() {
  local m n=0 v muxes=("$@")
  [ ${#muxes[@]} -gt 0 ] || mapfile -t muxes < <(lab_nodes mux)
  for m in "${muxes[@]}"; do
    v=$(lab_daemon_status "$m" | node -e 'let t="";process.stdin.on("data",d=>t+=d).on("end",()=>{const c=JSON.parse(t).counters??{};console.log((c.flow_new??0)+(c.flow_replaced??0))})') || return 1
    n=$(( n + v ))
  done
  echo "$n"
}
