#!/usr/bin/env bash
# 08-drain-keeps-flows: a long TCP transfer (an HTTP download of 16 MB read at 2 MB/s, which stops
# reading at 6 MB until the change is done, so that it outlives the change by construction on any
# machine) runs to one backend; that backend is drained through the controller (slbctl backend drain): the transfer runs to completion,
# every one of its packets still going to that backend, while all new connections go to the others.
# Then the same with a fifth backend (h2vm3, a nic of the lab that was in no pool) added to the pool
# during a transfer: the transfer does not move, and Maglev moves only about 1/5 of the new flows, all
# of them to the new backend (checked against the old and new tables, recomputed from the configs the
# controller served). Verified from the captures (the MUXes' VXLAN, the backends' eth0; tshark
# cross-check) and the client's records.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
REQUESTS=${REQUESTS:-1000}
BYTES=${BYTES:-16000000}
RATE=${RATE:-2000000}          # bytes/s the client reads the long download at
HOLD_AT=${HOLD_AT:-6000000}    # it reads no further before the change is done
VIP=203.0.113.10
lab_setup_scenario sc08

# the lab's config with a fifth nic, h2vm3 on host2, in no pool yet (its backends run all the same)
mkdir -p "$LAB_DIR"
node --input-type=module -e '
  import { readFileSync, writeFileSync } from "node:fs";
  import { parse, stringify } from "yaml";
  const raw = parse(readFileSync(process.argv[1], "utf8"));
  raw.nics.push({ name: "h2vm3", host: "host2", network: "tenant-a", port: "h2vm3", mac: "02:00:c0:00:02:0e", addresses: ["192.0.2.14", "2001:db8:d::14"] });
  writeFileSync(process.argv[2], stringify(raw));
' examples/lab.yaml "$LAB_DIR/five-nics.yaml"
lab_up --config "$LAB_DIR/five-nics.yaml"
# what the kernel may hold for the client's download (receive buffer; the window, so in flight too) at
# most 1 MiB, not autotuned up to tcp_rmem's 6-32 MiB: the backend cannot have sent more than HOLD_AT
# + 1 MiB before the client reads past HOLD_AT, so most of the transfer comes after the change
lab_exec client1 sh -c 'echo "4096 131072 1048576" >/proc/sys/net/ipv4/tcp_rmem'
for n in h1vm1 h1vm2 h2vm1 h2vm2; do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 20; done
hc_wait_mux_candidates web/http80 h1vm1,h1vm2,h2vm1,h2vm2 20 >/dev/null
# the links the verifier reads: the MUXes' fabric side and every backend (fewer captures, none dropped)
for n in $(lab_nodes mux); do lab_capture_start "$n" fab0 "$n" >/dev/null; done
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" >/dev/null; done
rc=0

# A long download in the background (the lab client's download mode): read at RATE bytes/s, and
# never past HOLD_AT bytes before the scenario has made its change and created the release file, so
# that it outlives the change by construction, however slow the machine. When the change is done the
# scenario reads how much the backend's socket has sent so far (ss: bytes_sent, retransmissions
# included), and the check below requires that it had data left to send. Finds its flow (the
# "connected ADDR PORT" line) in the MUXes' flow tables (GET /flows) to learn its backend. Sets
# LONG_PID, LONG_OUT, LONG_JSON, LONG_RELEASE, LONG_SRC, LONG_NIC.
start_long() {
  LONG_OUT=$LAB_DIR/long-$1.out LONG_JSON=$LAB_DIR/long-$1.json LONG_RELEASE=$LAB_DIR/long-$1.released
  rm -f "$LONG_RELEASE"
  sc_client client1 download --url "http://$VIP/bytes/$BYTES" --rate "$RATE" --hold-at "$HOLD_AT" --release-file "$LONG_RELEASE" \
    --timeout-ms 120000 --json "$LONG_JSON" >"$LONG_OUT" 2>&1 &
  LONG_PID=$!
  LONG_NIC=''
  local deadline=$(( $(hc_now_us) + 20000000 )) src='' m
  while [ -z "$LONG_NIC" ]; do
    [ "$(hc_now_us)" -lt "$deadline" ] || { echo "the long download's flow is not in any MUX's flow table after 20 s" >&2; return 1; }
    sleep 0.05
    src=$(awk '$1 == "connected" { print $2 ":" $3; exit }' "$LONG_OUT")
    LONG_SRC=$src
    [ -n "$src" ] || continue
    for m in $(lab_nodes mux); do
      LONG_NIC=$(lab_exec "$m" curl -s -m 2 'http://127.0.0.1:9180/flows?limit=10000' | node -e '
        let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
          const f = JSON.parse(s).find((x) => x.src === process.argv[1] && x.dst === process.argv[2] && x.protocol === "tcp");
          if (f) console.log(f.nic);
        });' "$src" "$VIP:80")
      [ -z "$LONG_NIC" ] || break
    done
  done
}

# When the change is done: what the backend's socket of the long download has sent so far (ss), then
# the release (the download may go on past HOLD_AT). Sets LONG_SENT.
release_long() {
  LONG_SENT=$(lab_exec "$LONG_NIC" ss -Htin state established "( sport = :80 and dst ${LONG_SRC%:*} and dport = :${LONG_SRC##*:} )" |
    awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^bytes_sent:/) { sub(/^bytes_sent:/, "", $i); print $i; exit } }')
  touch "$LONG_RELEASE"
}

# Waits for the long download, checks it completed and that the backend had data left to send after
# the change; sets LONG_IP and LONG_PORT (its flow).
finish_long() {
  local status=0 size='' code='' rec
  wait "$LONG_PID" || status=$?
  LONG_IP='' LONG_PORT=''
  read -r LONG_IP LONG_PORT size code < <(awk 'NF == 4 && $1 != "connected" && $1 != "held"' "$LONG_OUT" | tail -n 1) || true
  hc_check "the long download to $LONG_NIC ran to completion" "$([ "$status" = 0 ] && [ "$size" = "$BYTES" ] && [ "$code" = 200 ] && echo 1 || echo 0)" \
    "client exit $status, HTTP $code, $size of $BYTES bytes, from $LONG_IP:$LONG_PORT" || rc=1
  rec=$(node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).records[0]; console.log(`${r.receivedAtRelease} bytes read by the client at the release, after waiting ${r.heldMs} ms at the hold point`)' "$LONG_JSON")
  hc_check "it outlived the change by construction: when the change was done, $LONG_NIC still had $((BYTES - ${LONG_SENT:-$BYTES})) of its $BYTES bytes to send" \
    "$([ -n "$LONG_SENT" ] && [ "$LONG_SENT" -lt "$BYTES" ] && echo 1 || echo 0)" "its socket had sent ${LONG_SENT:-?} bytes (ss bytes_sent, headers and retransmissions included); $rec" || rc=1
}

# --- part 1: drain the backend of a running transfer
start_long drain
drained=$LONG_NIC
printf '[sc08] the long download goes to %s; draining it\n' "$drained"
change1=$(hc_now_us)
hc_ctl backend drain web "$drained" --wait
release_long
t0=$(hc_now_us)
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 8 --source 198.51.100.11-198.51.100.25 --json "$LAB_DIR/drained.json" || rc=1
others=$(printf '%s\n' h1vm1 h1vm2 h2vm1 h2vm2 | grep -vx "$drained" | paste -sd,)
hc_phase drained "$t0" "$(hc_now_us)" "$LAB_DIR/drained.json" allok count="$REQUESTS" only="$others"
finish_long
ip1=$LONG_IP port1=$LONG_PORT
hc_ctl backend undrain web "$drained" --wait

# --- part 2: a fifth backend joins during a transfer
hc_api /v1/state >"$LAB_DIR/state-before.json"
start_long add
kept=$LONG_NIC
printf '[sc08] the long download goes to %s; adding h2vm3 to the pool\n' "$kept"
change2=$(hc_now_us)
hc_ctl backend add web h2vm3 --wait
release_long
hc_api /v1/state >"$LAB_DIR/state-after.json"
for s in before after; do
  node -e 'const fs=require("fs");fs.writeFileSync(process.argv[2],JSON.stringify(JSON.parse(fs.readFileSync(process.argv[1],"utf8")).config))' \
    "$LAB_DIR/state-$s.json" "$LAB_DIR/config-$s.json"
done
t0=$(hc_now_us)
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 8 --source 198.51.100.26-198.51.100.41 --json "$LAB_DIR/added.json" || rc=1
hc_phase added "$t0" "$(hc_now_us)" "$LAB_DIR/added.json" allok count="$REQUESTS" only=h1vm1,h1vm2,h2vm1,h2vm2,h2vm3
finish_long
ip2=$LONG_IP port2=$LONG_PORT

sleep 0.3
lab_capture_stop_all || rc=1
printf '\ncaptures:\n'
hc_verify_phases --vip "$VIP" --port 80 \
  --long "$ip1,$port1,$drained,$change1" --long "$ip2,$port2,$kept,$change2" \
  --maglev "added,$LAB_DIR/config-before.json,$LAB_DIR/config-after.json,h2vm3" || rc=1
exit "$rc"
