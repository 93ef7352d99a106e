// Outbound NAT's control side in the host agent (docs/outbound.md): the one SNAT engine kept across policy
// generations, each generation's ranges installed into it, and the demands and releases of port chunks
// sent to the controller. The engine (host-agent/snat.ts) is pure; this file decides, the daemon does the
// I/O (host-agent/daemon.ts posts what `plan` returns and calls back with the answers).
//
// Demand: a nic and family whose ports in use reach SNAT_DEMAND_THRESHOLD of the ports it holds, or that
// had an exhaustion drop since the last look, asks for more while it holds less than its rule's
// portsPerNic: a quarter of what it holds, or one port for each connection refused since the last look
// if more, in whole chunks of 8 (at least one), at most up to the cap. At most one
// demand per nic and family in flight, and none sooner than SNAT_DEMAND_INTERVAL_MS after the last; the
// granted ports arrive with the next policy generation (the controller makes the demand a generation).
// Release: a chunk none of whose ports has carried a flow for SNAT_RELEASE_IDLE_S is given back while the
// nic keeps at least its preallocated ports and keeps using under half of what stays. The chunk leaves the
// engine at once (no flow opens on it meanwhile); if the controller keeps it (a preallocated chunk) or the
// request fails, it comes back.
//
// --workers N >= 2 (docs/outbound.md, "Workers"): every worker thread has one of these over its own engine
// and flow table, installed with the same ranges and the same chunks withdrawn (`withdrawn`), and plans
// nothing; the main thread's one plans from what the workers report (`usage`, host-agent/snat-workers.ts)
// instead of its engine, which holds the policies but never a flow.
import { parseIpAddr } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';
import { SNAT_CHUNK_PORTS, SNAT_FIRST_PORT } from '../shared/config/outbound.js';
import type { HostFlowTable } from './flow-table.js';
import { SnatEngine, snatPoliciesFor, type PolicySnatRange, type SnatNicPolicy } from './snat.js';
import type { HostTables } from './tables.js';
import type { SnatUsage } from './snat-workers.js';

export const SNAT_DEMAND_THRESHOLD = 0.75;
export const SNAT_DEMAND_INTERVAL_MS = 1000;
export const SNAT_RELEASE_IDLE_S = 300;
/** How often the daemon calls plan() (and how often chunk use is sampled). */
export const SNAT_CONTROL_TICK_MS = 1000;
/** SNAT slots looked at per sweep call by the engine's idle sweep (the daemon's EW_TICK_MS, a worker's tick). */
export const SNAT_SWEEP_SLOTS = 4096;

export interface SnatDemand {
  readonly nic: string;
  readonly family: 4 | 6;
  readonly ports: number;
}

export interface SnatRelease {
  readonly chunks: { ip: string; first: number }[];
}

interface FamilyState {
  lastExhausted: number;
  inFlight: boolean;
  lastDemandMs: number;
  /** When the last demand was sent and how many ports the nic held then (for the time to usable ports). */
  askedAtMs: number;
  heldWhenAsked: number;
}

/** One demand's story, for /status: asked, answered, and when the new ports were in the engine. */
export interface SnatDemandRecord {
  nic: string;
  family: 4 | 6;
  asked: number;
  granted: number | null;
  reason: string | null;
  at: string;
  /** From sending the demand to the policy that brought the ports being installed, ms. */
  usableAfterMs: number | null;
}

export class SnatControl {
  readonly engine: SnatEngine;
  private ranges: readonly PolicySnatRange[] = [];
  /** Chunks being given back ("ip:first"): left out of the engine's ranges until the answer. */
  private readonly releasing = new Set<string>();
  /** "ip:first" -> ms a port of the chunk last carried a flow (or the chunk was first seen). */
  private readonly lastUsedMs = new Map<string, number>();
  private readonly fam = new Map<string, FamilyState>();
  private policies = new Map<string, SnatNicPolicy>();
  readonly counts = { demands: 0, granted: 0, refused: 0, failed: 0, releases: 0, released: 0, kept: 0, releaseFailed: 0 };
  readonly demandLog: SnatDemandRecord[] = [];
  /**
   * --workers: the workers' flows as the main thread last heard of them (ports in use and exhaustion drops
   * per nic and family, the chunks carrying a flow): planDemands and planRelease read these instead of the
   * engine's, which has no flows on the main thread. Null: the engine's own (one thread).
   */
  usage: SnatUsage | null = null;
  /** --workers: chunks of a release that stayed because a worker still had a flow on one when it withdrew them. */
  busyKept = 0;

  /**
   * `flows`: the host agent's one flow table (its EwState's), which the engine's entries join;
   * `maxFlows`: flowTable.snatMaxFlows (each install takes the config's).
   */
  constructor(
    readonly host: string,
    flows: HostFlowTable,
    maxFlows: number,
  ) {
    this.engine = new SnatEngine(flows, maxFlows);
  }

  get policyRanges(): readonly PolicySnatRange[] {
    return this.ranges;
  }

  /**
   * Installs a generation: the config's outbound rules for this host's nics (`tables`, by the new nic
   * indexes), `ranges` from the policy (undefined: the ones in force), `oldTables` the tables in force (for
   * the nics' old indexes). Returns how many flows ended (their nic, VNI or range gone).
   */
  install(
    config: SlbxConfig,
    tables: HostTables,
    oldTables: HostTables,
    ranges: readonly PolicySnatRange[] | undefined,
    nowMs: number,
  ): number {
    this.engine.maxFlows = config.flowTable.snatMaxFlows;
    if (ranges !== undefined) {
      const mine = new Set(ranges.filter((r) => r.host === this.host).flatMap((r) => chunksOf(r).map((c) => `${r.ip}:${c}`)));
      for (const k of [...this.releasing]) if (!mine.has(k)) this.releasing.delete(k); // given back: gone from the policy
      this.ranges = ranges;
    }
    const kept = this.ranges.flatMap((r) => (r.host === this.host ? withoutReleasing(r, this.releasing) : []));
    this.policies = snatPoliciesFor(config, kept, this.host);
    const byIndex = new Map<number, SnatNicPolicy>();
    for (const n of tables.nics) {
      const p = this.policies.get(n.name);
      if (p !== undefined) byIndex.set(n.index, p);
    }
    const newIndex = new Map(tables.nics.map((n) => [n.name, n.index]));
    const renumber = new Map<number, number>();
    for (const n of oldTables.nics) {
      const to = newIndex.get(n.name);
      if (to !== undefined) renumber.set(n.index, to);
    }
    const ended = this.engine.applyPolicies(byIndex, renumber);
    // a demand answered by this generation: the ports are usable now
    for (const s of this.engine.status()) {
      const name = tables.nics[s.nic]?.name;
      if (name === undefined) continue;
      for (const family of [4, 6] as const) {
        const st = this.fam.get(`${name}/${family}`);
        const held = family === 4 ? s.ports4 : s.ports6;
        if (st === undefined || st.askedAtMs === 0 || held <= st.heldWhenAsked) continue;
        const rec = [...this.demandLog].reverse().find((d) => d.nic === name && d.family === family && d.usableAfterMs === null);
        if (rec !== undefined) rec.usableAfterMs = nowMs - st.askedAtMs;
        st.askedAtMs = 0;
      }
    }
    return ended;
  }

  /** What to ask the controller for now (the daemon posts each and calls demandAnswered). */
  planDemands(tables: HostTables, config: SlbxConfig, nowMs: number): SnatDemand[] {
    const out: SnatDemand[] = [];
    const capOf = new Map(config.outbound.flatMap((r) => r.nics.map((n) => [n, r.portsPerNic] as const)));
    for (const s of this.engine.status()) {
      const nic = tables.nics[s.nic];
      if (nic === undefined) continue;
      const cap = capOf.get(nic.name) ?? 0;
      for (const family of [4, 6] as const) {
        if (family === 4 ? nic.addr4 < 0 : nic.addr6 === null) continue;
        const key = `${nic.name}/${family}`;
        let st = this.fam.get(key);
        if (st === undefined) {
          st = { lastExhausted: 0, inFlight: false, lastDemandMs: 0, askedAtMs: 0, heldWhenAsked: 0 };
          this.fam.set(key, st);
        }
        const held = family === 4 ? s.ports4 : s.ports6;
        const u = this.usage;
        const inUse = u !== null ? (u.inUse.get(key) ?? 0) : family === 4 ? s.inUse4 : s.inUse6;
        const exhausted = u !== null ? (u.exhausted.get(key) ?? 0) : family === 4 ? s.exhausted4 : s.exhausted6;
        const refused = exhausted - st.lastExhausted; // connections refused for want of a port since the last look
        const exhaustedNow = refused > 0;
        st.lastExhausted = exhausted;
        if (st.inFlight || nowMs - st.lastDemandMs < SNAT_DEMAND_INTERVAL_MS || st.askedAtMs !== 0) continue;
        if (!(exhaustedNow || (held > 0 && inUse >= SNAT_DEMAND_THRESHOLD * held))) continue;
        if (held >= cap) continue;
        const quarter = Math.ceil(held / 4 / SNAT_CHUNK_PORTS) * SNAT_CHUNK_PORTS;
        const unmet = Math.ceil(Math.max(0, refused) / SNAT_CHUNK_PORTS) * SNAT_CHUNK_PORTS; // a port for each refused SYN
        const ports = Math.min(cap - held, Math.max(SNAT_CHUNK_PORTS, quarter, unmet));
        st.inFlight = true;
        st.lastDemandMs = nowMs;
        st.askedAtMs = nowMs;
        st.heldWhenAsked = held;
        this.counts.demands++;
        this.demandLog.push({
          nic: nic.name,
          family,
          asked: ports,
          granted: null,
          reason: null,
          at: new Date(nowMs).toISOString(),
          usableAfterMs: null,
        });
        if (this.demandLog.length > 20) this.demandLog.shift();
        out.push({ nic: nic.name, family, ports });
      }
    }
    return out;
  }

  /** The controller's answer to a demand: granted ports (0 with a reason), or null: the request failed. */
  demandAnswered(d: SnatDemand, granted: number | null, reason: string | null): void {
    const st = this.fam.get(`${d.nic}/${d.family}`);
    if (st !== undefined) {
      st.inFlight = false;
      if (granted === null || granted === 0) st.askedAtMs = 0; // nothing to wait for
    }
    const rec = [...this.demandLog]
      .reverse()
      .find((x) => x.nic === d.nic && x.family === d.family && x.granted === null && x.reason === null);
    if (rec !== undefined) {
      rec.granted = granted;
      rec.reason = granted === null ? 'request failed' : reason;
    }
    if (granted === null) this.counts.failed++;
    else if (granted > 0) this.counts.granted++;
    else this.counts.refused++;
  }

  /**
   * Chunks to give back now (every idle one at once), already left out of the engine: the daemon
   * reinstalls (install with ranges undefined) and posts them. Null: nothing to give back.
   */
  planRelease(tables: HostTables, config: SlbxConfig, nowMs: number): SnatRelease | null {
    // sample which chunks carry flows (--workers: in any worker)
    const mine = this.ranges.filter((r) => r.host === this.host);
    const nicName = new Map(tables.nics.map((n) => [n.index, n.name]));
    const used = this.usage !== null ? this.usage.used : this.usedChunks(tables);
    const seen = new Set<string>();
    for (const r of mine)
      for (const c of chunksOf(r)) {
        const k = `${r.ip}:${c}`;
        seen.add(k);
        if (used.has(k) || !this.lastUsedMs.has(k)) this.lastUsedMs.set(k, nowMs);
      }
    for (const k of [...this.lastUsedMs.keys()]) if (!seen.has(k)) this.lastUsedMs.delete(k);
    // per nic and family: idle chunks beyond the preallocation, while the rest stays under half used
    const prealloc = new Map(config.outbound.flatMap((r) => r.nics.map((n) => [n, r.preallocatedPorts] as const)));
    const status = new Map(this.engine.status().map((s) => [nicName.get(s.nic), s]));
    const chunks: { ip: string; first: number }[] = [];
    for (const nic of new Set(mine.map((r) => r.nic))) {
      const s = status.get(nic);
      if (s === undefined) continue;
      for (const family of [4, 6] as const) {
        let held = family === 4 ? s.ports4 : s.ports6;
        const u = this.usage;
        const inUse = u !== null ? (u.inUse.get(`${nic}/${family}`) ?? 0) : family === 4 ? s.inUse4 : s.inUse6;
        const floor = prealloc.get(nic) ?? 0;
        const idle = mine
          .filter((r) => r.nic === nic && (parseIpAddr(r.ip)?.family ?? 0) === family)
          .flatMap((r) => chunksOf(r).map((first) => ({ ip: r.ip, first })))
          .filter(
            (c) =>
              !this.releasing.has(`${c.ip}:${c.first}`) &&
              nowMs - (this.lastUsedMs.get(`${c.ip}:${c.first}`) ?? nowMs) >= SNAT_RELEASE_IDLE_S * 1000,
          )
          .reverse(); // the highest first: the preallocation is the lowest
        for (const c of idle) {
          if (held - SNAT_CHUNK_PORTS < floor || inUse * 2 >= held - SNAT_CHUNK_PORTS) break;
          held -= SNAT_CHUNK_PORTS;
          chunks.push(c);
        }
      }
    }
    if (chunks.length === 0) return null;
    for (const c of chunks) this.releasing.add(`${c.ip}:${c.first}`);
    this.counts.releases++;
    return { chunks };
  }

  /** The chunks ("ip:first") of this host's ranges that a live flow of the engine holds a port of. Not per packet. */
  usedChunks(tables: HostTables): Set<string> {
    const mine = this.ranges.filter((r) => r.host === this.host);
    const words = mine.map((r) => parseIpAddr(r.ip)?.words ?? new Uint32Array(0));
    const nicName = new Map(tables.nics.map((n) => [n.index, n.name]));
    const used = new Set<string>();
    this.engine.forEachFlow((nic, _family, fip, fport) => {
      const name = nicName.get(nic);
      for (let i = 0; i < mine.length; i++) {
        const r = mine[i]!;
        if (r.nic !== name || fport < r.first || fport > r.last) continue;
        const w = words[i]!;
        let same = w.length > 0;
        for (let k = 0; k < w.length; k++) if (w[k] !== fip[k]) same = false;
        if (same) used.add(`${r.ip}:${chunkFirst(fport)}`);
      }
    });
    return used;
  }

  /** The chunks ("ip:first") left out of the engine while being given back (what the workers are told to leave out). */
  get withdrawn(): string[] {
    return [...this.releasing];
  }

  /**
   * A worker: the chunks the main thread withdrew (its `withdrawn`), left out of this engine from the next
   * install on, except those a live flow here holds a port of (withdrawing them would end the flow): those
   * stay in and are returned, for the main thread to keep the chunk (host-agent/snat-workers.ts).
   */
  setWithdrawn(keys: readonly string[], tables: HostTables): string[] {
    const used = keys.length === 0 ? new Set<string>() : this.usedChunks(tables);
    const busy: string[] = [];
    this.releasing.clear();
    for (const k of keys) {
      if (used.has(k)) busy.push(k);
      else this.releasing.add(k);
    }
    return busy;
  }

  /**
   * --workers: a release's chunks a worker still had a flow on when it withdrew them (`busy`, the union
   * over the workers): they stay (as if the controller kept them) and are not offered again for
   * SNAT_RELEASE_IDLE_S. Returns the release to send, or null: nothing left to give back.
   */
  releaseWithdrawn(r: SnatRelease, busy: ReadonlySet<string>, nowMs: number): SnatRelease | null {
    const chunks: { ip: string; first: number }[] = [];
    for (const c of r.chunks) {
      const k = `${c.ip}:${c.first}`;
      if (!busy.has(k)) {
        chunks.push(c);
        continue;
      }
      this.releasing.delete(k);
      this.lastUsedMs.set(k, nowMs);
      this.busyKept++;
    }
    return chunks.length === 0 ? null : { chunks };
  }

  /** The controller's answer to a release (null: failed): kept chunks come back into the engine at the next install. */
  releaseAnswered(r: SnatRelease, kept: readonly { ip: string; first: number }[] | null, nowMs: number): void {
    const back = kept === null ? r.chunks : kept;
    for (const c of back) {
      this.releasing.delete(`${c.ip}:${c.first}`);
      this.lastUsedMs.set(`${c.ip}:${c.first}`, nowMs); // not offered again for SNAT_RELEASE_IDLE_S
    }
    if (kept === null) this.counts.releaseFailed++;
    else {
      this.counts.kept += kept.length;
      this.counts.released += r.chunks.length - kept.length;
    }
  }

  /** The part of the host agent's /status that slbctl snat shows. */
  status(tables: HostTables): Record<string, unknown> {
    const u = this.usage;
    if (u !== null) return this.workersStatus(tables, u);
    return {
      flows: this.engine.live,
      maxFlows: this.engine.maxFlows,
      nics: this.engine.status().map((s) => ({
        nic: tables.nics[s.nic]?.name ?? `#${s.nic}`,
        ports4: s.ports4,
        ports6: s.ports6,
        inUse4: s.inUse4,
        inUse6: s.inUse6,
        exhausted4: s.exhausted4,
        exhausted6: s.exhausted6,
      })),
      releasing: this.releasing.size,
      requests: { ...this.counts },
      demands: this.demandLog,
    };
  }

  /** status() with workers: the flows and per nic use summed over them (maxFlows is each worker's bound). */
  private workersStatus(tables: HostTables, u: SnatUsage): Record<string, unknown> {
    return {
      flows: u.flows,
      maxFlows: this.engine.maxFlows,
      maxFlowsPer: 'worker',
      nics: this.engine.status().map((s) => {
        const name = tables.nics[s.nic]?.name ?? `#${s.nic}`;
        return {
          nic: name,
          ports4: s.ports4,
          ports6: s.ports6,
          inUse4: u.inUse.get(`${name}/4`) ?? 0,
          inUse6: u.inUse.get(`${name}/6`) ?? 0,
          exhausted4: u.exhausted.get(`${name}/4`) ?? 0,
          exhausted6: u.exhausted.get(`${name}/6`) ?? 0,
        };
      }),
      releasing: this.releasing.size,
      requests: { ...this.counts, busyKept: this.busyKept },
      demands: this.demandLog,
    };
  }
}

function chunkFirst(port: number): number {
  return SNAT_FIRST_PORT + Math.floor((port - SNAT_FIRST_PORT) / SNAT_CHUNK_PORTS) * SNAT_CHUNK_PORTS;
}

function chunksOf(r: PolicySnatRange): number[] {
  const out: number[] = [];
  for (let p = r.first; p + SNAT_CHUNK_PORTS - 1 <= r.last; p += SNAT_CHUNK_PORTS) out.push(p);
  return out;
}

/** A range without its chunks being given back: the pieces that stay. */
function withoutReleasing(r: PolicySnatRange, releasing: ReadonlySet<string>): PolicySnatRange[] {
  if (releasing.size === 0) return [r];
  const out: PolicySnatRange[] = [];
  let start = -1;
  for (const c of chunksOf(r)) {
    const gone = releasing.has(`${r.ip}:${c}`);
    if (!gone && start < 0) start = c;
    if (gone && start >= 0) {
      out.push({ ...r, first: start, last: c - 1 });
      start = -1;
    }
  }
  if (start >= 0) out.push({ ...r, first: start, last: r.last });
  return out;
}
