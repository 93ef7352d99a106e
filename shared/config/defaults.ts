// Defaults and limits of every field, in one place (docs/config.md lists them).
import { DEFAULT_HASH_SEED } from '../flow-hash.js';
import { VXLAN_PORT } from '../vxlan.js';
import type { Underlay } from './types.js';

export const CONFIG_DEFAULTS = deepFreeze({
  version: 1 as const,
  hashSeed: DEFAULT_HASH_SEED,
  maglevTableSize: 65537,
  fabric: { mtu: 1500, vxlanPort: VXLAN_PORT, underlay: 'ipv4' as Underlay },
  flowTable: {
    maxFlows: 1_000_000,
    tcpIdleTimeoutS: 240,
    udpIdleTimeoutS: 30,
    otherIdleTimeoutS: 30,
    untrustedMaxFlows: 100_000,
    untrustedTimeoutS: 5,
    maxFastpathFlows: 100_000,
    fastpathUdpDatagrams: 2,
    hostMaxFlows: 1_000_000,
    snatMaxFlows: 250_000,
  },
  probe: { path: '/', intervalMs: 5000, timeoutMs: 2000, upThreshold: 2, downThreshold: 2 },
  pool: { latencySensitivityMs: 0 },
  /** A pool's `latency` section (latency routing: docs/latency.md); absent = no measurement. */
  latency: { intervalMs: 1000, samples: 5, hysteresisMs: 2 },
  backend: { priority: 1, weight: 50, enabled: true, drain: false },
  rule: { distribution: '5-tuple' as const, allDown: 'drop' as const },
  bgp: {
    holdTimeS: 9,
    reconnectMinMs: 500,
    reconnectMaxMs: 8000,
    shutdownGraceMs: 300,
    peerPort: 179,
    bfd: { enabled: false, intervalMs: 100, multiplier: 3 },
  },
});

/** Inclusive integer ranges. `probe.timeoutMs` is further bounded by the probe's intervalMs. */
export const CONFIG_LIMITS = deepFreeze({
  hashSeed: [0, 0xffffffff],
  maglevTableSize: [7, 16777213],
  mtu: [1280, 9216],
  port: [1, 65535],
  maxFlows: [1, 100_000_000],
  /** Two host flow-table entries a flow. */
  snatMaxFlows: [1, 50_000_000],
  fastpathUdpDatagrams: [2, 1000],
  idleTimeoutS: [1, 86400],
  vni: [1, 16777215],
  /** IEEE 802.1Q: 0 (priority tag only) and 4095 are reserved. */
  vlanId: [1, 4094],
  intervalMs: [100, 3_600_000],
  timeoutMs: [10, 3_600_000],
  threshold: [1, 100],
  latencySensitivityMs: [0, 10000],
  latencyIntervalMs: [100, 60_000],
  latencySamples: [1, 100],
  latencyHysteresisMs: [0, 10000],
  priority: [1, 5],
  weight: [1, 1000],
  probePathLength: [1, 1024],
  asn: [1, 4294967294],
  holdTimeS: [0, 65535],
  keepaliveS: [1, 21845],
  reconnectMs: [100, 600_000],
  shutdownGraceMs: [0, 60_000],
  bfdIntervalMs: [10, 10_000],
  bfdMultiplier: [1, 255],
} as const satisfies Record<string, readonly [number, number]>);

/**
 * MUXes one config (one controller) may list: the SDN SLB manager's tested limit ("one active SLB
 * manager supports eight MUX instances"). A ninth is refused, not warned (docs/config.md, muxes[]).
 */
export const MAX_MUXES_PER_CONTROLLER = 8;

/** Names of networks, muxes, hosts, nics, probes, pools and rules. */
export const CONFIG_NAME_RE = /^[a-z0-9][a-z0-9-]{0,31}$/;
/** Linux IFNAMSIZ - 1: the longest interface name. */
export const IFNAME_MAX_BYTES = 15;

export function deepFreeze<T>(v: T): T {
  if (typeof v !== 'object' || v === null || ArrayBuffer.isView(v) || Object.isFrozen(v)) return v;
  for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  return Object.freeze(v);
}
