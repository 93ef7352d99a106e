// Controller replicas on etcd (slbx-controller --store etcd://...): the store (StateStore) and the
// election, in one object per controller process.
//
// Keys, under the cluster's prefix (etcd://HOST:PORT/PREFIX, default /slbx):
//   PREFIX/state    the whole stored state (controller/store.ts's StoredState, JSON), one key, so a
//                   change is one etcd write: all of it or nothing
//   PREFIX/leader   {id, url} of the leader, attached to its lease
//
// Election: every replica holds a lease (LEASE_TTL_S, renewed every third of it). Each tick
// (TICK_MS), a replica that is not the leader runs one transaction: "if PREFIX/leader does not exist,
// put it with my lease; in both cases read PREFIX/": so it either wins or learns the leader and the
// latest state in the same linearizable read. The leader ticks with a read of PREFIX/. A leader
// killed with -9 stops renewing; etcd deletes its key when the lease runs out, and the next tick of
// another replica wins. A leader that cannot renew for a whole TTL (etcd unreachable, no quorum)
// stops acting as leader by itself, as its key may be gone.
//
// Writes: only the leader writes, and only with "PREFIX/leader is still mine and PREFIX/state is
// still at the revision this change was computed from" in the same transaction, so a replica that
// lost the lead (or a change computed from an older state) can never overwrite a newer state: the
// generation, +1 on every change of the document, is monotonic across leaders, and a change is
// acknowledged only after etcd committed it (a majority of members has it on disk), so it survives
// any replica and any minority of etcd members. Followers adopt each newer state they read; agents
// watching a follower get the new policy from it.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { SlbxConfig } from '../shared/config.js';
import { ApiError } from './document.js';
import { EtcdClient, EtcdError, type EtcdKv } from './etcd.js';
import { ControllerState, type OpenResult } from './state.js';
import { checkState, type StateStore, type StoredState } from './store.js';

export const LEASE_TTL_S = 2;
export const TICK_MS = 200;

export interface ReplicaInfo {
  id: string;
  /** Where the other replicas forward writes to (its --advertise URL). */
  url: string;
}

export type ReplicaRole = 'starting' | 'leader' | 'follower' | 'stopped';

export interface ReplicaStatus {
  id: string;
  url: string;
  role: ReplicaRole;
  leader: ReplicaInfo | null;
  store: string;
  /** When the role last changed. */
  since: string;
  /** The last error talking to etcd, while it lasts. */
  lastError: string | null;
  /** Times this replica became the leader since it started. */
  elected: number;
}

/** What the API needs of a replica (controller/forward.ts). */
export interface ReplicaView {
  readonly id: string;
  isLeader(): boolean;
  leader(): ReplicaInfo | null;
  /** Why etcd cannot be used now (its last error while requests fail), else null. */
  problem(): string | null;
  status(): ReplicaStatus;
}

export type ReplicaLog = (level: 'debug' | 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>) => void;

export function replicaId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

export class EtcdReplica implements StateStore, ReplicaView {
  readonly where: string;
  private readonly stateKey: string;
  private readonly leaderKey: string;
  private role: ReplicaRole = 'starting';
  private roleSinceMs = Date.now();
  private leaderInfo: ReplicaInfo | null = null;
  private lease: string | null = null;
  private leaseOkAtMs = 0;
  private tickOkAtMs = Date.now();
  private lastError: string | null = null;
  private elected = 0;
  /** The etcd mod revision of each stored state this replica holds (the base of the next write). */
  private readonly revOf = new WeakMap<StoredState, number>();
  private state: ControllerState | null = null;
  private tickTimer: NodeJS.Timeout | null = null;
  private keepTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly client: EtcdClient,
    readonly prefix: string,
    readonly me: ReplicaInfo,
    private readonly log: ReplicaLog = () => {},
    private readonly ttlS = LEASE_TTL_S,
    private readonly tickMs = TICK_MS,
  ) {
    this.where = `etcd://${client.endpoints.join(',')}${prefix}`;
    this.stateKey = `${prefix}/state`;
    this.leaderKey = `${prefix}/leader`;
  }

  /** The leader key's value while this replica leads. */
  private get myValue(): string {
    return JSON.stringify(this.me);
  }

  get id(): string {
    return this.me.id;
  }

  isLeader(): boolean {
    return this.role === 'leader';
  }

  leader(): ReplicaInfo | null {
    return this.role === 'leader' ? this.me : this.leaderInfo;
  }

  problem(): string | null {
    return this.lastError;
  }

  status(): ReplicaStatus {
    return {
      id: this.me.id,
      url: this.me.url,
      role: this.role,
      leader: this.leader(),
      store: this.where,
      since: new Date(this.roleSinceMs).toISOString(),
      lastError: this.lastError,
      elected: this.elected,
    };
  }

  /**
   * Reads the stored state, seeding it from `init` when etcd has none (the first replica to get there
   * seeds it; the others read that one). Retries while no etcd member answers, until `deadlineMs`.
   */
  async open(init: SlbxConfig | null, deadlineMs = Date.now() + 30_000): Promise<OpenResult> {
    for (;;) {
      try {
        let kv = (await this.client.range(this.stateKey)).kvs[0];
        let seeded = false;
        if (kv === undefined) {
          if (init === null)
            return { ok: false, error: `${this.where} holds no state (no key ${this.stateKey}): seed it with --init CONFIG.yaml` };
          const s = ControllerState.initialState(init);
          const value = JSON.stringify(s);
          const r = await this.client.txn(
            [{ key: this.stateKey, target: 'CREATE', createRevision: 0 }],
            [{ put: { key: this.stateKey, value } }],
            [{ range: { key: this.stateKey } }],
          );
          kv = r.succeeded
            ? { key: this.stateKey, value, createRevision: r.revision, modRevision: r.revision, lease: '0' }
            : r.ranges[0]?.[0];
          seeded = r.succeeded;
          if (kv === undefined) continue; // deleted in between: start over
        }
        const s = this.parse(kv);
        if (typeof s === 'string') return { ok: false, error: s };
        const opened = ControllerState.fromStored(this, s);
        if (!opened.ok) return opened;
        this.revOf.set(opened.state.stored, kv.modRevision);
        this.state = opened.state;
        return { ...opened, seeded };
      } catch (e) {
        if (!(e instanceof EtcdError) || Date.now() > deadlineMs)
          return { ok: false, error: `cannot read the state from ${this.where}: ${(e as Error).message}` };
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** Starts campaigning and following (after open). */
  start(): void {
    if (this.state === null) throw new Error('EtcdReplica.start before open');
    const tick = () => {
      this.tick().finally(() => {
        if (this.role !== 'stopped') this.tickTimer = setTimeout(tick, this.tickMs);
      });
    };
    const keep = () => {
      this.keepAlive().finally(() => {
        if (this.role !== 'stopped') this.keepTimer = setTimeout(keep, Math.max(100, (this.ttlS * 1000) / 4));
      });
    };
    tick();
    keep();
  }

  /**
   * Stops and gives up the lead at once (revoking the lease deletes the leader key). `revoke: false`
   * leaves the lease to run out, as after kill -9 (the tests' crash).
   */
  async stop(revoke = true): Promise<void> {
    if (this.role === 'stopped') return;
    this.setRole('stopped', 'stopping');
    if (this.tickTimer !== null) clearTimeout(this.tickTimer);
    if (this.keepTimer !== null) clearTimeout(this.keepTimer);
    const lease = this.lease;
    this.lease = null;
    if (lease !== null && revoke) await this.client.leaseRevoke(lease).catch(() => undefined);
    this.client.close();
  }

  // -------------------------------------------------------------------------------------------
  // StateStore

  async save(next: StoredState, base: StoredState): Promise<void> {
    if (this.role !== 'leader') throw this.notLeader();
    // a leader whose lease was not renewed for 3/4 of a TTL is probably cut off from a quorum: refuse now,
    // for sure, rather than send a change etcd may not answer (and might still commit later)
    if (Date.now() - this.leaseOkAtMs > this.ttlS * 750)
      throw new ApiError(
        503,
        `this controller replica could not renew its lease for ${Math.round((Date.now() - this.leaseOkAtMs) / 100) / 10} s (etcd: ${this.lastError ?? 'no answer'}); nothing was changed: retry`,
      );
    const baseRev = this.revOf.get(base);
    if (baseRev === undefined) throw new ApiError(503, 'this replica does not know the revision of its state; nothing was changed: retry');
    let r;
    try {
      r = await this.client.txn(
        [
          { key: this.leaderKey, target: 'VALUE', value: this.myValue },
          { key: this.stateKey, target: 'MOD', modRevision: baseRev },
        ],
        [{ put: { key: this.stateKey, value: JSON.stringify(next) } }],
        [{ range: { key: `${this.prefix}/`, prefix: true } }],
      );
    } catch (e) {
      this.noteError(e);
      throw storeError(e as Error);
    }
    if (r.succeeded) {
      this.revOf.set(next, r.revision);
      return;
    }
    this.learn(r.ranges[0] ?? []);
    if (this.role !== 'leader') throw this.notLeader();
    throw new ApiError(503, 'the state changed under this change (another replica wrote it); nothing was changed: retry');
  }

  private notLeader(): ApiError {
    const l = this.leaderInfo;
    return new ApiError(
      503,
      l === null
        ? `this controller replica is not the leader and no leader is known (${this.lastError === null ? 'an election is under way' : `etcd: ${this.lastError}`}); nothing was changed: retry`
        : `this controller replica is not the leader (${l.id} at ${l.url} is); nothing was changed: retry there`,
    );
  }

  // -------------------------------------------------------------------------------------------

  private async tick(): Promise<void> {
    try {
      if (this.lease === null) {
        this.lease = await this.client.leaseGrant(this.ttlS);
        this.leaseOkAtMs = Date.now();
      }
      let kvs: EtcdKv[];
      if (this.role === 'leader') {
        kvs = (await this.client.range(`${this.prefix}/`, true)).kvs;
      } else {
        const r = await this.client.txn(
          [{ key: this.leaderKey, target: 'CREATE', createRevision: 0 }],
          [{ put: { key: this.leaderKey, value: this.myValue, lease: this.lease } }, { range: { key: `${this.prefix}/`, prefix: true } }],
          [{ range: { key: `${this.prefix}/`, prefix: true } }],
        );
        kvs = (r.succeeded ? r.ranges[1] : r.ranges[0]) ?? [];
      }
      this.lastError = null;
      this.tickOkAtMs = Date.now();
      this.learn(kvs);
    } catch (e) {
      this.noteError(e);
      this.checkLease();
      // etcd unreachable for a whole TTL: whoever led may have lost its lease; say no leader is known
      if (Date.now() - this.tickOkAtMs > this.ttlS * 1000) this.leaderInfo = null;
    }
  }

  private async keepAlive(): Promise<void> {
    const lease = this.lease;
    if (lease === null) return;
    try {
      const ttl = await this.client.leaseKeepAlive(lease);
      if (ttl <= 0) {
        // expired (this process stalled, or etcd lost it): a new lease, and no lead without it
        if (this.lease === lease) this.lease = null;
        if (this.role === 'leader') this.setRole('follower', 'lease expired');
        return;
      }
      this.leaseOkAtMs = Date.now();
    } catch (e) {
      this.noteError(e);
      this.checkLease();
    }
  }

  /** A leader that could not renew its lease for a whole TTL may have lost its key: it stops leading. */
  private checkLease(): void {
    if (this.role === 'leader' && Date.now() - this.leaseOkAtMs > this.ttlS * 1000)
      this.setRole('follower', `lease not renewed for ${this.ttlS} s (${this.lastError ?? 'etcd unreachable'})`);
  }

  /** What a read of PREFIX/ says: who leads, and a newer state to adopt. */
  private learn(kvs: readonly EtcdKv[]): void {
    const st = this.state;
    const leaderKv = kvs.find((k) => k.key === this.leaderKey);
    const stateKv = kvs.find((k) => k.key === this.stateKey);
    if (st !== null && stateKv !== undefined && stateKv.modRevision > (this.revOf.get(st.stored) ?? 0)) {
      const s = this.parse(stateKv);
      const problem = typeof s === 'string' ? s : st.adopt(s);
      if (problem !== null) this.log('error', 'state_not_adopted', { revision: stateKv.modRevision, error: problem });
      else if (typeof s !== 'string') this.revOf.set(s, stateKv.modRevision);
    }
    let info: ReplicaInfo | null = null;
    if (leaderKv !== undefined) {
      try {
        const v = JSON.parse(leaderKv.value) as Partial<ReplicaInfo>;
        if (typeof v.id === 'string' && typeof v.url === 'string') info = { id: v.id, url: v.url };
      } catch {
        /* not ours: no leader known */
      }
    }
    const mine = leaderKv !== undefined && leaderKv.value === this.myValue && leaderKv.lease === this.lease;
    this.leaderInfo = mine ? this.me : info;
    if (mine && this.role !== 'leader') {
      this.elected++;
      this.setRole('leader', 'elected');
    } else if (!mine && this.role !== 'follower' && this.role !== 'stopped') {
      this.setRole('follower', info === null ? 'no leader yet' : `${info.id} leads`);
    }
  }

  private parse(kv: EtcdKv): StoredState | string {
    let raw: unknown;
    try {
      raw = JSON.parse(kv.value);
    } catch (e) {
      return `${this.where}: ${this.stateKey} is not JSON (${(e as Error).message})`;
    }
    const problem = checkState(raw);
    return problem === null ? (raw as StoredState) : `${this.where}: ${this.stateKey}: ${problem}`;
  }

  private setRole(role: ReplicaRole, reason: string): void {
    if (role === this.role) return;
    const was = this.role;
    this.role = role;
    this.roleSinceMs = Date.now();
    this.log(role === 'leader' || was === 'leader' ? 'info' : 'debug', 'replica_role', {
      role,
      was,
      reason,
      leader: this.leader(),
      generation: this.state?.generation ?? null,
    });
  }

  private noteError(e: unknown): void {
    const m = (e as Error).message ?? String(e);
    if (m !== this.lastError) this.log('warn', 'etcd_error', { error: m, role: this.role });
    this.lastError = m;
  }
}

/**
 * The API's answer when etcd did not take a write. etcd's "no leader" (no quorum) means the write was
 * not proposed; a timeout means it may still be committed later: the message says to re-read first.
 */
function storeError(e: Error): ApiError {
  if (e instanceof EtcdError && /no leader|not capable|too many requests/i.test(e.message))
    return new ApiError(
      503,
      `etcd has no quorum (${e.message}): the change was refused and nothing was changed; retry once etcd has a majority again`,
    );
  return new ApiError(
    503,
    `etcd did not confirm the change (${e.message}): it may or may not be stored; read the state (slbctl state) before retrying`,
  );
}
