// The controller's durable store: one JSON file holding the whole desired state (the config document,
// the generation, the last known health, the recent generations), replaced atomically on every change:
//
//   write FILE.tmp, fsync it, rename it over FILE, fsync the directory
//
// so that after a crash at any point FILE is either the old state or the new one, never a mix or a
// truncated file (rename(2) is atomic within a file system; the fsyncs order the data before the name
// and make the rename itself durable). A FILE.tmp left by a crash is ignored and removed on load.
// The file system calls go through a small interface so tests can crash the write half way.
import * as nodeFs from 'node:fs';
import { dirname } from 'node:path';
import { validateConfig, formatConfigErrors } from '../shared/config.js';
import { SNAT_STATE_VERSION, type SnatAllocState } from './snat-alloc.js';

export const STATE_FORMAT = 'slbx-controller-state';
export const STATE_VERSION = 1;

export type HealthState = 'up' | 'down' | 'unknown';

/** The latest probe result of one (nic, probe), as a host agent reported it. */
export interface HealthEntry {
  state: HealthState;
  /** The host agent that reported it. */
  host: string;
  detail: string | null;
  /** When the state last changed (ISO 8601). */
  since: string;
  /** When it was last reported. */
  reportedAt: string;
}

export interface GenerationRecord {
  generation: number;
  /** ISO 8601, millisecond resolution. */
  at: string;
  /** What made it: `init`, `POST /v1/pools/web/backends`, `health h1vm1/http80 down (host1)`. */
  cause: string;
}

export interface StoredState {
  format: typeof STATE_FORMAT;
  version: typeof STATE_VERSION;
  /** Random, set when the file is first created: an agent that knew another state starts over. */
  stateId: string;
  generation: number;
  savedAt: string;
  /** The config document, normalized (every default written out); valid input for validateConfig. */
  config: Record<string, unknown>;
  /** Live health per `nic/probe`. */
  health: Record<string, HealthEntry>;
  /** The health the current generation's policy carries (a snapshot taken when it was made). */
  policyHealth: Record<string, 'up' | 'down'>;
  /** The most recent generations, oldest first. */
  history: GenerationRecord[];
  /** Outbound NAT's port chunks (controller/snat-alloc.ts, docs/outbound.md); absent while no outbound rule ever existed. */
  snat?: SnatAllocState;
}

/**
 * Where the controller keeps its state: the state file (FileStore, below; the default) or etcd
 * (controller/etcd-store.ts, shared by replicas). `save` persists `next`, the state that follows
 * `base` (the state the change was computed from), and returns once it is durable; it throws, with
 * nothing changed, when it cannot (a replicated store also when `base` is no longer the latest state
 * or this replica is no longer the leader). A synchronous store returns nothing; an asynchronous one
 * a promise (ControllerState then takes writes through its *Async methods only).
 */
export interface StateStore {
  /** For logs and messages: the file's path, or etcd://ENDPOINTS/PREFIX. */
  readonly where: string;
  save(next: StoredState, base: StoredState): void | Promise<void>;
}

/** The state file (see the top of this file). */
export class FileStore implements StateStore {
  constructor(
    readonly where: string,
    private readonly fs: StoreFs = NODE_STORE_FS,
  ) {}
  save(next: StoredState): void {
    saveState(this.where, next, this.fs);
  }
}

/** The file system calls the store makes (node:fs by default). */
export interface StoreFs {
  openSync(path: string, flags: string, mode?: number): number;
  writeSync(fd: number, data: Uint8Array): number;
  fsyncSync(fd: number): void;
  closeSync(fd: number): void;
  renameSync(from: string, to: string): void;
  unlinkSync(path: string): void;
  readFileSync(path: string, encoding: 'utf8'): string;
  existsSync(path: string): boolean;
}

export const NODE_STORE_FS: StoreFs = {
  openSync: (p, f, m) => nodeFs.openSync(p, f, m),
  writeSync: (fd, d) => nodeFs.writeSync(fd, d),
  fsyncSync: (fd) => nodeFs.fsyncSync(fd),
  closeSync: (fd) => nodeFs.closeSync(fd),
  renameSync: (a, b) => nodeFs.renameSync(a, b),
  unlinkSync: (p) => nodeFs.unlinkSync(p),
  readFileSync: (p, e) => nodeFs.readFileSync(p, e),
  existsSync: (p) => nodeFs.existsSync(p),
};

export type LoadResult =
  | { kind: 'loaded'; state: StoredState; removedTmp: boolean }
  | { kind: 'empty'; removedTmp: boolean } // missing or zero-length: seed it with --init
  | { kind: 'error'; error: string };

export function tmpPathOf(path: string): string {
  return `${path}.tmp`;
}

/** Reads and checks the state file. A corrupt file is an error (it is never overwritten). */
export function loadState(path: string, fs: StoreFs = NODE_STORE_FS): LoadResult {
  let removedTmp = false;
  const tmp = tmpPathOf(path);
  if (fs.existsSync(tmp)) {
    try {
      fs.unlinkSync(tmp);
      removedTmp = true;
    } catch {
      /* reported by the next write */
    }
  }
  if (!fs.existsSync(path)) return { kind: 'empty', removedTmp };
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (e) {
    return { kind: 'error', error: `cannot read ${path}: ${(e as Error).message}` };
  }
  if (text.length === 0) return { kind: 'empty', removedTmp };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return {
      kind: 'error',
      error: `${path} is not JSON (${(e as Error).message}); it is not an slbx controller state file, or it was damaged`,
    };
  }
  const problem = checkState(raw);
  if (problem !== null) return { kind: 'error', error: `${path}: ${problem}` };
  const state = raw as StoredState;
  const r = validateConfig(state.config);
  if (!r.ok) return { kind: 'error', error: `${path}: the stored config is not valid:\n${formatConfigErrors(r.errors, `${path} config`)}` };
  return { kind: 'loaded', state, removedTmp };
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function checkState(raw: unknown): string | null {
  if (!isObj(raw)) return 'not an object';
  if (raw['format'] !== STATE_FORMAT) return `format is ${JSON.stringify(raw['format'])}, expected ${JSON.stringify(STATE_FORMAT)}`;
  if (raw['version'] !== STATE_VERSION)
    return `version ${JSON.stringify(raw['version'])} is not supported (this controller reads version ${STATE_VERSION})`;
  if (typeof raw['stateId'] !== 'string' || !/^[0-9a-f]{8,64}$/.test(raw['stateId'])) return 'stateId must be a hex string';
  const g = raw['generation'];
  if (typeof g !== 'number' || !Number.isSafeInteger(g) || g < 1) return 'generation must be an integer >= 1';
  if (!isObj(raw['config'])) return 'config must be an object';
  if (!isObj(raw['health'])) return 'health must be an object';
  for (const [k, e] of Object.entries(raw['health'])) {
    if (!isObj(e) || !['up', 'down', 'unknown'].includes(e['state'] as string) || typeof e['host'] !== 'string')
      return `health[${JSON.stringify(k)}] is malformed`;
  }
  if (!isObj(raw['policyHealth'])) return 'policyHealth must be an object';
  for (const [k, v] of Object.entries(raw['policyHealth']))
    if (v !== 'up' && v !== 'down') return `policyHealth[${JSON.stringify(k)}] must be up or down`;
  if (!Array.isArray(raw['history'])) return 'history must be a list';
  if ('snat' in raw) {
    const sn = raw['snat'];
    if (!isObj(sn) || sn['version'] !== SNAT_STATE_VERSION || !Array.isArray(sn['chunks']))
      return `snat must be an object with version ${SNAT_STATE_VERSION} and a list of chunks`;
  }
  return null;
}

/**
 * Replaces the state file atomically (see the top of this file). Throws on any failure; the old file
 * is then untouched (a partial FILE.tmp may remain and is removed here or on the next load).
 */
export function saveState(path: string, state: StoredState, fs: StoreFs = NODE_STORE_FS): void {
  const tmp = tmpPathOf(path);
  const data = Buffer.from(`${JSON.stringify(state, null, 1)}\n`);
  let fd = -1;
  try {
    fd = fs.openSync(tmp, 'w', 0o600);
    let off = 0;
    while (off < data.length) off += fs.writeSync(fd, data.subarray(off));
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fd = -1;
    fs.renameSync(tmp, path);
  } catch (e) {
    if (fd >= 0) {
      try {
        fs.closeSync(fd);
      } catch {
        /* already failing */
      }
    }
    try {
      if (fs.existsSync(tmp)) fs.unlinkSync(tmp);
    } catch {
      /* removed on the next load */
    }
    throw e;
  }
  // the rename is in the directory: make it durable too
  const dfd = fs.openSync(dirname(path), 'r');
  try {
    fs.fsyncSync(dfd);
  } finally {
    fs.closeSync(dfd);
  }
}
