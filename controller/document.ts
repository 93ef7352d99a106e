// The northbound API's object model over the config document: collections (networks, muxes, hosts,
// nics, probes, pools, vips) and the nested backends of a pool and rules of a VIP, each addressed by its
// key (name; a VIP by its address), with create / replace / merge-patch / delete applied to a copy of
// the plain config document. Pure: no I/O. The caller validates the edited document as a whole
// (validateConfig) and keeps it only when it is valid. Reference: docs/controller.md.
import { parseIpAddr } from '../shared/addr.js';
import { formatPath, plainConfig, type ConfigError, type SlbxConfig } from '../shared/config.js';

export type Doc = Record<string, unknown>;
export type Path = (string | number)[];

export const COLLECTIONS = ['networks', 'muxes', 'hosts', 'nics', 'probes', 'pools', 'vips'] as const;
export type CollectionName = (typeof COLLECTIONS)[number];
export type SubCollectionName = 'backends' | 'rules';

/** The singular used in messages: `no pool web`. */
export const SINGULAR: Readonly<Record<CollectionName | SubCollectionName, string>> = {
  networks: 'network',
  muxes: 'mux',
  hosts: 'host',
  nics: 'nic',
  probes: 'probe',
  pools: 'pool',
  vips: 'vip',
  backends: 'backend',
  rules: 'rule',
};

/** The field that keys each collection. */
export const KEY_FIELD: Readonly<Record<CollectionName | SubCollectionName, string>> = {
  networks: 'name',
  muxes: 'name',
  hosts: 'name',
  nics: 'name',
  probes: 'name',
  pools: 'name',
  vips: 'address',
  backends: 'nic',
  rules: 'name',
};

export function isCollection(s: string): s is CollectionName {
  return (COLLECTIONS as readonly string[]).includes(s);
}

/** An error the API answers with its own status (404, 409, 400 for a malformed request). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errors?: ApiFieldError[],
  ) {
    super(message);
  }
}

/** A validation error as the API reports it. */
export interface ApiFieldError {
  /** The field, relative to the object the request addresses (`weight`, `rules[0].pool`); the full
   *  config path when the problem lies outside that object. */
  path: string;
  /** Always the full path in the config document (`pools[0].backends[4].weight`). */
  configPath: string;
  value?: unknown;
  message: string;
}

/** The normalized config as a plain JSON document: every default written out, addresses canonical. */
export function toPlainConfig(config: SlbxConfig): Doc {
  return JSON.parse(JSON.stringify(plainConfig(config))) as Doc;
}

export function isPlainObject(v: unknown): v is Doc {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const p: unknown = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

/** RFC 7396 JSON merge patch: objects merge key by key, null removes a key, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const out: Doc = isPlainObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

export function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Canonical text of a VIP given in a URL or body, or null when it is not an address. */
export function canonicalVip(text: string): string | null {
  const a = parseIpAddr(text);
  return a === null ? null : a.text;
}

function listOf(doc: Doc, key: string): Doc[] {
  const v = doc[key];
  if (v === undefined || v === null) {
    const list: Doc[] = [];
    doc[key] = list;
    return list;
  }
  if (!Array.isArray(v)) throw new ApiError(500, `the stored document's ${key} is not a list`);
  return v as Doc[];
}

function keyOf(item: Doc, coll: CollectionName | SubCollectionName): string | null {
  const k = item[KEY_FIELD[coll]];
  if (typeof k !== 'string') return null;
  return coll === 'vips' ? (canonicalVip(k) ?? k) : k;
}

/** Where a request points: a collection, one item, a nested collection, one nested item. */
export interface Target {
  coll: CollectionName;
  key?: string;
  sub?: SubCollectionName;
  subKey?: string;
}

interface Located {
  list: Doc[];
  /** Path of the list in the document. */
  listPath: Path;
  coll: CollectionName | SubCollectionName;
  /** The list's owner, for messages (`pool web`), or null for a top-level collection. */
  owner: string | null;
}

function normKey(coll: CollectionName | SubCollectionName, key: string): string {
  if (coll !== 'vips') return key;
  const c = canonicalVip(key);
  if (c === null) throw new ApiError(404, `no vip ${key} (not an IP address)`);
  return c;
}

/** The list a target's items live in (the parent item must exist: 404 otherwise). */
function locateList(doc: Doc, t: Target): Located {
  const top = listOf(doc, t.coll);
  if (t.sub === undefined) return { list: top, listPath: [t.coll], coll: t.coll, owner: null };
  const key = normKey(t.coll, t.key!);
  const i = top.findIndex((x) => keyOf(x, t.coll) === key);
  if (i < 0) throw new ApiError(404, `no ${SINGULAR[t.coll]} ${key}`);
  return { list: listOf(top[i]!, t.sub), listPath: [t.coll, i, t.sub], coll: t.sub, owner: `${SINGULAR[t.coll]} ${key}` };
}

function itemKeyOf(t: Target): string | undefined {
  return t.sub === undefined ? t.key : t.subKey;
}

function find(loc: Located, key: string): number {
  const k = normKey(loc.coll, key);
  return loc.list.findIndex((x) => keyOf(x, loc.coll) === k);
}

function notFound(loc: Located, key: string): ApiError {
  const what = `${SINGULAR[loc.coll]} ${loc.coll === 'vips' ? (canonicalVip(key) ?? key) : key}`;
  return new ApiError(404, `no ${what}${loc.owner !== null ? ` in ${loc.owner}` : ''}`);
}

/** GET of a collection or an item. Throws ApiError(404). */
export function readTarget(doc: Doc, t: Target): unknown {
  const loc = locateList(doc, t);
  const key = itemKeyOf(t);
  if (key === undefined) return loc.list;
  const i = find(loc, key);
  if (i < 0) throw notFound(loc, key);
  return loc.list[i];
}

/** What a write did to the document: where its object is, to report errors and answer with it. */
export interface Change {
  status: 200 | 201;
  /** Path of the object written (or removed) in the document. */
  path: Path;
  /** The object removed (DELETE), from the document before the change. */
  removed?: unknown;
}

export type WriteMethod = 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** The body's key must match the URL's (renaming is not supported); absent, it is taken from the URL. */
function checkKey(loc: Located, body: Doc, key: string, method: 'PUT' | 'PATCH'): void {
  const field = KEY_FIELD[loc.coll];
  if (!(field in body)) {
    if (method === 'PUT') body[field] = key;
    return;
  }
  const given = body[field];
  const same = typeof given === 'string' && (loc.coll === 'vips' ? canonicalVip(given) === canonicalVip(key) : given === key);
  if (!same) {
    throw new ApiError(400, `${field} in the body differs from the URL`, [
      {
        path: field,
        configPath: field,
        value: given,
        message: `must be ${JSON.stringify(key)} (the ${SINGULAR[loc.coll]} this URL names) or left out; renaming is not supported: create the new ${SINGULAR[loc.coll]}, move references, delete the old one`,
      },
    ]);
  }
}

function requireObject(body: unknown, what: string): Doc {
  if (!isPlainObject(body)) {
    throw new ApiError(400, `the body must be a JSON object (a ${what})`, [
      { path: '', configPath: '', value: body, message: `must be a JSON object (a ${what})` },
    ]);
  }
  return structuredClone(body);
}

/** References that keep an object from being deleted (checked before validation, for a clear 409). */
function referencesTo(doc: Doc, coll: CollectionName, key: string): string[] {
  const refs: string[] = [];
  const list = (k: string) => (Array.isArray(doc[k]) ? (doc[k] as Doc[]) : []);
  if (coll === 'networks')
    list('nics').forEach((n) => {
      if (n['network'] === key) refs.push(`nic ${String(n['name'])}`);
    });
  if (coll === 'hosts')
    list('nics').forEach((n) => {
      if (n['host'] === key) refs.push(`nic ${String(n['name'])}`);
    });
  if (coll === 'nics') {
    list('pools').forEach((p) => {
      const bs = Array.isArray(p['backends']) ? (p['backends'] as Doc[]) : [];
      if (bs.some((b) => b['nic'] === key)) refs.push(`pool ${String(p['name'])}`);
    });
  }
  if (coll === 'pools' || coll === 'probes') {
    const field = coll === 'pools' ? 'pool' : 'probe';
    list('vips').forEach((v) => {
      const rs = Array.isArray(v['rules']) ? (v['rules'] as Doc[]) : [];
      rs.forEach((r) => {
        if (r[field] === key) refs.push(`rule ${String(r['name'])} of vip ${String(v['address'])}`);
      });
    });
  }
  return refs;
}

/**
 * Applies one write to `doc` (a copy the caller owns). Throws ApiError for 404 (no such object or
 * parent), 409 (duplicate, or still referenced) and 400 (malformed body, key mismatch).
 */
export function applyWrite(doc: Doc, method: WriteMethod, t: Target, body: unknown): Change {
  const loc = locateList(doc, t);
  const key = itemKeyOf(t);
  const what = SINGULAR[loc.coll];
  if (method === 'POST') {
    if (key !== undefined) throw new ApiError(405, `POST creates in a collection; use PUT or PATCH to change ${what} ${key}`);
    const item = requireObject(body, what);
    const k = newItemKey(loc.coll, item);
    if (k !== null && loc.list.some((x) => keyOf(x, loc.coll) === k)) {
      throw new ApiError(409, `${what} ${k} already exists${loc.owner !== null ? ` in ${loc.owner}` : ''}`);
    }
    loc.list.push(item);
    return { status: 201, path: [...loc.listPath, loc.list.length - 1] };
  }
  if (key === undefined) throw new ApiError(405, `${method} needs one ${what}: ${method} .../${loc.coll}/{${KEY_FIELD[loc.coll]}}`);
  const i = find(loc, key);
  if (i < 0) throw notFound(loc, key);
  const path: Path = [...loc.listPath, i];
  const canonical = keyOf(loc.list[i]!, loc.coll)!;
  if (method === 'DELETE') {
    if (t.sub === undefined) {
      const refs = referencesTo(doc, t.coll, canonical);
      if (refs.length > 0) {
        throw new ApiError(
          409,
          `${what} ${canonical} is still used by ${refs.slice(0, 10).join(', ')}${refs.length > 10 ? ` and ${refs.length - 10} more` : ''}; change or delete those first`,
        );
      }
    }
    const [removed] = loc.list.splice(i, 1);
    return { status: 200, path, removed };
  }
  const item = requireObject(body, what);
  checkKey(loc, item, canonical, method);
  loc.list[i] = method === 'PUT' ? item : (mergePatch(loc.list[i], item) as Doc);
  if (method === 'PATCH' && !(KEY_FIELD[loc.coll] in loc.list[i]!)) loc.list[i]![KEY_FIELD[loc.coll]] = canonical;
  return { status: 200, path };
}

/** The key a new object will have (a rule's default name is protocol-frontendPort). */
function newItemKey(coll: CollectionName | SubCollectionName, item: Doc): string | null {
  const k = item[KEY_FIELD[coll]];
  if (typeof k === 'string') return coll === 'vips' ? (canonicalVip(k) ?? k) : k;
  if (coll === 'rules' && k === undefined && typeof item['protocol'] === 'string' && Number.isInteger(item['frontendPort'])) {
    return `${item['protocol']}-${String(item['frontendPort'])}`;
  }
  return null;
}

/** The value at a path of the document, or undefined. */
export function getPath(doc: unknown, path: Path): unknown {
  let v: unknown = doc;
  for (const seg of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string | number, unknown>)[seg];
  }
  return v;
}

/** Validation errors of the whole document, with paths made relative to the object the request wrote. */
export function toApiErrors(errors: readonly ConfigError[], objectPath: Path | null): ApiFieldError[] {
  const prefix = objectPath === null ? null : formatPath(objectPath);
  return errors.map((e) => {
    let path = e.path;
    if (prefix !== null && prefix !== '') {
      if (e.path === prefix) path = '';
      else if (e.path.startsWith(`${prefix}.`)) path = e.path.slice(prefix.length + 1);
      else if (e.path.startsWith(`${prefix}[`)) path = e.path.slice(prefix.length);
    }
    const out: ApiFieldError = { path, configPath: e.path, message: e.message };
    if (e.value !== undefined) out.value = e.value;
    return out;
  });
}
