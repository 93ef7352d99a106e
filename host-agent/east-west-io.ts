// The host agent daemon's east-west I/O (docs/east-west.md): what the data plane in host-agent/east-west.ts
// needs from the process. Its state (the host flow table, the clocks, the fabric MAC, the redirect HMAC
// under the policy key) is built here from the config and carried across policies while the targets and
// MUXes it indexes stay the same; the daemon's timer advances the clocks and sweeps the table (idle
// expiry); the capture takes redirects (UDP REDIRECT_PORT to our PA) beside VXLAN; /status and GET /flows
// list the entries.
import { formatIpv4, formatIpv6 } from '../shared/addr.js';
import { hostDsrQuota, type SlbxConfig } from '../shared/config.js';
import { REDIRECT_PORT } from '../shared/redirect.js';
import { redirectMacFor } from '../runtime/redirect-mac.js';
import { newEwState, type EwState } from './east-west.js';
import {
  FLOW_DSR,
  FLOW_DSR_CLOSING,
  FLOW_FASTPATH,
  FLOW_KIND_NAMES,
  FLOW_SNAT_IN,
  FLOW_SNAT_OUT,
  FLOW_TO_MUX,
  type HostFlowQuotas,
  type HostFlowQuotaUse,
  type HostFlowTable,
} from './flow-table.js';
import type { SnatEngine } from './snat.js';
import type { HostTables } from './tables.js';

/** How often the daemon advances the east-west clocks and sweeps part of the host flow table. */
export const EW_TICK_MS = 500;
/** Slots swept per tick: at least this many, or enough for a full pass about every 10 s. */
const SWEEP_MIN_SLOTS = 1024;

/**
 * The host flow table's bound and each feature's quota, in entries, from the config: the whole table
 * flowTable.hostMaxFlows; east-west maxFastpathFlows; outbound NAT two entries for each of its
 * snatMaxFlows; the return path the rest (validation keeps it at 1 or more).
 */
export function hostFlowBounds(config: SlbxConfig): { maxFlows: number; quotas: HostFlowQuotas } {
  const f = config.flowTable;
  return { maxFlows: f.hostMaxFlows, quotas: { eastWest: f.maxFastpathFlows, dsr: hostDsrQuota(f), snat: 2 * f.snatMaxFlows } };
}

/** A fresh east-west state for `config`: an empty host flow table of flowTable.hostMaxFlows entries and its quotas. */
export function newDaemonEwState(config: SlbxConfig, fabricMac: Uint8Array, policyKey: string | null): EwState {
  const b = hostFlowBounds(config);
  const s = newEwState(b.maxFlows, b.quotas);
  s.mac = policyKey === null || policyKey === '' ? null : redirectMacFor(policyKey);
  configureEwState(s, config, fabricMac);
  tickEwState(s, 0);
  return s;
}

/** The config's settings the data plane reads from the state: timeouts, hash seed, MTU, our fabric MAC. */
export function configureEwState(s: EwState, config: SlbxConfig, fabricMac: Uint8Array): void {
  s.tcpIdleS = config.flowTable.tcpIdleTimeoutS;
  s.udpIdleS = config.flowTable.udpIdleTimeoutS;
  s.hashSeed = config.hashSeed;
  s.mtu = config.fabric.mtu;
  s.fabricMac = fabricMac;
}

/**
 * The state for new tables: the old one (its flows) when the entries still mean the same (the same
 * targets, by name, host and MAC, at the same indexes, and the same MUXes in the same order), else a
 * fresh one: the east-west flows then go to the MUX again and are redirected again (the MUX's flow table
 * still holds them: same DIP, no reset). A new bound or quota (flowTable.hostMaxFlows, maxFastpathFlows,
 * snatMaxFlows) also starts a fresh table. The return path's entries and outbound NAT's (`snat`, the
 * engine whose entries are in the old table) are carried into a fresh table; what a smaller one cannot
 * take is counted in the new state's notCarried (return-path entries and NAT flows, which end).
 */
export function carryEwState(
  old: EwState,
  oldTables: HostTables,
  next: HostTables,
  config: SlbxConfig,
  fabricMac: Uint8Array,
  snat: SnatEngine | null = null,
): EwState {
  const bounds = hostFlowBounds(config);
  const a = oldTables.ew;
  const b = next.ew;
  const same =
    a.targets.length === b.targets.length &&
    a.targets.every((t, i) => {
      const u = b.targets[i]!;
      return t.name === u.name && t.host === u.host && t.pa4 === u.pa4 && t.mac.every((x, k) => x === u.mac[k]);
    }) &&
    a.muxPa4.length === b.muxPa4.length &&
    a.muxPa4.every((x, i) => x === b.muxPa4[i]) &&
    old.flows.sameBounds(bounds.maxFlows, bounds.quotas);
  let s = old;
  if (!same) {
    s = newEwState(bounds.maxFlows, bounds.quotas);
    s.mac = old.mac;
    s.nowS = old.nowS;
    s.unixS = old.unixS;
    s.journal = old.journal;
    // the return path's entries (host-agent/dsr-flows.ts) name a 5-tuple and a frontend port, not a
    // target or a MUX: they mean the same under the new tables and are kept (a policy change must not
    // drop every established flow's replies until its client speaks again)
    let lost = 0;
    const used = old.flows.quotaUse();
    s.flows.table.reserve(used.dsr.used + used.snat.used); // one allocation, no rehash while carrying
    old.flows.table.forEach(old.nowS, (k, v, expiresAt) => {
      const kind = v >>> 24;
      if (kind !== FLOW_DSR && kind !== FLOW_DSR_CLOSING) return;
      s.flows.setKeyWords(k);
      if (!s.flows.insert(kind, v & 0xffffff, expiresAt)) lost++;
    });
    // outbound NAT's entries point at the engine's slots: the engine writes them into the new table
    if (snat !== null && snat.table === old.flows) lost += snat.rehome(s.flows);
    s.notCarried = lost;
  }
  configureEwState(s, config, fabricMac);
  return s;
}

/** The clocks (uptime seconds for expiry, Unix seconds for redirects), then a slice of the idle sweep. */
export function tickEwState(s: EwState, sweepSlots: number): number {
  s.nowS = Math.floor(process.uptime()) + 1;
  s.unixS = Math.floor(Date.now() / 1000);
  if (sweepSlots <= 0) return 0;
  return s.flows.sweep(s.nowS, sweepSlots);
}

/** Slots to sweep per tick for a full pass about every 10 s. */
export function sweepSlotsOf(s: EwState): number {
  return Math.max(SWEEP_MIN_SLOTS, Math.ceil(s.flows.table.capacity / (10_000 / EW_TICK_MS)));
}

/** The capture filter's clause for Fastpath redirects to our IPv4 provider address. */
export function redirectCaptureClause(pa4: string): string {
  return `(udp dst port ${REDIRECT_PORT} and dst host ${pa4})`;
}

/** One entry of the host flow table, as GET /flows and slbctl flows show it. */
export interface ListedHostFlow {
  kind: string;
  vni: number;
  protocol: 'tcp' | 'udp' | number;
  client: string;
  vip: string;
  /** to_mux: the MUX the flow was sent to; fastpath: the DIP's nic, its host and address. */
  mux?: string;
  backend?: string;
  host?: string;
  /** snat_out (outbound NAT; client: the DIP:port that opened it, vip: the remote endpoint): the frontend IP:port it leaves from. */
  frontend?: string;
  expiresInS: number;
}

function addrOf(k: Uint32Array, off: number, family: number): string {
  return family === 4 ? formatIpv4(k[off]!) : formatIpv6(k, off);
}

/**
 * Up to `limit` live entries of the host flow table. An outbound NAT flow (`snat`: the engine, for its
 * frontend and expiry) is listed once, from its snat_out entry; its snat_in entry is not listed.
 */
export function listHostFlows(s: EwState, tables: HostTables, limit: number, snat: SnatEngine | null = null): ListedHostFlow[] {
  const out: ListedHostFlow[] = [];
  const ew = tables.ew;
  s.flows.table.forEach(s.nowS, (k, v, expiresAt) => {
    if (out.length >= limit) return;
    const family = k[0]! & 0xff;
    const proto = k[9]! & 0xff; // the high bits are the key space (host-agent/flow-table.ts)
    const sport = k[10]! >>> 16;
    const dport = k[10]! & 0xffff;
    const kind = v >>> 24;
    const action = v & 0xffffff;
    if (kind === FLOW_SNAT_IN) return;
    if (kind === FLOW_SNAT_OUT) {
      // key: (VNI, DIP, remote, protocol, DIP port, remote port); the slot has the frontend and the clock
      const at = (off: number, port: number) => (family === 4 ? `${addrOf(k, off, 4)}:${port}` : `[${addrOf(k, off, 6)}]:${port}`);
      const nic = tables.nics.find(
        (n) => n.network.vni === k[0]! >>> 8 && (family === 4 ? n.addr4 === k[1] : n.addr6?.every((w, i) => w === k[1 + i])),
      );
      const f = snat?.slotFrontend(action);
      out.push({
        kind: FLOW_KIND_NAMES[kind]!,
        vni: k[0]! >>> 8,
        protocol: proto === 6 ? 'tcp' : proto === 17 ? 'udp' : proto,
        client: at(1, sport),
        vip: at(5, dport),
        backend: nic?.name ?? at(1, sport),
        frontend: f === undefined ? '?' : family === 4 ? `${formatIpv4(f.fip[0]!)}:${f.fport}` : `[${formatIpv6(f.fip, 0)}]:${f.fport}`,
        expiresInS: f === undefined ? 0 : Math.max(0, f.expiresAt - s.nowS),
      });
      return;
    }
    if (kind === FLOW_DSR || kind === FLOW_DSR_CLOSING) {
      // a load-balanced flow's return path (host-agent/dsr-flows.ts): the key is the reply's DIP:port -> client:port
      const at = (off: number, port: number) => (family === 4 ? `${addrOf(k, off, 4)}:${port}` : `[${addrOf(k, off, 6)}]:${port}`);
      const nic = tables.nics.find(
        (n) => n.network.vni === k[0]! >>> 8 && (family === 4 ? n.addr4 === k[1] : n.addr6?.every((w, i) => w === k[1 + i])),
      );
      const rule = nic?.outbound.get(((family << 24) | (proto << 16) | sport) >>> 0);
      const f: ListedHostFlow = {
        kind: FLOW_KIND_NAMES[kind]!,
        vni: k[0]! >>> 8,
        protocol: proto === 6 ? 'tcp' : proto === 17 ? 'udp' : proto,
        client: at(5, dport),
        vip: rule === undefined ? `?:${action}` : family === 4 ? `${rule.vip.text}:${action}` : `[${rule.vip.text}]:${action}`,
        backend: nic === undefined ? at(1, sport) : `${nic.name} ${at(1, sport)}`,
        expiresInS: expiresAt - s.nowS,
      };
      out.push(f);
      return;
    }
    const f: ListedHostFlow = {
      kind: FLOW_KIND_NAMES[kind] ?? `kind_${kind}`,
      vni: k[0]! >>> 8,
      protocol: proto === 6 ? 'tcp' : proto === 17 ? 'udp' : proto,
      client: family === 4 ? `${addrOf(k, 1, 4)}:${sport}` : `[${addrOf(k, 1, 6)}]:${sport}`,
      vip: family === 4 ? `${addrOf(k, 5, 4)}:${dport}` : `[${addrOf(k, 5, 6)}]:${dport}`,
      expiresInS: expiresAt - s.nowS,
    };
    if (kind === FLOW_TO_MUX) f.mux = tables.peers[ew.muxPeers[action] ?? -1]?.name ?? `mux#${action}`;
    if (kind === FLOW_FASTPATH) {
      const t = ew.targets[action];
      f.backend = t?.name ?? `target#${action}`;
      if (t !== undefined) f.host = t.host;
    }
    out.push(f);
  });
  return out;
}

/**
 * The east-west part of GET /status, which is also the host flow table's: live entries by kind (every
 * kind, zeros included), the table's bound (maxFlows), each feature's quota and entries (quotas), the
 * east-west quota under its old name (maxFastpathFlows), whether redirects can be checked.
 */
export function ewStatus(s: EwState): Record<string, unknown> {
  return ewStatusOf([ewTableCount(s.flows, s.nowS)], s.mac !== null);
}

/** One flow table's share of /status's eastWest: its entries by kind name, and each feature's quota and use. */
export interface EwTableCount {
  flowKinds: Record<string, number>;
  maxFlows: number;
  quotas: HostFlowQuotaUse;
}

/** `flows`'s count by kind (a walk over every slot), bound and quotas. */
export function ewTableCount(flows: HostFlowTable, nowS: number): EwTableCount {
  return { flowKinds: flows.countByKind(nowS), maxFlows: flows.limit.max, quotas: flows.quotaUse() };
}

/**
 * /status's eastWest over one or more flow tables (--workers: one per worker, from their last reports):
 * entries by kind, bounds and quotas summed (each worker's table has the config's bound), every kind named
 * (zeros included). A Fastpath redirect is installed in every worker, so its entries count once per worker.
 */
export function ewStatusOf(tables: readonly EwTableCount[], redirectKey: boolean): Record<string, unknown> {
  const flows: Record<string, number> = {};
  for (const name of Object.values(FLOW_KIND_NAMES)) flows[name] = 0;
  const quotas: Record<string, { max: number; used: number }> = {};
  let maxFlows = 0;
  for (const t of tables) {
    maxFlows += t.maxFlows;
    for (const [kind, n] of Object.entries(t.flowKinds)) flows[kind] = (flows[kind] ?? 0) + n;
    for (const [feature, q] of Object.entries(t.quotas)) {
      const sum = (quotas[feature] ??= { max: 0, used: 0 });
      sum.max += q.max;
      sum.used += q.used;
    }
  }
  return {
    flows,
    maxFlows,
    quotas,
    maxFastpathFlows: quotas['eastWest']?.max ?? 0,
    redirectKey,
  };
}
