#!/usr/bin/env bash
# 15-two-tenants-same-dips: two tenants (VNIs 5001 and 5002) both use backends 192.0.2.10 (on host1)
# and 192.0.2.11 (on host2), each with its own VIP (examples/two-tenants.yaml). 1,000 requests to each
# VIP: every answer comes from the right tenant's backend; on the fabric each VIP travels in its own VNI
# to its own tenant's ports; each backend sees only its tenant's client. VXLAN forged with tenant A's VNI
# and tenant B's VIP (and B's VNI toward A's port) is dropped by the host agent and counted.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
lab_setup_scenario sc15
lab_up --config examples/two-tenants.yaml
for n in $(lab_nodes mux); do lab_capture_start "$n" fab0 "$n" >/dev/null; done
for n in $(lab_nodes nic); do lab_capture_start "$n" eth0 "$n" >/dev/null; done
rc=0
# tenant A's client and tenant B's client use different source addresses, so captures can tell them apart
sc_client client1 http --url http://203.0.113.10/ --source 198.51.100.10 --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/a.json" || rc=1
sc_client client1 http --url http://203.0.113.20/ --source 198.51.100.11 --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/b.json" || rc=1
mac_of() { lab_exec "$1" cat "/sys/class/net/$2/address"; }
sc_verify gen-forged --out "$LAB_DIR" --config "$LAB_DIR/config.yaml" --host host1 --mux-mac "$(mac_of mux1 fab0)" \
  --host-mac "$(mac_of host1 fab0)" --mux-pa 198.18.0.11 --client 198.51.100.12
sc_counters host1 "$LAB_DIR/host-before.json"
# from mux1's own port (its MAC: the host agent checks it; the bridge keeps learning it there)
sc_client mux1 inject --interface fab0 --in "$LAB_DIR/forged.pcap" || rc=1
sleep 0.3
sc_counters host1 "$LAB_DIR/host-after.json"
lab_capture_stop_all || rc=1
sc_verify tenants --run "$LAB_DIR" --a-json "$LAB_DIR/a.json" --b-json "$LAB_DIR/b.json" --requests "$REQUESTS" \
  --host-before "$LAB_DIR/host-before.json" --host-after "$LAB_DIR/host-after.json" --expected "$LAB_DIR/forged-expected.json" || rc=1
exit "$rc"
