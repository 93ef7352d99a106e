#!/usr/bin/env node
// Reads one value out of JSON for the lab's bash: a daemon's /status or /counters, a JSON-lines log. Bash
// does not parse JSON (no regex over it); it asks this, which parses the document, walks a path and checks
// the value's type. Exit 0 with the value on stdout; 1 when the input is no JSON, the path is missing or
// the value has another type (why on stderr); 2 on a bad argument.
//
//   lab_daemon_status mux1 | node dist/scripts/lab/json-get.js --type boolean ready
//   node dist/scripts/lab/json-get.js --file logs/h1vm1-http.log --lines --where event=ready event
//   curl -s 127.0.0.1:9180/counters | node dist/scripts/lab/json-get.js --type number --default 0 rx_packets tx_packets
import { readFileSync } from 'node:fs';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';

export type JsonType = 'any' | 'number' | 'string' | 'boolean' | 'object' | 'array' | 'null';
export const JSON_TYPES: readonly JsonType[] = ['any', 'number', 'string', 'boolean', 'object', 'array', 'null'];

export type JsonGetResult = { ok: true; value: unknown } | { ok: false; error: string };

/** The type name of a parsed JSON value ('array' and 'null' apart from 'object'). */
export function jsonTypeOf(v: unknown): Exclude<JsonType, 'any'> | 'undefined' {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  const t = typeof v;
  return t === 'number' || t === 'string' || t === 'boolean' || t === 'object' ? t : 'undefined';
}

const a = (t: string): string => `${/^[aeiou]/.test(t) ? 'an' : 'a'} ${t}`;

/** The keys of a dotted path: "counters.rx_packets" -> ['counters', 'rx_packets']; "" or "." -> []. */
export function splitPath(path: string): string[] {
  return path === '' || path === '.' ? [] : path.split('.');
}

/** The value at PATH (keys of objects, indexes of arrays), of type TYPE. */
export function getJson(doc: unknown, path: string, type: JsonType = 'any'): JsonGetResult {
  let v: unknown = doc;
  const keys = splitPath(path);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const here = keys.slice(0, i).join('.') || '(the document)';
    if (Array.isArray(v)) {
      if (!/^\d+$/.test(k) || Number(k) >= v.length)
        return { ok: false, error: `${path}: ${here} is an array of ${v.length}, no index ${k}` };
      v = v[Number(k)];
    } else if (v !== null && typeof v === 'object') {
      if (!Object.prototype.hasOwnProperty.call(v, k)) return { ok: false, error: `${path}: no key ${k} in ${here}` };
      v = (v as Record<string, unknown>)[k];
    } else {
      return { ok: false, error: `${path}: ${here} is ${a(jsonTypeOf(v))}, not an object or array` };
    }
  }
  const t = jsonTypeOf(v);
  if (type !== 'any' && t !== type) return { ok: false, error: `${path || '(the document)'}: ${a(t)}, not ${a(type)}` };
  return { ok: true, value: v };
}

/** A value as bash reads it: a string as it is, other scalars as JSON text, objects and arrays as one line of JSON. */
export function formatValue(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** A --where condition: PATH=VALUE, met when the value at PATH prints as VALUE. */
export interface Where {
  readonly path: string;
  readonly value: string;
}

export function parseWhere(s: string): Where {
  const eq = s.indexOf('=');
  if (eq <= 0) throw new UsageError(`--where must be PATH=VALUE, got ${s}`);
  return { path: s.slice(0, eq), value: s.slice(eq + 1) };
}

function meets(doc: unknown, w: Where): boolean {
  const r = getJson(doc, w.path);
  return r.ok && formatValue(r.value) === w.value;
}

/**
 * The document to read: with lines, the first line of TEXT that is a JSON object meeting WHERE (lines
 * that are not JSON, such as a stack trace in a log, are passed over); else TEXT as one JSON document.
 */
export function pickDocument(text: string, lines: boolean, where: Where | undefined): JsonGetResult {
  if (!lines) {
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch (e) {
      return { ok: false, error: `not JSON: ${(e as Error).message}` };
    }
    if (where !== undefined && !meets(doc, where)) return { ok: false, error: `the document does not have ${where.path}=${where.value}` };
    return { ok: true, value: doc };
  }
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    let doc: unknown;
    try {
      doc = JSON.parse(line);
    } catch {
      continue;
    }
    if (where === undefined || meets(doc, where)) return { ok: true, value: doc };
  }
  return { ok: false, error: where === undefined ? 'no JSON line' : `no JSON line with ${where.path}=${where.value}` };
}

const OPTIONS: readonly OptionSpec[] = [
  {
    name: 'file',
    value: 'FILE',
    help: 'read FILE (default: stdin); several: the values of each in turn. With --default, a FILE that cannot be read or holds no JSON (yet) gives the default',
    repeat: true,
  },
  { name: 'lines', help: 'the input is JSON lines (a log): read the first line that is a JSON object (meeting --where)' },
  {
    name: 'where',
    value: 'PATH=VALUE',
    help: 'with --lines, the first line whose PATH prints as VALUE; without, the document must have it',
  },
  { name: 'type', value: 'TYPE', help: `each value must be of TYPE: ${JSON_TYPES.join(', ')}`, default: 'any' },
  {
    name: 'default',
    value: 'VALUE',
    help: 'printed for a PATH that is missing (the input must still be JSON; a wrong type is still an error)',
  },
  { name: 'help', help: 'this help' },
];

export const COMMAND: CommandSpec = {
  program: 'json-get',
  usage: 'node dist/scripts/lab/json-get.js [--file FILE] [--lines] [--where PATH=VALUE] [--type TYPE] [--default VALUE] PATH...',
  options: OPTIONS,
  about:
    'Prints the value at each PATH (keys and array indexes joined by dots: ready, counters.rx_packets, pools.0.name; "." the whole), ' +
    'one per line: a string as it is, a number, boolean or null as JSON, an object or array as one line of JSON. ' +
    'Exit status 1 (why on stderr) when the input is not JSON, a PATH is missing (without --default) or a value is not of --type.',
  extraHelp:
    'examples:\n' +
    '  lab_daemon_status mux1 | node dist/scripts/lab/json-get.js --type boolean ready\n' +
    '  node dist/scripts/lab/json-get.js --file runs/lab/default/logs/h1vm1-http.log --lines --where event=ready event\n' +
    '  In the lab library: lab_json_get ARGS... (the same program).',
};

const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

/** What to read out of one input: the paths, their type, --lines, --where, --default. */
export interface JsonGetQuery {
  readonly paths: readonly string[];
  readonly type: JsonType;
  readonly lines: boolean;
  readonly where?: Where;
  /** Printed for a missing path; for a --file also when it is no JSON or (with lines) no line matches. */
  readonly default?: string;
  /** The input is a --file (a file being written, e.g. a log or a status just fetched, may not hold JSON yet). */
  readonly fromFile?: boolean;
}

/** The values of the query's paths in TEXT, one line each, as printed; { ok: false } with why. */
export function queryJson(text: string, q: JsonGetQuery): { ok: true; lines: string[] } | { ok: false; error: string } {
  const doc = pickDocument(text, q.lines, q.where);
  if (!doc.ok) {
    if (q.default !== undefined && (q.fromFile === true || (q.lines && doc.error.startsWith('no JSON line')))) {
      return { ok: true, lines: q.paths.map(() => q.default!) };
    }
    return doc;
  }
  const lines: string[] = [];
  for (const path of q.paths) {
    const r = getJson(doc.value, path, q.type);
    if (r.ok) lines.push(formatValue(r.value));
    else if (q.default !== undefined && !getJson(doc.value, path).ok) lines.push(q.default);
    else return r;
  }
  return { ok: true, lines };
}

function runParsed(args: ParsedArgs): number {
  const type = one(args, 'type') ?? 'any';
  if (!(JSON_TYPES as readonly string[]).includes(type))
    throw new UsageError(`--type must be one of ${JSON_TYPES.join(', ')}, got ${type}`);
  if (args.positional.length === 0) throw new UsageError('give at least one PATH ("." for the whole document)');
  const whereText = one(args, 'where');
  const q: JsonGetQuery = {
    paths: args.positional,
    type: type as JsonType,
    lines: args.flags.has('lines'),
    where: whereText === undefined ? undefined : parseWhere(whereText),
    default: one(args, 'default'),
  };
  const files = args.values.get('file') ?? [];
  const out: string[] = [];
  for (const file of files.length > 0 ? files : [undefined]) {
    let text: string;
    try {
      text = readFileSync(file ?? 0, 'utf8');
    } catch (e) {
      if (q.default === undefined || file === undefined) {
        process.stderr.write(`json-get: cannot read ${file ?? 'stdin'}: ${(e as Error).message}\n`);
        return 1;
      }
      text = ''; // not there yet: its values are the default
    }
    const r = queryJson(text, { ...q, fromFile: file !== undefined });
    if (!r.ok) {
      process.stderr.write(`json-get: ${file ?? 'stdin'}: ${r.error}\n`);
      return 1;
    }
    out.push(...r.lines);
  }
  process.stdout.write(`${out.join('\n')}\n`);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
