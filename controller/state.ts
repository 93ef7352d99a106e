// The controller's desired state: the config document, its generation and the health the host agents
// report, kept in memory and in the store (controller/store.ts). Every change is all or nothing: a
// write edits a copy of the document, validateConfig checks the whole result, and only a valid result
// that differs from the current one becomes the next generation, persisted before anyone is told.
// Health changes that change what a MUX would do (a (nic, probe) going down or coming back) make a new
// generation too, so the MUXes learn them through the same versioned policy.
import { randomBytes } from 'node:crypto';
import { formatConfigErrors, validateConfig, type SlbxConfig } from '../shared/config.js';
import { SnatAllocator, type DemandResult, type SnatAllocState, type SnatRange } from './snat-alloc.js';
import {
  ApiError,
  applyWrite,
  deepEqual,
  getPath,
  toApiErrors,
  toPlainConfig,
  type Change,
  type Doc,
  type Target,
  type WriteMethod,
} from './document.js';
import {
  loadState,
  saveState,
  FileStore,
  NODE_STORE_FS,
  STATE_FORMAT,
  STATE_VERSION,
  type GenerationRecord,
  type HealthEntry,
  type HealthState,
  type StateStore,
  type StoreFs,
  type StoredState,
} from './store.js';

/** Generations kept in the state's history (GET /v1/generations). */
export const HISTORY_MAX = 200;

/** Writes stored together at most (one store write; each keeps its own generation in the history). */
export const BATCH_MAX = 100;

/**
 * The replicas' group-commit pace (slbx-controller --store etcd): a batch starts no sooner than this
 * after the previous one started, so that a stream of changes makes at most 1000/BATCH_INTERVAL_MS etcd
 * transactions a second, each holding more changes, and fewer generations for the agents to take
 * (docs/controller.md, "Changes per second"). A change after a quiet spell is stored at once. The file
 * store (one local fsync) uses none.
 */
export const BATCH_INTERVAL_MS = 100;

interface Queued {
  f: () => Maybe<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

export interface Policy {
  stateId: string;
  generation: number;
  config: Doc;
  health: Record<string, 'up' | 'down'>;
  /** Outbound NAT's port ranges of every host (docs/outbound.md); only when the state has an allocation. */
  snat?: SnatRange[];
}

export interface WriteResult {
  status: 200 | 201;
  generation: number;
  /** False when the write left the document as it was (no new generation). */
  changed: boolean;
  /** The object as stored (normalized), or the one removed. */
  item: unknown;
}

export interface HealthResultIn {
  nic: string;
  probe: string;
  state: HealthState;
  detail?: string | null;
}

export interface HealthReportResult {
  generation: number;
  /** The effective health changed and made a new generation. */
  changed: boolean;
  accepted: number;
  ignored: { nic: string; probe: string; reason: string }[];
}

export type OpenResult = { ok: true; state: ControllerState; seeded: boolean; removedTmp: boolean } | { ok: false; error: string };

const nowIso = (ms = Date.now()) => new Date(ms).toISOString();

/** A value now (synchronous store) or later (asynchronous store). */
type Maybe<T> = T | Promise<T>;

function then<T, U>(v: Maybe<T>, f: (x: T) => Maybe<U>): Maybe<U> {
  return v instanceof Promise ? v.then(f) : f(v);
}

export class ControllerState {
  private s: StoredState;
  private validated: SlbxConfig;
  private readonly listeners = new Set<(generation: number) => void>();
  /** The *Async writes not yet taken into a batch, in arrival order. */
  private waiting: Queued[] = [];
  /** A batch is being computed or saved. */
  private flushing = false;
  /** While a batch is computed: persist() only notes that the store must be written (batch(), below). */
  private staging = false;
  private stagedDirty = false;
  /**
   * The group-commit pace in ms (BATCH_INTERVAL_MS for replicas; 0: a batch starts as soon as the one
   * before is stored): a batch starts no sooner than this after the previous one started, or at once
   * when BATCH_MAX writes wait.
   */
  batchIntervalMs = 0;
  private batchStartedAtMs = 0;
  /** Ends the pace's wait early (BATCH_MAX writes wait). */
  private paceWake: (() => void) | null = null;
  /** Store writes made by batches (the tests count them). */
  batchesStored = 0;

  private constructor(
    /** Where the state lives (the state file's path, or the etcd store's etcd://...). */
    readonly path: string,
    s: StoredState,
    validated: SlbxConfig,
    readonly store: StateStore,
  ) {
    this.s = s;
    this.validated = validated;
  }

  /**
   * A state kept in another store (etcd: controller/etcd-store.ts), from a stored state already read
   * from it (checkState passed). Errors name the config's problems.
   */
  static fromStored(store: StateStore, s: StoredState): OpenResult {
    const v = validateConfig(s.config);
    if (!v.ok) return { ok: false, error: formatConfigErrors(v.errors, store.where) };
    const se = snatLoadError(v.config, s.snat);
    if (se !== null) return { ok: false, error: `${store.where}: ${se}` };
    return { ok: true, state: new ControllerState(store.where, s, v.config, store), seeded: false, removedTmp: false };
  }

  /** A new state at generation 1 from a valid config (what --init seeds). */
  static initialState(init: SlbxConfig, atMs = Date.now()): StoredState {
    const at = nowIso(atMs);
    return {
      format: STATE_FORMAT,
      version: STATE_VERSION,
      stateId: randomBytes(8).toString('hex'),
      generation: 1,
      savedAt: at,
      config: toPlainConfig(init),
      health: {},
      policyHealth: {},
      history: [{ generation: 1, at, cause: 'init' }],
      ...snatField(nextSnat(undefined, init)),
    };
  }

  /**
   * A newer state another replica wrote (a follower of a replicated store learns each one). Refused,
   * keeping the current one, when its config does not validate here. Listeners hear of a new
   * generation (or a new stateId) as after a write.
   */
  adopt(s: StoredState): string | null {
    const v = validateConfig(s.config);
    if (!v.ok) return formatConfigErrors(v.errors, this.path);
    const se = snatLoadError(v.config, s.snat);
    if (se !== null) return `${this.path}: ${se}`;
    const changed = s.generation !== this.s.generation || s.stateId !== this.s.stateId;
    this.s = s;
    this.validated = v.config;
    if (changed) this.tell(s.generation);
    return null;
  }

  /** The stored state as it is now (for the replicated store's bookkeeping). Do not modify. */
  get stored(): StoredState {
    return this.s;
  }

  /**
   * Opens the state file. Missing or empty: seeded from `init` (a parsed, valid config) when given,
   * else an error. A corrupt file is an error and is left alone.
   */
  static open(path: string, init: SlbxConfig | null, fs: StoreFs = NODE_STORE_FS): OpenResult {
    const r = loadState(path, fs);
    if (r.kind === 'error') return { ok: false, error: r.error };
    if (r.kind === 'loaded') {
      const v = validateConfig(r.state.config);
      if (!v.ok) return { ok: false, error: formatConfigErrors(v.errors, path) };
      const se = snatLoadError(v.config, r.state.snat);
      if (se !== null) return { ok: false, error: `${path}: ${se}` };
      // a state saved before vipRanges existed: pin the ranges derived from its VIPs now, or the next
      // write would derive them again from a document that holds the new VIP (docs/config.md, vipRanges)
      if (!('vipRanges' in r.state.config)) r.state.config = { ...r.state.config, vipRanges: toPlainConfig(v.config)['vipRanges'] };
      return {
        ok: true,
        state: new ControllerState(path, r.state, v.config, new FileStore(path, fs)),
        seeded: false,
        removedTmp: r.removedTmp,
      };
    }
    if (init === null) return { ok: false, error: `${path} does not exist or is empty: seed it with --init CONFIG.yaml` };
    const s = ControllerState.initialState(init);
    try {
      saveState(path, s, fs);
    } catch (e) {
      return { ok: false, error: `cannot write ${path}: ${(e as Error).message}` };
    }
    return { ok: true, state: new ControllerState(path, s, init, new FileStore(path, fs)), seeded: true, removedTmp: r.removedTmp };
  }

  get generation(): number {
    return this.s.generation;
  }
  get stateId(): string {
    return this.s.stateId;
  }
  /** The config document (normalized). Do not modify. */
  get document(): Doc {
    return this.s.config;
  }
  /** The validated config of the current generation. */
  get config(): SlbxConfig {
    return this.validated;
  }
  get history(): readonly GenerationRecord[] {
    return this.s.history;
  }
  get health(): Readonly<Record<string, HealthEntry>> {
    return this.s.health;
  }

  generationRecord(generation: number): GenerationRecord | undefined {
    return this.s.history.find((h) => h.generation === generation);
  }

  /** Called after every new generation (after it is persisted). */
  onGeneration(listener: (generation: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  policy(): Policy {
    const p: Policy = { stateId: this.s.stateId, generation: this.s.generation, config: this.s.config, health: this.s.policyHealth };
    if (this.s.snat !== undefined) p.snat = this.snatRanges();
    return p;
  }

  private snatCache: { s: StoredState; ranges: SnatRange[] } | null = null;

  /** The stored allocation's ranges (merged chunks), computed once per stored state. */
  snatRanges(host?: string): SnatRange[] {
    if (this.snatCache?.s !== this.s) this.snatCache = { s: this.s, ranges: new SnatAllocator(this.validated, this.s.snat).ranges() };
    const all = this.snatCache.ranges;
    return host === undefined ? all : all.filter((r) => r.host === host);
  }

  /** Ports each nic holds per family, and its rule's cap (GET /v1/snat, slbctl snat). */
  snatNics(): { nic: string; host: string; rule: string; ports4: number; ports6: number; portsPerNic: number }[] {
    const a = new SnatAllocator(this.validated, this.s.snat);
    return this.validated.outbound.flatMap((r) =>
      r.nics.map((nic) => ({
        nic,
        host: this.validated.nics.find((n) => n.name === nic)?.host ?? '',
        rule: r.name,
        ports4: a.portsOf(nic, 4),
        ports6: a.portsOf(nic, 6),
        portsPerNic: r.portsPerNic,
      })),
    );
  }

  /**
   * A host agent gives back on-demand chunks it no longer uses (queued like every write): those taken
   * back make one new generation; a chunk that is not that host's, or preallocated, is left and listed.
   */
  snatReleaseAsync(
    host: string,
    chunks: readonly { ip: string; first: number }[],
    atMs = Date.now(),
  ): Promise<{ released: number; kept: { ip: string; first: number }[] }> {
    return this.enqueue(() => {
      const a = new SnatAllocator(this.validated, this.s.snat);
      const kept: { ip: string; first: number }[] = [];
      let released = 0;
      for (const c of chunks) {
        if (a.release(host, c.ip, c.first)) released++;
        else kept.push({ ip: c.ip, first: c.first });
      }
      if (released === 0) return { released, kept };
      const next: StoredState = { ...this.s, snat: a.toState() };
      return then(this.bump(next, `snat release ${released * 8} ports (${host})`, atMs), () => ({ released, kept }));
    });
  }

  /**
   * A host agent asks for more ports for a nic (queued like every write): granted chunks make a new
   * generation (the policy carries them); none granted, nothing changes. 404 for a nic not on that host.
   */
  snatDemandAsync(host: string, nic: string, family: 4 | 6, ports: number, atMs = Date.now()): Promise<DemandResult> {
    return this.enqueue(() => {
      const n = this.validated.nics.find((x) => x.name === nic);
      if (n === undefined || n.host !== host) throw new ApiError(404, `no nic ${nic} on host ${host}`);
      const a = new SnatAllocator(this.validated, this.s.snat);
      const r = a.demand(nic, family, ports);
      if (r.granted.length === 0) return r;
      const next: StoredState = { ...this.s, snat: a.toState() };
      return then(this.bump(next, `snat demand ${nic} IPv${family} +${r.granted.length * 8} ports (${host})`, atMs), () => r);
    });
  }

  /** GET /v1/state. */
  snapshot(): { stateId: string; generation: number; config: Doc } {
    return { stateId: this.s.stateId, generation: this.s.generation, config: this.s.config };
  }

  /**
   * One write through the API: applied to a copy, validated as a whole, persisted as the next
   * generation when it changed something. Throws ApiError (400 with field errors, 404, 409, 500).
   */
  write(method: WriteMethod, target: Target, body: unknown, cause: string, atMs = Date.now()): WriteResult {
    return this.now(this.writeAny(method, target, body, cause, atMs));
  }

  /** write() through any store (the API's way): queued behind the writes before it. */
  writeAsync(method: WriteMethod, target: Target, body: unknown, cause: string, atMs = Date.now()): Promise<WriteResult> {
    return this.enqueue(() => this.writeAny(method, target, body, cause, atMs));
  }

  private writeAny(method: WriteMethod, target: Target, body: unknown, cause: string, atMs: number): Maybe<WriteResult> {
    const doc = structuredClone(this.s.config);
    const change: Change = applyWrite(doc, method, target, body);
    return this.commit(
      doc,
      cause,
      method === 'DELETE' ? null : change.path,
      (plain) => (method === 'DELETE' ? change.removed : getPath(plain, change.path)),
      change.status,
      atMs,
    );
  }

  /** PUT /v1/state: the whole config document at once. */
  replaceConfig(config: unknown, cause: string, atMs = Date.now()): WriteResult {
    return this.now(this.commit(structuredClone(config) as Doc, cause, [], (plain) => plain, 200, atMs));
  }

  /**
   * replaceConfig() through any store, queued. `generation`: only if the state is still at it when
   * the write's turn comes (else 409).
   */
  replaceConfigAsync(config: unknown, cause: string, atMs = Date.now(), generation?: number): Promise<WriteResult> {
    return this.enqueue(() => {
      if (generation !== undefined && generation !== this.s.generation)
        throw new ApiError(409, `the state is at generation ${this.s.generation}, not ${generation}: re-read it and try again`);
      return this.commit(structuredClone(config) as Doc, cause, [], (plain) => plain, 200, atMs);
    });
  }

  /** reportHealth() through any store, queued. */
  reportHealthAsync(host: string, results: readonly HealthResultIn[], atMs = Date.now()): Promise<HealthReportResult> {
    return this.enqueue(() => this.reportHealthAny(host, results, atMs));
  }

  /**
   * Group commit: the *Async writes that arrive while one store write is under way wait, then are
   * computed one after the other (each from the state the one before left, each its own generation,
   * all synchronously, so nobody sees a state between them) and stored in ONE store write (one etcd
   * transaction); each is answered only after that write is confirmed, or fails with it. A change is
   * thus never acknowledged before it is stored, and the store's round trip is paid once per batch
   * rather than once per change (docs/controller.md, "Changes per second").
   */
  private enqueue<T>(f: () => Maybe<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ f, resolve: resolve as (v: unknown) => void, reject });
      if (this.waiting.length >= BATCH_MAX) this.paceWake?.();
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.waiting.length > 0) {
        // the pace: writes that come within batchIntervalMs of the last batch's start wait for the next
        const left = this.batchStartedAtMs + this.batchIntervalMs - Date.now();
        if (left > 0 && this.waiting.length < BATCH_MAX) {
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, left);
            this.paceWake = () => {
              clearTimeout(t);
              resolve();
            };
          });
          this.paceWake = null;
        }
        this.batchStartedAtMs = Date.now();
        await this.batch(this.waiting.splice(0, BATCH_MAX));
      }
    } finally {
      this.flushing = false;
    }
  }

  private async batch(items: Queued[]): Promise<void> {
    const base = this.s;
    const baseValidated = this.validated;
    const done: { q: Queued; v: unknown }[] = [];
    this.staging = true;
    this.stagedDirty = false;
    try {
      for (const q of items) {
        try {
          const v = q.f();
          if (v instanceof Promise) throw new Error('a staged write returned a promise');
          done.push({ q, v });
        } catch (e) {
          q.reject(e);
        }
      }
    } finally {
      this.staging = false;
    }
    const next = this.s;
    const nextValidated = this.validated;
    if (!this.stagedDirty || next === base) {
      for (const d of done) d.q.resolve(d.v);
      return;
    }
    // the batch's state is not installed (not served, not told) until the store confirmed it
    this.s = base;
    this.validated = baseValidated;
    try {
      this.batchesStored++;
      await this.persistNow(next, base);
    } catch (e) {
      for (const d of done) d.q.reject(e);
      return;
    }
    // a follower's learn() may have adopted this very state from etcd meanwhile: install ours (same content)
    this.s = next;
    this.validated = nextValidated;
    if (next.generation !== base.generation) this.tell(next.generation);
    for (const d of done) d.q.resolve(d.v);
  }

  /** The result of a synchronous store's write (the file store); an asynchronous store needs the *Async methods. */
  private now<T>(v: Maybe<T>): T {
    if (v instanceof Promise) {
      v.catch(() => undefined);
      throw new Error(`the store ${this.path} is asynchronous: write through writeAsync, replaceConfigAsync or reportHealthAsync`);
    }
    return v;
  }

  /** `atMs`: when the request arrived; it dates the new generation (GET /v1/generations measures from it). */
  private commit(
    doc: Doc,
    cause: string,
    objectPath: (string | number)[] | null,
    pick: (plain: Doc) => unknown,
    status: 200 | 201,
    atMs: number,
  ): Maybe<WriteResult> {
    const v = validateConfig(doc);
    if (!v.ok) {
      const errors = toApiErrors(v.errors, objectPath);
      throw new ApiError(
        400,
        `refused: ${errors.length} problem${errors.length === 1 ? '' : 's'} in the result; nothing was changed`,
        errors,
      );
    }
    const plain = toPlainConfig(v.config);
    if (deepEqual(plain, this.s.config)) {
      return { status: status === 201 ? 201 : 200, generation: this.s.generation, changed: false, item: pick(plain) };
    }
    const next: StoredState = { ...this.s, config: plain, ...snatField(nextSnat(this.s.snat, v.config)) };
    if (next.snat === undefined) delete next.snat;
    this.pruneHealth(next, v.config);
    // the new config is installed with the state, before the listeners hear of it
    return then(this.bump(next, cause, atMs, v.config), () => ({
      status,
      generation: this.s.generation,
      changed: true,
      item: pick(plain),
    }));
  }

  /** Drops health of (nic, probe) pairs the config no longer has. */
  private pruneHealth(next: StoredState, config: SlbxConfig): void {
    const nics = new Set(config.nics.map((n) => n.name));
    const probes = new Set(config.probes.map((p) => p.name));
    const health: Record<string, HealthEntry> = {};
    for (const [k, e] of Object.entries(next.health)) {
      const [nic, probe] = splitKey(k);
      if (nics.has(nic) && probes.has(probe)) health[k] = e;
    }
    next.health = health;
  }

  /**
   * Persists `next` as the next generation (policy health snapshot taken now), installs it (with
   * `validated`, its config, when the config changed), then tells listeners.
   */
  private bump(next: StoredState, cause: string, atMs: number, validated: SlbxConfig = this.validated): Maybe<void> {
    const at = nowIso(atMs);
    const generation = this.s.generation + 1;
    const history = [...next.history, { generation, at, cause }];
    if (history.length > HISTORY_MAX) history.splice(0, history.length - HISTORY_MAX);
    const s: StoredState = { ...next, generation, savedAt: at, history, policyHealth: policyHealthOf(next.health) };
    return then(this.persist(s), () => {
      this.s = s;
      this.validated = validated;
      if (!this.staging) this.tell(generation);
    });
  }

  private tell(generation: number): void {
    for (const l of this.listeners) {
      try {
        l(generation);
      } catch {
        /* a listener must not break a write */
      }
    }
  }

  /**
   * Saves `s`, the state that follows the current one; nothing changes here when it fails. Inside a
   * batch it only notes that the batch must be stored (the batch stores its last state once).
   */
  private persist(s: StoredState): Maybe<void> {
    if (this.staging) {
      this.stagedDirty = true;
      return;
    }
    return this.persistNow(s, this.s);
  }

  private persistNow(s: StoredState, base: StoredState): Maybe<void> {
    const fail = (e: unknown): never => {
      if (e instanceof ApiError) throw e; // the store said why (a replica: 503, not the leader)
      throw new ApiError(500, `the state could not be saved (${(e as Error).message}); nothing was changed`);
    };
    try {
      const r = this.store.save(s, base);
      return r instanceof Promise ? r.catch(fail) : r;
    } catch (e) {
      return fail(e);
    }
  }

  /**
   * A host agent's full current set of probe results (POST /v1/agents/host/NAME/health). Entries of
   * that host not in the set are forgotten (unknown = up). Results for a nic that is not on this host
   * or a probe the config does not have are ignored and listed. A change of what is down makes a new
   * generation; other changes (detail, unknown <-> up) are kept and persisted without one.
   */
  reportHealth(host: string, results: readonly HealthResultIn[], atMs = Date.now()): HealthReportResult {
    return this.now(this.reportHealthAny(host, results, atMs));
  }

  private reportHealthAny(host: string, results: readonly HealthResultIn[], atMs: number): Maybe<HealthReportResult> {
    const config = this.validated;
    if (!config.hosts.some((h) => h.name === host)) throw new ApiError(404, `no host ${host}`);
    const nicHost = new Map(config.nics.map((n) => [n.name, n.host]));
    const probes = new Set(config.probes.map((p) => p.name));
    const now = nowIso();
    const health: Record<string, HealthEntry> = {};
    for (const [k, e] of Object.entries(this.s.health)) if (e.host !== host) health[k] = e;
    const ignored: HealthReportResult['ignored'] = [];
    let accepted = 0;
    for (const r of results) {
      const on = nicHost.get(r.nic);
      if (on === undefined) {
        ignored.push({ nic: r.nic, probe: r.probe, reason: `no nic ${r.nic}` });
        continue;
      }
      if (on !== host) {
        ignored.push({ nic: r.nic, probe: r.probe, reason: `nic ${r.nic} is on host ${on}, not ${host}` });
        continue;
      }
      if (!probes.has(r.probe)) {
        ignored.push({ nic: r.nic, probe: r.probe, reason: `no probe ${r.probe}` });
        continue;
      }
      const k = `${r.nic}/${r.probe}`;
      const prev = this.s.health[k];
      health[k] = {
        state: r.state,
        host,
        detail: r.detail ?? null,
        since: prev !== undefined && prev.state === r.state ? prev.since : now,
        reportedAt: now,
      };
      accepted++;
    }
    const downBefore = downSet(this.s.policyHealth);
    const downAfter = downSet(policyHealthOf(health));
    const statesChanged = !deepEqual(stateMap(this.s.health), stateMap(health));
    if (downBefore !== downAfter) {
      const cause = describeHealthChange(this.s.policyHealth, policyHealthOf(health), host);
      return then(this.bump({ ...this.s, health }, cause, atMs), () => ({
        generation: this.s.generation,
        changed: true,
        accepted,
        ignored,
      }));
    }
    const s = { ...this.s, health };
    const done = (): HealthReportResult => ({ generation: this.s.generation, changed: false, accepted, ignored });
    if (!statesChanged) {
      this.s = s;
      return done();
    }
    const saved = { ...s, savedAt: now };
    return then(this.persist(saved), () => {
      this.s = saved;
      return done();
    });
  }
}

export function splitKey(k: string): [string, string] {
  const i = k.indexOf('/');
  return i < 0 ? [k, ''] : [k.slice(0, i), k.slice(i + 1)];
}

/** The allocation after a config: reconciled from the stored one; none while no outbound rule ever existed. */
function nextSnat(prev: SnatAllocState | undefined, config: SlbxConfig): SnatAllocState | undefined {
  if (prev === undefined && config.outbound.length === 0) return undefined;
  return new SnatAllocator(config, prev).toState();
}

/** Why a stored allocation cannot be used with `config` (a chunk listed twice, off the grid), or null. */
function snatLoadError(config: SlbxConfig, s: SnatAllocState | undefined): string | null {
  if (s === undefined) return null;
  try {
    new SnatAllocator(config, s);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

function snatField(s: SnatAllocState | undefined): { snat?: SnatAllocState } {
  return s === undefined ? {} : { snat: s };
}

function policyHealthOf(health: Record<string, HealthEntry>): Record<string, 'up' | 'down'> {
  const out: Record<string, 'up' | 'down'> = {};
  for (const k of Object.keys(health).sort()) {
    const st = health[k]!.state;
    if (st === 'up' || st === 'down') out[k] = st;
  }
  return out;
}

function stateMap(health: Record<string, HealthEntry>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(health).sort()) out[k] = health[k]!.state;
  return out;
}

function downSet(h: Record<string, 'up' | 'down'>): string {
  return Object.keys(h)
    .filter((k) => h[k] === 'down')
    .sort()
    .join(',');
}

function describeHealthChange(before: Record<string, 'up' | 'down'>, after: Record<string, 'up' | 'down'>, host: string): string {
  const parts: string[] = [];
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = before[k] === 'down';
    const b = after[k] === 'down';
    if (a !== b) parts.push(`${k} ${b ? 'down' : 'up'}`);
  }
  return `health ${parts.slice(0, 8).join(', ')}${parts.length > 8 ? ` and ${parts.length - 8} more` : ''} (${host})`;
}
