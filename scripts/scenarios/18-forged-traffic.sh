#!/usr/bin/env bash
# 18-forged-traffic: while 500 good requests run, (1) VXLAN from provider addresses that are no MUX or
# host of the config reaches a host agent, (2) a policy is pushed at the MUX's and the host agent's
# endpoints, which are read-only, and (3) the controller's API is called without the token from the
# management network (a host): a change, a forged health report ("h1vm1 is down"), an agent's policy
# watch (the client network cannot reach the API at all: the controller has no route to it). All are
# refused and counted (unknown_source; HTTP 405; HTTP 401 and the controller's refused.unauthorized),
# and nothing in the data path changes: the controller's state and every MUX's tables keep their
# generation, and every good request succeeds. Each step waits for evidence, not for time: the good
# traffic's flows placed by the MUXes before the forgeries, every injected frame counted by the host
# agent, and every agent on the controller's current generation before the state is read again.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=500
lab_setup_scenario sc18
lab_up
mac_of() { lab_exec "$1" cat "/sys/class/net/$2/address"; }
gens() { local out='' n; for n in $(lab_nodes mux); do out+="$n=$(sc_status_field "$n" generation),"; done; printf '%s' "${out%,}"; }
api=http://198.18.0.5:8480
sc_verify gen-unknown-vxlan --out "$LAB_DIR/unknown.pcap" --router-mac "$(mac_of router fab0)" --host-mac "$(mac_of host1 fab0)" \
  --host-pa 198.18.0.21 --nic-mac 02:00:c0:00:02:0a --vip 203.0.113.10
sc_counters host1 "$LAB_DIR/host-before.json"
lab_exec host1 curl -sf "$api/v1/state" >"$LAB_DIR/state-before.json"
gens_before=$(gens)
rc=0
sc_client client1 http --url http://203.0.113.10/ --count $REQUESTS --concurrency 4 --json "$LAB_DIR/client-http.json" >"$LAB_DIR/client-http.out" 2>&1 &
good=$!
EVIDENCE_S=${EVIDENCE_S:-60}
sc_wait_for "20 of the good requests' flows placed by the MUXes" "$EVIDENCE_S" eval '[ "$(sc_mux_flows)" -ge 20 ]' || rc=1
# (1) VXLAN from unknown provider addresses
sc_client router inject --interface fab0 --in "$LAB_DIR/unknown.pcap" || rc=1
# (2) a policy pushed at the daemons' endpoints (read-only)
policy=$(cat "$LAB_DIR/state-before.json")
code() { "$@" -s -o /dev/null -w '%{http_code}' || true; }
s_mux=$(code lab_exec mux1 curl -X POST -H 'content-type: application/json' --data "$policy" http://127.0.0.1:9180/status)
s_mux_put=$(code lab_exec mux1 curl -X PUT -H 'content-type: application/json' --data "$policy" http://127.0.0.1:9180/policy)
s_host=$(code lab_exec host1 curl -X POST -H 'content-type: application/json' --data "$policy" http://127.0.0.1:9181/status)
# (3) the controller's API without the token, from the management network (a host's namespace)
noauth() { lab_exec host1 curl -m 5 "$@"; }
s_patch=$(code noauth -X PATCH -H 'content-type: application/json' --data '{"drain":true}' "$api/v1/pools/web/backends/h1vm1")
s_delete=$(code noauth -X DELETE "$api/v1/vips/203.0.113.10")
s_health=$(code noauth -X POST -H 'content-type: application/json' --data '{"results":[{"nic":"h1vm1","probe":"http80","state":"down"}]}' "$api/v1/agents/host/host1/health")
s_watch=$(code noauth "$api/v1/agents/mux/mux1/policy?after=0&waitS=0")
s_badtoken=$(code noauth -X PATCH -H "authorization: Bearer $(printf 'cd%.0s' {1..32})" -H 'content-type: application/json' --data '{"drain":true}' "$api/v1/pools/web/backends/h1vm1")
wait "$good" || rc=1
# every injected frame judged by the host agent (its drop_in_unknown_source moved by the frames in the file)
unknown() { lab_exec host1 curl -sf http://127.0.0.1:9181/counters | node -e 'let t="";process.stdin.on("data",d=>t+=d).on("end",()=>console.log(JSON.parse(t).drop_in_unknown_source??0))'; }
injected=$(node -e 'import(process.argv[1]).then((m)=>{const p=m.readPcap(require("fs").readFileSync(process.argv[2]));console.log(typeof p==="number"?0:p.packets.length)})' \
  "$SLBX_ROOT/dist/shared/pcap-file.js" "$LAB_DIR/unknown.pcap")
unknown0=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).drop_in_unknown_source??0)' "$LAB_DIR/host-before.json")
sc_wait_for "the host agent judging the $injected injected frames" "$EVIDENCE_S" eval '[ "$(unknown)" -ge $(( unknown0 + injected )) ]' || rc=1
# every agent on the controller's current generation: a forged health report, had it been taken, would
# have made a new one, and the MUXes would have it now (the generations are compared below)
lab_slbctl wait --wait-s "$EVIDENCE_S" >/dev/null || rc=1
sc_counters host1 "$LAB_DIR/host-after.json"
lab_exec host1 curl -sf "$api/v1/state" >"$LAB_DIR/state-after.json"
lab_exec host1 curl -sf "$api/v1/stats" >"$LAB_DIR/stats.json"
# the client network does not reach the management API at all
if lab_exec client1 curl -s -m 2 -o /dev/null "$api/v1/state"; then echo 'FAIL  the client network cannot reach the controller API'; rc=1
else echo 'PASS  the client network cannot reach the controller API (no route back from the management network)'; fi
gens_after=$(gens)
cat "$LAB_DIR/client-http.out"
sc_verify forged --host-before "$LAB_DIR/host-before.json" --host-after "$LAB_DIR/host-after.json" \
  --mux-gens-before "$gens_before" --mux-gens-after "$gens_after" --state-before "$LAB_DIR/state-before.json" --state-after "$LAB_DIR/state-after.json" \
  --stats "$LAB_DIR/stats.json" --expect-unauthorized 5 --client-json "$LAB_DIR/client-http.json" --requests $REQUESTS \
  --statuses "daemon_POST_policy_to_mux1=$s_mux,daemon_PUT_policy_to_mux1=$s_mux_put,daemon_POST_policy_to_host1=$s_host,api_PATCH_drain_without_token=$s_patch,api_DELETE_vip_without_token=$s_delete,api_forged_health_report=$s_health,api_agent_watch_without_token=$s_watch,api_PATCH_with_a_wrong_token=$s_badtoken" || rc=1
exit "$rc"
