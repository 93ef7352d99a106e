// What the controller knows about its agents (the MUXes and host agents): the generation each applied
// (from its acks, and from the `applied` it names on every watch, so a restarted controller knows at
// once), when it was last seen, the last refusal, the recent acks with their times, and the last
// status heartbeat. Nothing here is persisted: after a controller restart the agents tell it again.
import type { ControllerState } from './state.js';

export type AgentKind = 'mux' | 'host';
export const AGENT_KINDS: readonly AgentKind[] = ['mux', 'host'];

/** Acks kept per agent (for GET /v1/generations/N). */
export const ACKS_KEPT = 256;
/** An agent seen within this long (or with a watch open) counts as connected. */
export const CONNECTED_WINDOW_MS = 10_000;

export interface AgentAck {
  generation: number;
  ok: boolean;
  /** When the controller received it (ms since the epoch). */
  atMs: number;
  error?: string;
  /** How long the agent took to apply it, as it says. */
  applyMs?: number;
}

interface AgentRecord {
  kind: AgentKind;
  name: string;
  stateId: string | null;
  appliedGeneration: number | null;
  appliedAtMs: number | null;
  lastSeenMs: number | null;
  lastError: { generation: number; message: string; atMs: number } | null;
  acks: AgentAck[];
  watching: number;
  status: unknown;
  statusAtMs: number | null;
}

export interface AgentView {
  kind: AgentKind;
  name: string;
  /** The agent is a mux or host of the current config. */
  inConfig: boolean;
  appliedGeneration: number | null;
  currentGeneration: number;
  behind: boolean;
  connected: boolean;
  /** Watches (long polls) open right now. */
  watching: number;
  lastSeen: string | null;
  lastAck: { generation: number; ok: boolean; at: string } | null;
  /** The last policy it refused, while it has not applied a newer one. */
  lastError: { generation: number; message: string; at: string } | null;
  statusAt: string | null;
}

export interface GenerationAgentReport {
  kind: AgentKind;
  name: string;
  appliedGeneration: number | null;
  applied: boolean;
  /** When its first ack of this generation or a later one arrived, if it was seen. */
  ackedAt: string | null;
  /** ackedAt minus the generation's creation, ms. */
  ms: number | null;
  applyMs: number | null;
}

export interface GenerationReport {
  generation: number;
  current: number;
  createdAt: string | null;
  cause: string | null;
  /** Every mux and host of the config applied this generation or a later one. */
  complete: boolean;
  agents: GenerationAgentReport[];
  /** The slowest ack measured, over all agents, over the MUXes, over the hosts (ms from creation). */
  lastAckMs: number | null;
  lastMuxAckMs: number | null;
  lastHostAckMs: number | null;
  pending: string[];
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export class AgentRegistry {
  private readonly agents = new Map<string, AgentRecord>();
  private readonly ackListeners = new Set<() => void>();

  constructor(private readonly state: ControllerState) {}

  private rec(kind: AgentKind, name: string): AgentRecord {
    const id = `${kind}/${name}`;
    let r = this.agents.get(id);
    if (r === undefined) {
      r = {
        kind,
        name,
        stateId: null,
        appliedGeneration: null,
        appliedAtMs: null,
        lastSeenMs: null,
        lastError: null,
        acks: [],
        watching: 0,
        status: null,
        statusAtMs: null,
      };
      this.agents.set(id, r);
    }
    return r;
  }

  /** A watch arrived: `applied` is the generation the agent runs, of state `stateId`. */
  notePoll(kind: AgentKind, name: string, applied: number | null, stateId: string | null): void {
    const r = this.rec(kind, name);
    r.lastSeenMs = Date.now();
    if (applied !== null && stateId === this.state.stateId) {
      if (r.stateId !== stateId || r.appliedGeneration === null || applied > r.appliedGeneration) {
        r.stateId = stateId;
        r.appliedGeneration = applied;
        r.appliedAtMs ??= Date.now();
        this.wake();
      }
    }
  }

  watchOpened(kind: AgentKind, name: string): void {
    this.rec(kind, name).watching++;
  }
  watchClosed(kind: AgentKind, name: string): void {
    const r = this.rec(kind, name);
    r.watching = Math.max(0, r.watching - 1);
    r.lastSeenMs = Date.now();
  }

  ack(kind: AgentKind, name: string, a: { generation: number; ok: boolean; error?: string; applyMs?: number; stateId?: string }): void {
    const r = this.rec(kind, name);
    const now = Date.now();
    r.lastSeenMs = now;
    const entry: AgentAck = { generation: a.generation, ok: a.ok, atMs: now };
    if (a.error !== undefined) entry.error = a.error;
    if (a.applyMs !== undefined) entry.applyMs = a.applyMs;
    // an ack of another state (the controller's state was replaced meanwhile) is recorded, not counted
    const sameState = a.stateId === undefined || a.stateId === this.state.stateId;
    if (sameState) {
      r.acks.push(entry);
      if (r.acks.length > ACKS_KEPT) r.acks.splice(0, r.acks.length - ACKS_KEPT);
    }
    if (a.ok && sameState) {
      if (r.appliedGeneration === null || r.stateId !== this.state.stateId || a.generation >= r.appliedGeneration) {
        r.appliedGeneration = a.generation;
        r.appliedAtMs = now;
        r.stateId = this.state.stateId;
      }
      if (r.lastError !== null && r.lastError.generation <= a.generation) r.lastError = null;
    } else if (!a.ok) {
      r.lastError = { generation: a.generation, message: a.error ?? 'refused (no reason given)', atMs: now };
    }
    this.wake();
  }

  setStatus(kind: AgentKind, name: string, status: unknown): void {
    const r = this.rec(kind, name);
    r.lastSeenMs = Date.now();
    r.status = status;
    r.statusAtMs = r.lastSeenMs;
  }

  /** The last heartbeat of an agent: { status, at } or null. */
  statusOf(kind: AgentKind, name: string): { status: unknown; at: string } | null {
    const r = this.agents.get(`${kind}/${name}`);
    if (r === undefined || r.statusAtMs === null) return null;
    return { status: r.status, at: iso(r.statusAtMs)! };
  }

  /** Every agent the config names, then any other that showed up. */
  list(): AgentView[] {
    const config = this.state.config;
    const expected = [...config.muxes.map((m) => `mux/${m.name}`), ...config.hosts.map((h) => `host/${h.name}`)];
    const ids = [...expected, ...[...this.agents.keys()].filter((k) => !expected.includes(k)).sort()];
    return ids.map((id) => this.view(id, expected.includes(id)));
  }

  view(id: string, inConfig: boolean): AgentView {
    const [kind, name] = id.split('/') as [AgentKind, string];
    const r = this.agents.get(id);
    const current = this.state.generation;
    const applied = r !== undefined && r.stateId === this.state.stateId ? r.appliedGeneration : null;
    const last = r?.acks[r.acks.length - 1];
    const now = Date.now();
    return {
      kind,
      name,
      inConfig,
      appliedGeneration: applied,
      currentGeneration: current,
      behind: applied === null || applied < current,
      connected: r !== undefined && (r.watching > 0 || (r.lastSeenMs !== null && now - r.lastSeenMs < CONNECTED_WINDOW_MS)),
      watching: r?.watching ?? 0,
      lastSeen: iso(r?.lastSeenMs ?? null),
      lastAck: last === undefined ? null : { generation: last.generation, ok: last.ok, at: iso(last.atMs)! },
      lastError:
        r?.lastError == null ? null : { generation: r.lastError.generation, message: r.lastError.message, at: iso(r.lastError.atMs)! },
      statusAt: iso(r?.statusAtMs ?? null),
    };
  }

  /** Who applied generation `gen` (or a later one), and how long after its creation each ack came. */
  generationReport(gen: number, kinds: readonly AgentKind[] = AGENT_KINDS): GenerationReport {
    const rec = this.state.generationRecord(gen);
    const createdMs = rec === undefined ? null : Date.parse(rec.at);
    const config = this.state.config;
    const ids = [
      ...(kinds.includes('mux') ? config.muxes.map((m) => `mux/${m.name}`) : []),
      ...(kinds.includes('host') ? config.hosts.map((h) => `host/${h.name}`) : []),
    ];
    const agents: GenerationAgentReport[] = ids.map((id) => {
      const [kind, name] = id.split('/') as [AgentKind, string];
      const r = this.agents.get(id);
      const appliedGen = r !== undefined && r.stateId === this.state.stateId ? r.appliedGeneration : null;
      const first = r?.acks.find((a) => a.ok && a.generation >= gen);
      const ms = first !== undefined && createdMs !== null ? first.atMs - createdMs : null;
      return {
        kind,
        name,
        appliedGeneration: appliedGen,
        applied: appliedGen !== null && appliedGen >= gen,
        ackedAt: iso(first?.atMs ?? null),
        ms,
        applyMs: first?.applyMs ?? null,
      };
    });
    const maxMs = (xs: GenerationAgentReport[]) => {
      const ms = xs.map((a) => a.ms).filter((m): m is number => m !== null);
      return ms.length === 0 || ms.length < xs.length ? null : Math.max(...ms);
    };
    return {
      generation: gen,
      current: this.state.generation,
      createdAt: rec?.at ?? null,
      cause: rec?.cause ?? null,
      complete: agents.every((a) => a.applied),
      agents,
      lastAckMs: maxMs(agents),
      lastMuxAckMs: kinds.includes('mux') ? maxMs(agents.filter((a) => a.kind === 'mux')) : null,
      lastHostAckMs: kinds.includes('host') ? maxMs(agents.filter((a) => a.kind === 'host')) : null,
      pending: agents.filter((a) => !a.applied).map((a) => `${a.kind}/${a.name}`),
    };
  }

  /** Resolves when every agent of `kinds` applied `gen` or later, or after timeoutMs (complete false). */
  waitApplied(gen: number, kinds: readonly AgentKind[], timeoutMs: number, signal?: AbortSignal): Promise<GenerationReport> {
    return new Promise((resolve) => {
      const check = (force: boolean) => {
        const r = this.generationReport(gen, kinds);
        if (r.complete || force) {
          clearTimeout(timer);
          this.ackListeners.delete(listener);
          signal?.removeEventListener('abort', onAbort);
          resolve(r);
        }
      };
      const listener = () => check(false);
      const onAbort = () => check(true);
      const timer = setTimeout(() => check(true), Math.max(0, timeoutMs));
      this.ackListeners.add(listener);
      signal?.addEventListener('abort', onAbort, { once: true });
      check(false);
    });
  }

  /** Re-checks waiters (after an ack, or a new generation that changed the set of agents). */
  wake(): void {
    for (const l of [...this.ackListeners]) l();
  }
}
