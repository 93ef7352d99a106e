#!/usr/bin/env bash
# 40-site-to-site-nat (issue 15, point 5): two tenants with the same addresses (a-h1vm1 and b-h1vm1 are both
# 192.0.2.10, on VNIs 5001 and 5002; examples/two-tenants-outbound.yaml) reach a remote server on the
# client side (scripts/lab/snat-server.ts in client1, 198.51.100.10) through one public IP,
# 203.0.113.200. Each VM opens 200 concurrent TCP connections (scripts/lab/snat-client.ts, each
# exchanging data for 3 s). Verified (scripts/scenarios/lib/site-to-site-nat.ts) from the server's capture
# and records (one source address, no frontend port twice), host1's fabric capture (each tenant's
# replies in its own VNI), the VMs' port captures (every reply at the right VM; slbx's codecs and tshark),
# the client tool's records (every connection completed) and host1's counters (translated both ways,
# nothing dropped for a wrong VNI, exhaustion or a missing flow). About 60-120 s (the lab's start most).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
CONNECTIONS=${CONNECTIONS:-200}
SERVER=198.51.100.10
FRONTEND=203.0.113.200
HOST=host1
lab_setup_scenario sc40
lab_up --config examples/two-tenants-outbound.yaml
rc=0
lab_snat_server_start client1
lab_capture_start client1 eth0 server >/dev/null
lab_capture_start "$HOST" fab0 "$HOST" >/dev/null
for n in a-h1vm1 b-h1vm1; do lab_capture_start "$n" eth0 "$n" >/dev/null; done
sc_counters "$HOST" "$LAB_DIR/counters-$HOST-before.json" || rc=1

# both tenants at once, the same DIP, ports chosen by each VM's own kernel
pids=()
for n in a-h1vm1 b-h1vm1; do
  lab_snat_client "$n" --server "$SERVER" --tcp "$CONNECTIONS" --seconds 3 --ramp-ms 2000 --timeout-ms 60000 \
    --json "$LAB_DIR/client-$n.json" >"$LAB_DIR/client-$n.out" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for n in a-h1vm1 b-h1vm1; do tail -n 3 "$LAB_DIR/client-$n.out"; done

sc_counters "$HOST" "$LAB_DIR/counters-$HOST-after.json" || rc=1
lab_snat_server_stop >/dev/null || rc=1
lab_capture_stop_all || rc=1
"${SC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/site-to-site-nat.js" verify --run "$LAB_DIR" --server "$SERVER" --port 9000 \
  --frontend "$FRONTEND" --host "$HOST" --connections "$CONNECTIONS" \
  --tenant "a-h1vm1:5001:$LAB_DIR/client-a-h1vm1.json" --tenant "b-h1vm1:5002:$LAB_DIR/client-b-h1vm1.json" || rc=1
exit "$rc"
