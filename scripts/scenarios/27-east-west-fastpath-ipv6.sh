#!/usr/bin/env bash
# 27-east-west-fastpath-ipv6 (issue 14): scenario 25 over the IPv6 internal VIP 2001:db8:e::100 (the
# client VM h1cl1 at 2001:db8:e:1::20; the underlay between hosts and MUXes stays IPv4, which is what
# host-originated VXLAN and redirects use): the same traffic, captures and checks
# (scripts/scenarios/lib/east-west.ts with --family 6).
set -euo pipefail
FAMILY=6 exec bash "$(dirname "$0")/25-east-west-fastpath.sh" "$@"
