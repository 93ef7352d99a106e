// MUX control plane: compiles the config plus backend health into the lookup tables the data plane
// reads (VIP -> rules -> Maglev table -> backend nic -> host). A compile makes a new value; the daemon
// swaps it in with one assignment between packets. Nic ids and learned host MACs carry over from the
// previous tables so that flow-table entries (which hold nic ids) stay meaningful.
import type { IpAddr } from '../shared/addr.js';
import type { AllDown, PoolConfig, SlbxConfig } from '../shared/config.js';
import { MAGLEV_EMPTY } from '../shared/maglev.js';
import { compileMuxEw, type MuxEwTables, type MuxEwVip } from './east-west.js';
import { buildPoolTable, selectCandidates, spreadsTo, type SelectionBackend } from '../shared/selection.js';
import { snatTableForNics, type SnatPolicyRange, type SnatRangeTable } from './snat-ranges.js';

export interface MuxHost {
  readonly name: string;
  readonly pa: IpAddr;
  /** IPv4 provider address as a uint32. */
  readonly pa4: number;
  /** IPv6 provider address (four words), or null: the outer destination on an IPv6 underlay. */
  readonly pa6: Uint32Array | null;
  /**
   * This host's share of the outer IPv4 header checksum the MUX writes: pa4 as two 16-bit words, summed
   * once here (the MUX adds its own fixed share, the total length and the id per packet).
   */
  readonly outerSum4: number;
  /** Next-hop MAC of the host's provider address, learned by ARP (IPv4 underlay) or ND (IPv6). */
  readonly mac: Uint8Array;
  macKnown: boolean;
}

export interface MuxNic {
  /** Stable for the life of the process: flow entries hold it. */
  readonly id: number;
  readonly name: string;
  readonly vni: number;
  /** Inner destination MAC: the host agent switches on (VNI, MAC). */
  readonly mac: Uint8Array;
  readonly host: MuxHost;
}

export interface MuxPoolTable {
  /**
   * `${pool}` or `${pool}/${probe}`: one table per pool and health view; `${pool}/${probe}#fail-open` for
   * the rules with allDown: spread while every backend looks down.
   */
  readonly key: string;
  readonly pool: string;
  readonly vni: number;
  readonly size: number;
  /** Maglev slots -> index into `members`, or MAGLEV_EMPTY. */
  readonly slots: Uint32Array;
  readonly members: readonly MuxNic[];
  /** The priority level new flows use, or null when nothing is available. */
  readonly level: number | null;
  /** Fail-open (allDown: spread, every backend looks down): new flows spread over every enabled, undrained backend. */
  readonly failOpen: boolean;
  /**
   * By nic id: 1 when an existing flow to this nic may stay on it (member of the pool and enabled,
   * healthy or not, drained or not); 0 when the flow must be re-placed.
   */
  readonly keepFlow: Uint8Array;
  /** Candidates for new flows, by nic name (for status). */
  readonly candidates: readonly string[];
  /**
   * A pool with a latency section (docs/latency.md): each backend's latency as this table was built
   * (undefined: no measurement yet) and whether it is inside the band; null for other pools.
   */
  readonly latency: {
    readonly sensitivityMs: number;
    readonly hysteresisMs: number;
    readonly backends: readonly { nic: string; latencyMs: number | undefined; inBand: boolean }[];
  } | null;
}

export interface MuxRule {
  readonly name: string;
  readonly vip: IpAddr;
  readonly protocol: number;
  readonly frontendPort: number;
  readonly backendPort: number;
  /** 5, 3 or 2. */
  readonly mode: number;
  readonly table: MuxPoolTable;
  /** Its traffic counters' slot: one per (VIP, rule name), stable for the process's life (MuxTables.ruleSlots). */
  readonly slot: number;
}

export interface MuxVip {
  readonly addr: IpAddr;
  /** (protocol << 16 | frontendPort) -> rule. */
  readonly rules: Map<number, MuxRule>;
  /**
   * protocol -> the rule for fragments without ports (non-first fragments): any rule of that protocol
   * when all of the VIP's rules for it share one pool table (fragments always hash on the 3-tuple);
   * null when the fragment could belong to rules that would place it differently.
   */
  readonly fragmentRule: Map<number, MuxRule | null>;
  /**
   * A VIP that is also an outbound NAT frontend IP: its chunk owners (nic id + 1 by (port - 1024) >>> 3),
   * looked up before its rules (docs/outbound.md); undefined for the others.
   */
  readonly snat?: Uint16Array;
}

/** Outbound NAT's return path on the MUX (docs/outbound.md): the policy's ranges and the stateless table made of them. */
export interface MuxSnat {
  /** (frontend IP, port) -> owning nic id (mux/snat-ranges.ts); every frontend IP of the config is in it. */
  readonly table: SnatRangeTable;
  /** The policy's ranges the table was built from (kept for the next compile: a health change keeps them). */
  readonly ranges: readonly SnatPolicyRange[];
  /** The frontend IPs of the config's outbound rules (captured and announced like VIPs). */
  readonly frontends: readonly IpAddr[];
}

export interface MuxTables {
  readonly generation: number;
  readonly vips4: Map<number, MuxVip>;
  /**
   * The same VIPs keyed by the address as a signed 32-bit number (`addr | 0`): the data plane's lookup key.
   * An address from 128.0.0.0 up is above 2^31 as an unsigned number, which V8 boxes as a heap number for
   * Map.get (an allocation and a hash computed in C++ per packet); as int32 it is a small integer.
   */
  readonly vips4i: Map<number, MuxVip>;
  /** IPv6 VIPs by foldV6(words); each bucket holds the VIPs with that fold. */
  readonly vips6: Map<number, MuxVip[]>;
  /** nic id -> nic (undefined for ids of nics no longer configured). */
  readonly nicsById: readonly (MuxNic | undefined)[];
  readonly hosts: ReadonlyMap<string, MuxHost>;
  readonly poolTables: ReadonlyMap<string, MuxPoolTable>;
  readonly nicIds: ReadonlyMap<string, number>;
  /** Rule slot -> (VIP, rule name): every rule ever configured, never reused (the daemon counts per slot). */
  readonly ruleSlots: readonly { readonly vip: string; readonly rule: string }[];
  /** Internal VIPs (never announced, reached only in VXLAN from hosts) and what east-west needs (docs/east-west.md). */
  readonly ew: MuxEwTables;
  readonly snat: MuxSnat;
}

/**
 * Health as the control plane knows it: a nic is healthy for a probe unless reported down; and the
 * MUX's own measured latency to it (consulted only for pools with a latency section).
 */
export interface HealthView {
  isHealthy(nic: string, probe: string): boolean;
  latencyMs?(nic: string): number | undefined;
}

export const ALL_HEALTHY: HealthView = { isHealthy: () => true };

/** A 32-bit fold of an IPv6 address for the VIP map (collisions are resolved by comparing words). */
export function foldV6(w0: number, w1: number, w2: number, w3: number): number {
  return (w0 ^ Math.imul(w1, 0x9e3779b1) ^ Math.imul(w2, 0x85ebca6b) ^ Math.imul(w3, 0xc2b2ae35)) | 0;
}

/**
 * The selection's input for one pool and health view. Latency (and the flap guard's wasInBand, from the
 * previous table of the same key) only for a pool with a latency section: every other pool's table is
 * a function of the config and health alone, the same on every MUX.
 */
export function selectionInputs(pool: PoolConfig, probe: string | null, health: HealthView, prev: MuxPoolTable | null): SelectionBackend[] {
  return pool.backends.map((b) => {
    const lat = pool.latency === null ? undefined : health.latencyMs?.(b.nic);
    return {
      id: b.nic,
      enabled: b.enabled,
      drained: b.drain,
      priority: b.priority,
      weight: b.weight,
      healthy: probe === null ? true : health.isHealthy(b.nic, probe),
      ...(lat === undefined ? {} : { latencyMs: lat }),
      ...(pool.latency !== null && prev !== null && prev.candidates.includes(b.nic) ? { wasInBand: true } : {}),
    };
  });
}

/**
 * Whether the latency band of any pool with a latency section would change with `health` (the MUX asks
 * after each round of measurements, and compiles new tables only then): the selection alone, no table.
 */
export function latencyBandChanged(config: SlbxConfig, health: HealthView, tables: MuxTables): boolean {
  for (const t of tables.poolTables.values()) {
    if (t.latency === null) continue;
    const pool = config.pools.find((p) => p.name === t.pool);
    // a fail-open table (key ...#fail-open) spreads regardless of the band
    if (pool === undefined || pool.latency === null || t.key.includes('#')) continue;
    const probe = t.key === t.pool ? null : t.key.slice(t.pool.length + 1);
    const sel = selectionInputs(pool, probe, health, t);
    const s = selectCandidates(sel, pool.latencySensitivityMs, pool.latency.hysteresisMs);
    const next = s.candidates.map((i) => pool.backends[i]!.nic);
    if (next.length !== t.candidates.length || next.some((n, i) => n !== t.candidates[i])) return true;
  }
  return false;
}

/**
 * The tables for a config and health view. `snatRanges`: the policy's outbound NAT ranges (default: those
 * of `prev`, none without it). Throws when the ranges do not fit the config (naming the range): a policy
 * that cannot be installed is refused and the previous tables stay.
 */
export function compileMuxTables(
  config: SlbxConfig,
  health: HealthView,
  prev: MuxTables | null,
  generation: number,
  snatRanges: readonly SnatPolicyRange[] = prev?.snat.ranges ?? [],
): MuxTables {
  // hosts: keep learned MACs
  const hosts = new Map<string, MuxHost>();
  for (const h of config.hosts) {
    const old = prev?.hosts.get(h.name);
    const same = old !== undefined && old.pa4 === h.address.words[0] && old.pa6?.join() === h.address6?.words.join();
    const pa4 = h.address.words[0]!;
    hosts.set(
      h.name,
      same
        ? old
        : {
            name: h.name,
            pa: h.address,
            pa4,
            pa6: h.address6 ? h.address6.words : null,
            outerSum4: (pa4 >>> 16) + (pa4 & 0xffff),
            mac: new Uint8Array(6),
            macKnown: false,
          },
    );
  }
  // nic ids: stable across generations, never reused
  const nicIds = new Map<string, number>(prev?.nicIds ?? []);
  let nextId = nicIds.size === 0 ? 0 : Math.max(...nicIds.values()) + 1;
  const networks = new Map(config.networks.map((n) => [n.name, n]));
  const nicsById: (MuxNic | undefined)[] = [];
  const nics = new Map<string, MuxNic>();
  for (const n of config.nics) {
    let id = nicIds.get(n.name);
    if (id === undefined) {
      id = nextId++;
      nicIds.set(n.name, id);
    }
    const nic: MuxNic = { id, name: n.name, vni: networks.get(n.network)!.vni, mac: n.mac, host: hosts.get(n.host)! };
    nicsById[id] = nic;
    nics.set(n.name, nic);
  }
  const idSpace = nextId;
  const frontends = config.outbound.flatMap((o) => o.frontendIps);
  const snatNics = new Map([...nics].map(([name, n]) => [name, { id: n.id, host: n.host.name }]));
  const snatTable = snatTableForNics(snatRanges, snatNics, frontends);
  if (typeof snatTable === 'string') throw new Error(`outbound NAT ranges: ${snatTable}`);
  const snat: MuxSnat = { table: snatTable, ranges: snatRanges, frontends };

  const poolTables = new Map<string, MuxPoolTable>();
  const tableFor = (poolName: string, probe: string | null, allDown: AllDown): MuxPoolTable => {
    const base = probe === null ? poolName : `${poolName}/${probe}`;
    if (allDown === 'spread') {
      // the rule's own table while any backend is a candidate; the fail-open one only when none is
      const normal = tableFor(poolName, probe, 'drop');
      if (normal.level !== null) return normal;
    }
    const key = allDown === 'spread' ? `${base}#fail-open` : base;
    const existing = poolTables.get(key);
    if (existing) return existing;
    const pool = config.pools.find((p) => p.name === poolName)!;
    const sel = selectionInputs(pool, probe, health, prev?.poolTables.get(key) ?? null);
    const pt = buildPoolTable(sel, {
      latencySensitivityMs: pool.latencySensitivityMs,
      latencyHysteresisMs: pool.latency?.hysteresisMs ?? 0,
      size: config.maglevTableSize,
      allDown,
    });
    // table member index -> nic; slots map to table member indices already
    const members = pt.table.members.map((name) => nics.get(name)!);
    const keepFlow = new Uint8Array(idSpace);
    for (const b of pool.backends) if (b.enabled) keepFlow[nics.get(b.nic)!.id] = 1;
    const t: MuxPoolTable = {
      key,
      pool: poolName,
      vni: networks.get(pool.network)!.vni,
      size: pt.table.size,
      slots: pt.table.slots,
      members,
      level: pt.level,
      failOpen: pt.failOpen,
      keepFlow,
      // under fail-open, the backends spread over
      candidates: pt.failOpen ? sel.filter(spreadsTo).map((b) => b.id) : pt.selection.candidates.map((i) => pool.backends[i]!.nic),
      latency:
        pool.latency === null || pt.failOpen
          ? null
          : {
              sensitivityMs: pool.latencySensitivityMs,
              hysteresisMs: pool.latency.hysteresisMs,
              backends: sel.map((b, i) => ({ nic: b.id, latencyMs: b.latencyMs, inBand: pt.selection.candidates.includes(i) })),
            },
    };
    poolTables.set(key, t);
    return t;
  };

  const ruleSlots = [...(prev?.ruleSlots ?? [])];
  const slotOf = new Map(ruleSlots.map((r, i) => [`${r.vip} ${r.rule}`, i]));
  const vips4 = new Map<number, MuxVip>();
  const vips4i = new Map<number, MuxVip>();
  const vips6 = new Map<number, MuxVip[]>();
  const internal: MuxEwVip[] = [];
  for (const v of config.vips) {
    const rules = new Map<number, MuxRule>();
    const byProto = new Map<number, MuxRule[]>();
    for (const r of v.rules) {
      const table = tableFor(r.pool, r.probe, r.allDown);
      let slot = slotOf.get(`${v.address.text} ${r.name}`);
      if (slot === undefined) {
        slot = ruleSlots.push({ vip: v.address.text, rule: r.name }) - 1;
        slotOf.set(`${v.address.text} ${r.name}`, slot);
      }
      for (const proto of r.protocols) {
        const rule: MuxRule = {
          name: r.name,
          vip: v.address,
          protocol: proto,
          frontendPort: r.frontendPort,
          backendPort: r.backendPort,
          mode: r.distribution,
          table,
          slot,
        };
        rules.set((proto << 16) | r.frontendPort, rule);
        const list = byProto.get(proto) ?? [];
        list.push(rule);
        byProto.set(proto, list);
      }
    }
    const fragmentRule = new Map<number, MuxRule | null>();
    for (const [proto, list] of byProto) {
      const first = list[0]!;
      fragmentRule.set(proto, list.every((r) => r.table === first.table) ? first : null);
    }
    const fw = v.address.words;
    const chunks =
      v.address.family === 4 ? snatTable.v4.get(fw[0]!) : snatTable.v6.find((e) => e.words.every((w, i) => w === fw[i]))?.chunks;
    const vip: MuxVip =
      chunks === undefined ? { addr: v.address, rules, fragmentRule } : { addr: v.address, rules, fragmentRule, snat: chunks };
    if (v.scope === 'internal') internal.push({ vip, vni: networks.get(v.network!)!.vni });
    else if (v.address.family === 4) {
      vips4.set(v.address.words[0]!, vip);
      vips4i.set(v.address.words[0]! | 0, vip);
    } else {
      const w = v.address.words;
      const k = foldV6(w[0]!, w[1]!, w[2]!, w[3]!);
      const bucket = vips6.get(k) ?? [];
      bucket.push(vip);
      vips6.set(k, bucket);
    }
  }
  return {
    generation,
    vips4,
    vips4i,
    vips6,
    nicsById,
    hosts,
    poolTables,
    nicIds,
    ruleSlots,
    ew: compileMuxEw(config, internal, hosts, nicIds),
    snat,
  };
}

export { MAGLEV_EMPTY };
