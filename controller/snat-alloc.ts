// Outbound NAT port allocation (docs/outbound.md): the controller hands each host agent chunks of
// SNAT_CHUNK_PORTS frontend ports per nic, in the way of Ananta's manager: every nic of an outbound
// rule gets `preallocatedPorts` per address family up front, more on demand in chunks (at most
// `portsPerNic`), and a host gives back chunks it no longer uses beyond the preallocation.
//
// One map, chunk -> owner, keyed by (frontend IP, first port): a chunk can have one owner only, by
// construction, and the durable form (`SnatAllocState`, kept in the controller's state next to the
// config) lists the chunks. Loading refuses a chunk listed twice or one outside its rule's usable
// ports, so a damaged state never gives one range to two hosts. Pure: no clock (times are passed in),
// no I/O.
import type { SlbxConfig } from '../shared/config.js';
import { SNAT_CHUNK_PORTS, usableChunks, type OutboundRuleConfig } from '../shared/config/outbound.js';

export const SNAT_STATE_VERSION = 1;

export interface SnatChunk {
  /** The frontend IP, canonical text. */
  readonly ip: string;
  /** The chunk's first port; it holds first .. first + SNAT_CHUNK_PORTS - 1. */
  readonly first: number;
  readonly nic: string;
  readonly host: string;
  readonly rule: string;
  /** True for the rule's preallocated share (never taken back while the nic is served). */
  readonly pre: boolean;
}

/** The durable form: what the controller's store keeps. */
export interface SnatAllocState {
  readonly version: typeof SNAT_STATE_VERSION;
  readonly chunks: readonly SnatChunk[];
}

/** A run of adjacent chunks of one owner, as pushed in the policy. */
export interface SnatRange {
  readonly ip: string;
  readonly first: number;
  readonly last: number;
  readonly host: string;
  readonly nic: string;
}

export type DemandResult =
  | { readonly ok: true; readonly granted: readonly SnatChunk[] }
  | {
      readonly ok: false;
      readonly reason: 'unknown_nic' | 'no_frontend_ip' | 'nic_cap' | 'exhausted';
      readonly granted: readonly SnatChunk[];
    };

interface NicPlan {
  readonly rule: OutboundRuleConfig;
  readonly host: string;
  readonly families: readonly (4 | 6)[];
}

export class SnatAllocator {
  private readonly chunks = new Map<string, SnatChunk>();
  private plan = new Map<string, NicPlan>();
  /** Usable chunk starts per frontend IP (text), in order. */
  private usable = new Map<string, readonly number[]>();
  private familyOf = new Map<string, 4 | 6>();

  /** Reads a stored state (refusing a damaged one, see loadError) and applies `config` (reconcile). */
  constructor(config: SlbxConfig, stored?: SnatAllocState) {
    this.setConfig(config);
    if (stored !== undefined) {
      const err = this.loadError(stored);
      if (err !== null) throw new Error(`snat allocation state refused: ${err}`);
      for (const ch of stored.chunks) this.chunks.set(chunkKey(ch.ip, ch.first), { ...ch });
    }
    this.reconcile(config);
  }

  private setConfig(config: SlbxConfig): void {
    this.plan = new Map();
    this.usable = new Map();
    this.familyOf = new Map();
    const nicByName = new Map(config.nics.map((n) => [n.name, n]));
    for (const rule of config.outbound) {
      for (const ip of rule.frontendIps) {
        this.usable.set(ip.text, usableChunks(config, ip));
        this.familyOf.set(ip.text, ip.family);
      }
      for (const name of rule.nics) {
        const nic = nicByName.get(name);
        if (nic === undefined) continue;
        const families: (4 | 6)[] = [];
        if (nic.address4 !== null && rule.frontendIps.some((a) => a.family === 4)) families.push(4);
        if (nic.address6 !== null && rule.frontendIps.some((a) => a.family === 6)) families.push(6);
        this.plan.set(name, { rule, host: nic.host, families });
      }
    }
  }

  /** Why `stored` cannot be loaded (a chunk twice, off the chunk grid, outside its IP's usable ports), or null. */
  loadError(stored: SnatAllocState): string | null {
    if (stored.version !== SNAT_STATE_VERSION) return `version ${String(stored.version)}, expected ${SNAT_STATE_VERSION}`;
    const seen = new Set<string>();
    for (const ch of stored.chunks) {
      const k = chunkKey(ch.ip, ch.first);
      if (seen.has(k)) return `chunk ${ch.ip}:${ch.first} is listed twice`;
      seen.add(k);
      if (!Number.isInteger(ch.first) || ch.first < 1024 || ch.first > 65535 || (ch.first - 1024) % SNAT_CHUNK_PORTS !== 0)
        return `chunk ${ch.ip}:${ch.first} does not start on the ${SNAT_CHUNK_PORTS}-port grid from 1024`;
    }
    return null;
  }

  /**
   * Applies a new config: chunks whose nic is no longer served, moved to another host, or whose IP
   * left the rule (or lost the chunk to a load-balancing rule's port) are taken back, and so are those
   * beyond a smaller portsPerNic; each served nic is topped up to its preallocated share per family
   * (counting the chunks it holds). Returns the chunks taken back and granted.
   */
  reconcile(config: SlbxConfig): { removed: SnatChunk[]; granted: SnatChunk[] } {
    this.setConfig(config);
    const removed: SnatChunk[] = [];
    for (const [k, ch] of this.chunks) {
      const p = this.plan.get(ch.nic);
      const usable = this.usable.get(ch.ip);
      const ok =
        p !== undefined &&
        p.host === ch.host &&
        p.rule.name === ch.rule &&
        p.rule.frontendIps.some((a) => a.text === ch.ip) &&
        usable !== undefined &&
        binaryHas(usable, ch.first);
      if (!ok) {
        this.chunks.delete(k);
        removed.push(ch);
      }
    }
    const granted: SnatChunk[] = [];
    for (const [nic, p] of this.plan) {
      for (const fam of p.families) {
        // A smaller preallocation turns the excess into on-demand chunks (released when idle); a
        // smaller portsPerNic takes back on-demand chunks first, then preallocated ones, last first.
        const mine = [...this.chunks.values()].filter((c) => c.nic === nic && this.familyOf.get(c.ip) === fam);
        mine.sort((x, y) => Number(y.pre) - Number(x.pre));
        let preLeft = p.rule.preallocatedPorts / SNAT_CHUNK_PORTS;
        let capLeft = p.rule.portsPerNic / SNAT_CHUNK_PORTS;
        for (const c of mine) {
          const k = chunkKey(c.ip, c.first);
          if (capLeft <= 0) {
            this.chunks.delete(k);
            removed.push(c);
            continue;
          }
          capLeft--;
          // a larger preallocation first counts the on-demand chunks the nic already holds
          if (c.pre !== preLeft > 0) this.chunks.set(k, { ...c, pre: preLeft > 0 });
          if (preLeft > 0) preLeft--;
        }
        if (preLeft > 0) granted.push(...this.grant(nic, p, fam, preLeft, true));
      }
    }
    return { removed, granted };
  }

  /** Ports a nic holds in one family (only the preallocated ones with `preOnly`). */
  portsOf(nic: string, family: 4 | 6, preOnly = false): number {
    let n = 0;
    for (const ch of this.chunks.values())
      if (ch.nic === nic && this.familyOf.get(ch.ip) === family && (!preOnly || ch.pre)) n += SNAT_CHUNK_PORTS;
    return n;
  }

  /** A host asks for `ports` more ports (rounded up to chunks) for a nic's flows of one family. */
  demand(nic: string, family: 4 | 6, ports: number): DemandResult {
    const p = this.plan.get(nic);
    if (p === undefined) return { ok: false, reason: 'unknown_nic', granted: [] };
    if (!p.families.includes(family)) return { ok: false, reason: 'no_frontend_ip', granted: [] };
    const room = (p.rule.portsPerNic - this.portsOf(nic, family)) / SNAT_CHUNK_PORTS;
    if (room <= 0) return { ok: false, reason: 'nic_cap', granted: [] };
    const want = Math.min(room, Math.max(1, Math.ceil(ports / SNAT_CHUNK_PORTS)));
    const granted = this.grant(nic, p, family, want, false);
    if (granted.length < want) return { ok: false, reason: 'exhausted', granted };
    return { ok: true, granted };
  }

  /** A host gives back an on-demand chunk it no longer uses; preallocated ones stay. False when not its own. */
  release(host: string, ip: string, first: number): boolean {
    const k = chunkKey(ip, first);
    const ch = this.chunks.get(k);
    if (ch === undefined || ch.host !== host || ch.pre) return false;
    this.chunks.delete(k);
    return true;
  }

  private grant(nic: string, p: NicPlan, family: 4 | 6, count: number, pre: boolean): SnatChunk[] {
    const out: SnatChunk[] = [];
    for (const ip of p.rule.frontendIps) {
      if (ip.family !== family) continue;
      for (const first of this.usable.get(ip.text) ?? []) {
        if (out.length >= count) return out;
        const k = chunkKey(ip.text, first);
        if (this.chunks.has(k)) continue;
        const ch: SnatChunk = { ip: ip.text, first, nic, host: p.host, rule: p.rule.name, pre };
        this.chunks.set(k, ch);
        out.push(ch);
      }
    }
    return out;
  }

  /** The durable form, in a stable order. */
  toState(): SnatAllocState {
    const chunks = [...this.chunks.values()].sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : a.first - b.first));
    return { version: SNAT_STATE_VERSION, chunks };
  }

  /** Adjacent chunks of one (IP, host, nic) merged: the ranges of one host (or every host), sorted by IP and port. */
  ranges(host?: string): SnatRange[] {
    const out: SnatRange[] = [];
    for (const ch of this.toState().chunks) {
      if (host !== undefined && ch.host !== host) continue;
      const last = out[out.length - 1];
      if (last !== undefined && last.ip === ch.ip && last.host === ch.host && last.nic === ch.nic && last.last + 1 === ch.first) {
        out[out.length - 1] = { ...last, last: ch.first + SNAT_CHUNK_PORTS - 1 };
      } else out.push({ ip: ch.ip, first: ch.first, last: ch.first + SNAT_CHUNK_PORTS - 1, host: ch.host, nic: ch.nic });
    }
    return out;
  }
}

function chunkKey(ip: string, first: number): string {
  return `${ip}|${first}`;
}

function binaryHas(sorted: readonly number[], v: number): boolean {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const x = sorted[mid]!;
    if (x === v) return true;
    if (x < v) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}
