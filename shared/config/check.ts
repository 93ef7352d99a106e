// The checker: collects every problem with its field path; the readers of one field each (integer,
// boolean, enum, name, reference, section) report what is wrong and what is allowed.
import { CONFIG_NAME_RE } from './defaults.js';
import { didYouMean } from './did-you-mean.js';
import type { ConfigError } from './types.js';

export type Seg = string | number;
export type Path = readonly Seg[];
export type Obj = Record<string, unknown>;

export interface Issue {
  readonly path: Path;
  readonly value: unknown;
  readonly message: string;
  /** The error is about the key itself (unknown field): point at the key, not its value. */
  readonly onKey: boolean;
}

export class Checker {
  readonly issues: Issue[] = [];
  add(path: Path, value: unknown, message: string, onKey = false): void {
    this.issues.push({ path: [...path], value, message, onKey });
  }
}

export function toConfigError(i: Issue): ConfigError {
  return { path: formatPath(i.path), value: i.value, message: i.message };
}

/** `pools[0].backends[2].weight`; keys that are not identifiers are quoted: `fabric["a b"]`. */
export function formatPath(path: Path): string {
  let s = '';
  for (const seg of path) {
    if (typeof seg === 'number') s += `[${seg}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(seg)) s += s === '' ? seg : `.${seg}`;
    else s += `[${JSON.stringify(seg)}]`;
  }
  return s;
}

export function isObj(v: unknown): v is Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** A real array (Array.isArray alone also accepts an array whose prototype was replaced). */
export function isList(v: unknown): v is unknown[] {
  return Array.isArray(v) && Object.getPrototypeOf(v) === Array.prototype;
}

/** A plain copy of a list's items: hostile arrays (own `constructor`, odd prototypes) stay outside. */
export function listItems(v: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  for (let i = 0; i < v.length; i++) out.push(v[i]);
  return out;
}

export function has(o: Obj, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

export function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

/** Short, one-line rendering of any value for messages. */
export function formatValue(v: unknown): string {
  const max = 80;
  let s: string;
  try {
    if (typeof v === 'string') s = JSON.stringify(v);
    else if (typeof v === 'number' || typeof v === 'boolean' || v === null) s = String(v);
    else if (typeof v === 'bigint') s = `${v}n`;
    else if (v === undefined) s = 'nothing';
    else if (typeof v === 'function') s = 'a function';
    else if (typeof v === 'symbol') s = v.toString();
    else if (ArrayBuffer.isView(v)) s = `binary data (${v.byteLength} bytes)`;
    else s = JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? String(v);
  } catch {
    s = Array.isArray(v) ? `a list of ${v.length}` : 'an object';
  }
  return s.length > max ? `${s.slice(0, max - 3)}...` : s;
}

export function listNames(names: readonly string[], max = 10): string {
  if (names.length <= max) return names.join(', ');
  return `${names.slice(0, max).join(', ')} and ${names.length - max} more`;
}

export function checkKeys(c: Checker, o: Obj, path: Path, allowed: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (allowed.includes(k)) continue;
    const dym = didYouMean(k, allowed);
    const hint = dym !== null ? ` (did you mean '${dym}'?)` : '';
    c.add([...path, k], o[k], `unknown field '${k}'${hint}; allowed: ${allowed.join(', ')}`, true);
  }
}

export function quoteHint(v: unknown): string {
  if (v === null) return '; YAML read an empty value or null';
  if (typeof v === 'number' || typeof v === 'boolean') return '; YAML read this as a number or boolean: put it in quotes';
  return '';
}

export function intField(
  c: Checker,
  o: Obj,
  path: Path,
  key: string,
  range: readonly [number, number],
  def: number | undefined,
  hint = '',
): number | undefined {
  const at = [...path, key];
  const [min, max] = range;
  if (!has(o, key)) {
    if (def !== undefined) return def;
    c.add(at, undefined, `required: an integer ${min}..${max}${hint}`);
    return undefined;
  }
  const v = o[key];
  if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v;
  let extra = hint;
  if (typeof v === 'string' && /^\s*(0x[0-9a-f]+|[-+]?\d+)\s*$/i.test(v)) extra += '; this is a string: write the number without quotes';
  c.add(at, v, `must be an integer ${min}..${max}${extra}`);
  return undefined;
}

export function boolField(c: Checker, o: Obj, path: Path, key: string, def: boolean): boolean | undefined {
  if (!has(o, key)) return def;
  const v = o[key];
  if (typeof v === 'boolean') return v;
  const hint =
    typeof v === 'string' && /^(yes|no|on|off|y|n|true|false)$/i.test(v)
      ? ' (YAML 1.2 reads yes/no/on/off as strings; write true or false without quotes)'
      : '';
  c.add([...path, key], v, `must be true or false${hint}`);
  return undefined;
}

export function enumField<T extends string>(
  c: Checker,
  o: Obj,
  path: Path,
  key: string,
  allowed: readonly T[],
  def: T | undefined,
): T | undefined {
  const at = [...path, key];
  if (!has(o, key)) {
    if (def !== undefined) return def;
    c.add(at, undefined, `required: one of ${allowed.join(', ')}`);
    return undefined;
  }
  const v = o[key];
  if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) return v as T;
  const dym = typeof v === 'string' ? didYouMean(v, allowed) : null;
  c.add(at, v, `must be one of ${allowed.join(', ')}${dym !== null ? ` (did you mean '${dym}'?)` : ''}`);
  return undefined;
}

/** Validates a name; returns it when valid. Absent names are reported as required. */
export function nameField(c: Checker, o: Obj, path: Path, key = 'name'): string | undefined {
  const at = [...path, key];
  if (!has(o, key)) {
    c.add(at, undefined, 'required: a name, 1..32 characters of a-z, 0-9 and -, starting with a letter or digit');
    return undefined;
  }
  const v = o[key];
  if (typeof v === 'string' && CONFIG_NAME_RE.test(v)) return v;
  const why = typeof v !== 'string' ? `must be a string${quoteHint(v)}; a name is` : 'must be a name:';
  c.add(at, v, `${why} 1..32 characters of a-z, 0-9 and -, starting with a letter or digit`);
  return undefined;
}

/** An optional mapping section; null means absent. */
export function sectionObj(c: Checker, root: Obj, key: string, allowed: readonly string[]): Obj {
  if (!has(root, key) || root[key] === null) return {};
  const v = root[key];
  if (isObj(v)) {
    checkKeys(c, v, [key], allowed);
    return v;
  }
  c.add([key], v, `must be a mapping with the fields ${allowed.join(', ')}`);
  return {};
}

/** A list section; `broken` when it is missing, empty or not a list (references into it are then not reported). */
export function sectionList(c: Checker, root: Obj, key: string, what: string, one: string, required: boolean): Section {
  if (!has(root, key) || (!required && root[key] === null)) {
    if (required) c.add([key], undefined, `required: a list of ${what}, at least one`);
    return { items: [], broken: required };
  }
  const v = root[key];
  if (!isList(v)) {
    c.add([key], v, `must be a list of ${what}${required ? ', at least one' : ''}`);
    return { items: [], broken: true };
  }
  if (required && v.length === 0) c.add([key], v, `must list at least one ${one}`);
  return { items: listItems(v), broken: v.length === 0 && required };
}

export interface Section {
  readonly items: readonly unknown[];
  readonly broken: boolean;
}

/** The names declared in a section: first declaration index of each. */
export interface NameTable {
  readonly names: Map<string, number>;
  readonly broken: boolean;
}

export function itemObj(c: Checker, v: unknown, path: Path, allowed: readonly string[]): Obj | undefined {
  if (isObj(v)) {
    checkKeys(c, v, path, allowed);
    return v;
  }
  c.add(path, v, `must be a mapping with the fields ${allowed.join(', ')}`);
  return undefined;
}

/** First declaration index of each name (valid or not: an invalid name is reported once, where it is declared). */
export function declareNames(c: Checker, section: string, kind: string, sec: Section): NameTable {
  const first = new Map<string, number>();
  sec.items.forEach((it, i) => {
    if (!isObj(it) || !has(it, 'name') || typeof it['name'] !== 'string') return;
    const name = it['name'];
    const prev = first.get(name);
    if (prev !== undefined) {
      c.add([section, i, 'name'], name, `duplicate ${kind} name '${name}', also ${section}[${prev}]; every ${kind} needs its own name`);
    } else {
      first.set(name, i);
    }
  });
  return { names: first, broken: sec.broken };
}

/** Resolves a reference to a declared name; returns the declaration index. */
export function refField(c: Checker, o: Obj, path: Path, key: string, kind: string, plural: string, table: NameTable): number | undefined {
  const at = [...path, key];
  const names = table.names;
  if (!has(o, key)) {
    c.add(at, undefined, `required: the name of a ${kind}${names.size > 0 ? ` (defined ${plural}: ${listNames([...names.keys()])})` : ''}`);
    return undefined;
  }
  const v = o[key];
  if (typeof v !== 'string') {
    c.add(at, v, `must be the name of a ${kind}, as a string${quoteHint(v)}`);
    return undefined;
  }
  const i = names.get(v);
  if (i !== undefined) return i;
  if (table.broken) return undefined; // the section itself is reported
  if (names.size === 0) {
    c.add(at, v, `unknown ${kind} '${v}': no ${plural} are defined`);
    return undefined;
  }
  const dym = didYouMean(v, [...names.keys()]);
  c.add(
    at,
    v,
    `unknown ${kind} '${v}'${dym !== null ? ` (did you mean '${dym}'?)` : ''}; defined ${plural}: ${listNames([...names.keys()])}`,
  );
  return undefined;
}

/** An address or name taken by one field: who holds it, for the message about the second. */
export interface Claim {
  readonly what: string;
  readonly path: string;
}
