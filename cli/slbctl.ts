#!/usr/bin/env node
// slbctl: the slbx controller's command line, over its API (docs/controller.md), in the style of ip and
// ipvsadm: `slbctl OBJECT VERB [ARGS] [--options]`. Human output is aligned tables; --json prints the
// API's answer for scripts. Exit status: 0 done, 1 the controller refused or could not be reached (the
// reason is printed), 2 usage error.
import { readFileSync } from 'node:fs';
import { formatHelp, parseArgs, UsageError, type OptionSpec, type ParsedArgs } from '../shared/args.js';
import { isMain } from '../runtime/command.js';
import { configSummary, formatConfigErrors, parseConfig, serializeConfig, validateConfig } from '../shared/config.js';
import { toPlainConfig } from '../controller/document.js';
import { joinUrl, parseControllerUrls, requestJson, type HttpJsonError, type JsonResponse } from '../runtime/http-json.js';
import { bearer, readToken } from '../runtime/api-token.js';
import type { Agent } from 'node:http';
import { runTop, terminalQuit } from './top.js';

export const DEFAULT_CONTROLLER = 'http://127.0.0.1:8480';

export interface SlbctlIo {
  out(text: string): void;
  err(text: string): void;
  env: Readonly<Record<string, string | undefined>>;
  /** A keep-alive agent for the API requests (a program that runs many commands); absent: a connection each. */
  agent?: Agent;
}

const PROCESS_IO: SlbctlIo = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  env: process.env,
};

const GLOBAL_OPTIONS: OptionSpec[] = [
  {
    name: 'controller',
    value: 'URL',
    help: `the controller (default $SLBX_CONTROLLER, else ${DEFAULT_CONTROLLER}); replicas: URL,URL,... (the next one on an error)`,
  },
  {
    name: 'token-file',
    value: 'FILE',
    help: "the controller's API token (default $SLBX_TOKEN_FILE), needed for changes and for what the agents report (counters, flows); reading the desired state needs none",
  },
  { name: 'json', help: "print the API's JSON answer instead of a table" },
  { name: 'timeout', value: 'S', help: 'seconds to wait for each answer (default 10)' },
  { name: 'help', help: 'show help' },
];

const WAIT_OPTION: OptionSpec = {
  name: 'wait',
  help: 'after the change, wait until every mux and host agent applied it and print how long that took',
};

const RULE_OPTIONS: OptionSpec[] = [
  { name: 'protocol', value: 'P', help: 'tcp, udp or all' },
  { name: 'frontend-port', value: 'N', help: 'the port clients connect to, 1..65535' },
  { name: 'backend-port', value: 'N', help: 'the port on the backends (default: the frontend port)' },
  { name: 'pool', value: 'POOL', help: 'the backend pool' },
  { name: 'distribution', value: 'D', help: '5-tuple (default), 3-tuple or 2-tuple' },
  { name: 'probe', value: 'PROBE', help: "the health probe of the rule's backends (none: no probe)" },
  {
    name: 'all-down',
    value: 'drop|spread',
    help: 'new flows when every backend looks down: drop (default; the VIP is withdrawn) or spread (fail-open, over every enabled backend)',
  },
  { name: 'name', value: 'NAME', help: "the rule's name (default protocol-frontendport, e.g. tcp-80)" },
];

interface Ctx {
  /** The API token, or null (then changes are refused by a controller that has one). */
  token: string | null;
  /** Where the token was read from (--token-file or $SLBX_TOKEN_FILE), for messages. */
  tokenSource: string | null;
  io: SlbctlIo;
  /** The controller replica asked first (the last that answered). */
  base: URL;
  /** Every replica (--controller URL,URL,...), `base` among them. */
  bases: URL[];
  json: boolean;
  timeoutMs: number;
  args: ParsedArgs;
}

interface Command {
  words: string[];
  args: string[];
  about: string;
  options?: OptionSpec[];
  run(c: Ctx, pos: string[]): Promise<number>;
}

class CliError extends Error {
  constructor(
    message: string,
    readonly code: 1 | 2,
    readonly body?: unknown,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** What to say when the controller answers 401: that the API token is needed, and how to give it. */
export function unauthorizedMessage(method: string, path: string, tokenSource: string | null): string {
  const what = `${method} ${path.split('?')[0]}`;
  if (tokenSource !== null) {
    return (
      `401: the controller refused the API token from ${tokenSource} for ${what}: it is not this controller's token ` +
      '(the file its --token-file names; in a lab: runs/lab/NAME/api-token)'
    );
  }
  return (
    `401: ${what} needs the API token, and none was given: use --token-file FILE or set SLBX_TOKEN_FILE=FILE ` +
    "(the file the controller's --token-file names; in a lab: runs/lab/NAME/api-token, which scripts/lab.sh exec passes by itself)"
  );
}

// ---------------------------------------------------------------------------------------------
// output

/** Aligned columns, two spaces apart; the last column is not padded. */
/** A host agent's outbound NAT as its heartbeat reports it (host-agent/snat-control.ts status). */
interface SnatHostView {
  host: string;
  at: string | null;
  snat: {
    flows: number;
    nics: { nic: string; ports4: number; ports6: number; inUse4: number; inUse6: number; exhausted4: number; exhausted6: number }[];
  } | null;
}

interface SnatAnswer {
  generation: number;
  nics: { nic: string; host: string; rule: string; ports4: number; ports6: number; portsPerNic: number }[];
  ranges: { ip: string; first: number; last: number; host: string; nic: string }[];
}

export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return `${all
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}

function kv(pairs: readonly [string, string][]): string {
  const w = Math.max(...pairs.map(([k]) => k.length));
  return `${pairs.map(([k, v]) => `${`${k}:`.padEnd(w + 1)} ${v}`).join('\n')}\n`;
}

const str = (v: unknown): string =>
  v === undefined || v === null ? '-' : typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);

function ago(iso: unknown): string {
  if (typeof iso !== 'string') return '-';
  const s = (Date.now() - Date.parse(iso)) / 1000;
  if (!Number.isFinite(s)) return '-';
  if (s < 1) return 'now';
  if (s < 120) return `${Math.round(s)}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  return `${Math.round(s / 3600)}h ago`;
}

function printJson(c: Ctx, body: unknown): void {
  c.io.out(`${JSON.stringify(body, null, 2)}\n`);
}

// ---------------------------------------------------------------------------------------------
// the API

/** Network errors after which a request was surely not sent (any request may go to another replica). */
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

/**
 * One request, to the replicas in turn (docs/controller.md, Replicas): a replica that cannot be
 * reached, or answers 503 "nothing was changed" (no leader yet, the leader unreachable), passes the
 * request to the next, round after round until the timeout. A read goes on after any network error; a
 * change only where it was surely not made (the connection was refused), so it is never made twice.
 */
async function api(c: Ctx, method: string, path: string, body?: unknown, timeoutMs = c.timeoutMs): Promise<JsonResponse> {
  const deadline = Date.now() + timeoutMs;
  const read = method === 'GET' || method === 'HEAD';
  const headers = c.token === null ? {} : bearer(c.token);
  let r: JsonResponse | null = null;
  let lastError = '';
  /** The last answer a replica gave (a 503), reported if the time runs out. */
  let answered: JsonResponse | null = null;
  for (let i = 0; ; i++) {
    // no new attempt in the last second when a replica already answered: its reason says more than a timeout
    if (i > 0 && answered !== null && deadline - Date.now() < 1000) {
      r = answered;
      break;
    }
    if (i > 0 && i % c.bases.length === 0) {
      if (Date.now() + 200 >= deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 200)); // a round without an answer: an election, probably
    }
    const base = c.bases[(c.bases.indexOf(c.base) + (i === 0 ? 0 : 1)) % c.bases.length]!;
    c.base = base;
    const left = Math.max(1, deadline - Date.now());
    try {
      r = await requestJson(
        joinUrl(base, path),
        body === undefined
          ? { method, timeoutMs: left, headers, agent: c.io.agent ?? false }
          : { method, body, timeoutMs: left, headers, agent: c.io.agent ?? false },
      );
    } catch (e) {
      lastError = `cannot reach the controller at ${base.href}: ${(e as Error).message}`;
      r = null;
      if (c.bases.length > 1 && (read || NOT_SENT.has((e as HttpJsonError).code)) && Date.now() < deadline) continue;
      throw new CliError(lastError, 1);
    }
    answered = r;
    const unchanged = r.status === 503 && /nothing was changed/.test(String((r.body as { error?: unknown } | null)?.error ?? ''));
    if (c.bases.length > 1 && (unchanged || (read && r.status === 503)) && Date.now() < deadline) continue;
    break;
  }
  if (r === null) throw new CliError(lastError, 1);
  if (r.status >= 200 && r.status < 300) return r;
  if (r.status === 401) throw new CliError(unauthorizedMessage(method, path, c.tokenSource), 1, r.body, 401);
  const b = r.body as { error?: unknown; errors?: { path?: string; configPath?: string; message?: string; value?: unknown }[] } | null;
  let msg = `${r.status}: ${typeof b?.error === 'string' ? b.error : r.text.trim() || 'no reason given'}`;
  for (const e of b?.errors ?? []) {
    const got = e.value === undefined ? '' : ` (got ${JSON.stringify(e.value)})`;
    const where = e.path === '' ? '(the object)' : (e.path ?? '?');
    msg += `\n  ${where}: ${e.message ?? ''}${got}`;
  }
  throw new CliError(msg, 1, r.body, r.status);
}

const enc = encodeURIComponent;

async function getJson<T = unknown>(c: Ctx, path: string): Promise<T> {
  return (await api(c, 'GET', path)).body as T;
}

interface WriteAnswer {
  generation: number;
  changed: boolean;
  item: unknown;
}

/** A write; prints `what` (or the JSON) and, with --wait, how long the agents took to apply it. */
async function write(c: Ctx, method: string, path: string, body: unknown, what: string): Promise<number> {
  const r = await api(c, method, path, body);
  const a = r.body as WriteAnswer;
  const wait = c.args.flags.has('wait');
  if (c.json && !wait) {
    printJson(c, a);
    return 0;
  }
  if (!c.json) c.io.out(a.changed ? `generation ${a.generation}: ${what}\n` : `unchanged (generation ${a.generation}): nothing to do\n`);
  if (!wait) return 0;
  const rep = await waitGeneration(c, a.generation, 'all', c.timeoutMs / 1000);
  if (c.json) printJson(c, { ...a, applied: rep });
  else c.io.out(describeReport(rep));
  return rep.complete ? 0 : 1;
}

interface GenReport {
  generation: number;
  current: number;
  createdAt: string | null;
  cause: string | null;
  complete: boolean;
  agents: {
    kind: string;
    name: string;
    appliedGeneration: number | null;
    applied: boolean;
    ackedAt: string | null;
    ms: number | null;
    applyMs: number | null;
  }[];
  lastAckMs: number | null;
  lastMuxAckMs: number | null;
  lastHostAckMs: number | null;
  pending: string[];
}

async function waitGeneration(c: Ctx, gen: number | 'current', kind: string, timeoutS: number): Promise<GenReport> {
  const q = `?waitS=${Math.max(0, Math.min(120, timeoutS))}&kind=${enc(kind)}`;
  return (await api(c, 'GET', `/v1/generations/${gen}${q}`, undefined, (timeoutS + 10) * 1000)).body as GenReport;
}

function describeReport(r: GenReport): string {
  const n = r.agents.length;
  const ok = r.agents.filter((a) => a.applied).length;
  const slowest = [...r.agents].filter((a) => a.ms !== null).sort((a, b) => b.ms! - a.ms!)[0];
  let s = `generation ${r.generation}${r.cause !== null ? ` (${r.cause})` : ''}: applied by ${ok}/${n} agents`;
  if (r.complete && r.lastAckMs !== null) {
    s += ` within ${r.lastAckMs} ms of the change`;
    if (r.lastMuxAckMs !== null) s += ` (last mux: ${r.lastMuxAckMs} ms`;
    if (slowest !== undefined) s += `${r.lastMuxAckMs !== null ? '; ' : ' ('}slowest: ${slowest.kind} ${slowest.name})`;
    else if (r.lastMuxAckMs !== null) s += ')';
  } else if (!r.complete) {
    s += `; still waiting for ${r.pending.join(', ')}`;
  }
  return `${s}\n`;
}

// ---------------------------------------------------------------------------------------------
// argument helpers

function opt(c: Ctx, name: string): string | undefined {
  return c.args.values.get(name)?.[0];
}

function intOpt(c: Ctx, name: string): number | undefined {
  const v = opt(c, name);
  if (v === undefined) return undefined;
  if (!/^-?\d+$/.test(v)) throw new CliError(`--${name} must be a whole number, got ${JSON.stringify(v)}`, 2);
  return Number(v);
}

function ruleBody(c: Ctx, forSet: boolean): Record<string, unknown> {
  const b: Record<string, unknown> = {};
  const name = opt(c, 'name');
  if (name !== undefined) b['name'] = name;
  const protocol = opt(c, 'protocol');
  if (protocol !== undefined) b['protocol'] = protocol;
  const fp = intOpt(c, 'frontend-port');
  if (fp !== undefined) b['frontendPort'] = fp;
  const bp = intOpt(c, 'backend-port');
  if (bp !== undefined) b['backendPort'] = bp;
  const pool = opt(c, 'pool');
  if (pool !== undefined) b['pool'] = pool;
  const d = opt(c, 'distribution');
  if (d !== undefined) b['distribution'] = d;
  const probe = opt(c, 'probe');
  if (probe !== undefined) b['probe'] = probe === 'none' ? null : probe;
  const allDown = opt(c, 'all-down');
  if (allDown !== undefined) b['allDown'] = allDown; // checked by the controller, which names the field
  if (!forSet) {
    const missing = [
      ['protocol', protocol],
      ['frontend-port', fp],
      ['pool', pool],
    ]
      .filter(([, v]) => v === undefined)
      .map(([k]) => `--${k}`);
    if (missing.length > 0) throw new CliError(`a rule needs ${missing.join(', ')}`, 2);
  } else if (Object.keys(b).length === 0) {
    throw new CliError(
      'nothing to change: give at least one of --protocol, --frontend-port, --backend-port, --pool, --distribution, --probe, --all-down',
      2,
    );
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// formatting of objects

type Obj = Record<string, unknown>;

function ruleRows(rules: readonly Obj[]): string[][] {
  return rules.map((r) => [
    str(r['name']),
    str(r['protocol']),
    str(r['frontendPort']),
    str(r['backendPort']),
    str(r['pool']),
    str(r['distribution']),
    str(r['probe'] ?? '-'),
    str(r['allDown'] ?? 'drop'),
  ]);
}
const RULE_HEADER = ['NAME', 'PROTO', 'FRONTEND', 'BACKEND', 'POOL', 'DIST', 'PROBE', 'ALL-DOWN'];

interface HealthRow {
  nic: string;
  probe: string;
  state: string;
  effective: string;
  host: string | null;
  reported: boolean;
  detail: string | null;
  since: string | null;
  reportedAt: string | null;
}

/**
 * slbctl health, after the probe states: each MUX's measured latency per backend of the pools with a
 * latency section, and whether it is inside the band (docs/latency.md), from the MUXes' heartbeats
 * (with the API token only).
 */
async function printLatency(c: Ctx): Promise<void> {
  // what the agents report needs the API token; without it the probe states alone, as before
  if (c.token === null) return;
  const rows: string[][] = [];
  try {
    const agents = await getJson<Obj[]>(c, '/v1/agents');
    for (const a of agents) {
      if (a['kind'] !== 'mux') continue;
      const name = str(a['name']);
      const s = await getJson<{ status: Obj }>(c, `/v1/agents/mux/${enc(name)}/status`).catch(() => null);
      const st = (s?.status['status'] ?? {}) as Obj;
      const meter = (st['latency'] ?? {}) as Obj;
      const samples = new Map(((meter['backends'] ?? []) as Obj[]).map((b) => [str(b['nic']), str(b['samples'])]));
      for (const p of (st['pools'] ?? []) as Obj[]) {
        const lat = p['latency'] as Obj | undefined;
        if (lat === undefined) continue;
        for (const b of (lat['backends'] ?? []) as Obj[]) {
          const ms = b['latencyMs'];
          rows.push([
            name,
            str(p['table']),
            str(b['nic']),
            typeof ms === 'number' ? ms.toFixed(1) : '-',
            samples.get(str(b['nic'])) ?? '0',
            b['inBand'] === true ? 'yes' : 'no',
          ]);
        }
      }
    }
  } catch (e) {
    c.io.out(`\nlatency per MUX: not shown (${(e as Error).message})\n`);
    return;
  }
  if (rows.length === 0) return;
  c.io.out(`\nmeasured latency per MUX (pools with a latency section):\n`);
  c.io.out(formatTable(['MUX', 'POOL', 'BACKEND', 'LATENCY-MS', 'SAMPLES', 'IN-BAND'], rows));
}

function backendRows(pool: Obj, config: Obj, health: readonly HealthRow[]): string[][] {
  const nics = new Map(((config['nics'] ?? []) as Obj[]).map((n) => [n['name'], n]));
  const probes = new Set<string>();
  for (const v of (config['vips'] ?? []) as Obj[]) {
    for (const r of (v['rules'] ?? []) as Obj[]) if (r['pool'] === pool['name'] && typeof r['probe'] === 'string') probes.add(r['probe']);
  }
  return ((pool['backends'] ?? []) as Obj[]).map((b) => {
    const nic = nics.get(b['nic']);
    const hs = health.filter((h) => h.nic === b['nic'] && probes.has(h.probe));
    const down = hs.filter((h) => h.state === 'down').map((h) => h.probe);
    const hstate =
      probes.size === 0 ? 'no probe' : down.length > 0 ? `down (${down.join(',')})` : hs.some((h) => h.state === 'up') ? 'up' : 'unknown';
    return [
      str(b['nic']),
      str(nic?.['host']),
      ((nic?.['addresses'] ?? []) as string[]).join(','),
      str(b['priority']),
      str(b['weight']),
      b['enabled'] === false ? 'no' : 'yes',
      b['drain'] === true ? 'yes' : 'no',
      hstate,
    ];
  });
}
const BACKEND_HEADER = ['NIC', 'HOST', 'ADDRESSES', 'PRIORITY', 'WEIGHT', 'ENABLED', 'DRAIN', 'HEALTH'];

async function stateConfig(c: Ctx): Promise<Obj> {
  return (await getJson<{ config: Obj }>(c, '/v1/state')).config;
}

function findPool(config: Obj, name: string): Obj {
  const p = ((config['pools'] ?? []) as Obj[]).find((x) => x['name'] === name);
  if (p === undefined) throw new CliError(`404: no pool ${name}`, 1);
  return p;
}

// ---------------------------------------------------------------------------------------------
// commands

function genericList(coll: string, header: string[], row: (o: Obj) => string[]): Command {
  return {
    words: [singularOf(coll), 'list'],
    args: [],
    about: `list the ${coll}`,
    async run(c) {
      const list = await getJson<Obj[]>(c, `/v1/${coll}`);
      if (c.json) printJson(c, list);
      else c.io.out(formatTable(header, list.map(row)));
      return 0;
    },
  };
}

function genericShow(coll: string): Command {
  const one = singularOf(coll);
  return {
    words: [one, 'show'],
    args: [coll === 'vips' ? 'VIP' : one.toUpperCase()],
    about: `show one ${one}`,
    async run(c, [key]) {
      const o = await getJson<Obj>(c, `/v1/${coll}/${enc(key!)}`);
      if (c.json) printJson(c, o);
      else
        c.io.out(
          kv(Object.entries(o).map(([k, v]) => [k, str(Array.isArray(v) && v.every((x) => typeof x !== 'object') ? v.join(', ') : v)])),
        );
      return 0;
    },
  };
}

function genericDel(coll: string): Command {
  const one = singularOf(coll);
  return {
    words: [one, 'del'],
    args: [one.toUpperCase()],
    about: `delete a ${one} (refused while something refers to it)`,
    options: [WAIT_OPTION],
    run: (c, [key]) => write(c, 'DELETE', `/v1/${coll}/${enc(key!)}`, undefined, `${one} ${key} deleted`),
  };
}

function singularOf(coll: string): string {
  return (
    { networks: 'network', muxes: 'mux', hosts: 'host', nics: 'nic', probes: 'probe', pools: 'pool', vips: 'vip' } as Record<string, string>
  )[coll]!;
}

function backendVerb(verb: string, patch: Record<string, unknown>, about: string, done: string): Command {
  return {
    words: ['backend', verb],
    args: ['POOL', 'NIC'],
    about,
    options: [WAIT_OPTION],
    run: (c, [pool, nic]) =>
      write(c, 'PATCH', `/v1/pools/${enc(pool!)}/backends/${enc(nic!)}`, patch, `backend ${nic} of pool ${pool} ${done}`),
  };
}

/** A host agent's status: the entries of its one flow table (eastWest.flows, every kind), or null. */
function hostFlowEntries(st: Obj): string | null {
  const by = ((st['eastWest'] ?? null) as { flows?: Record<string, number> } | null)?.flows;
  return by === undefined ? null : String(Object.values(by).reduce((n, k) => n + (typeof k === 'number' ? k : 0), 0));
}

const COMMANDS: Command[] = [
  // --- vips and rules
  {
    words: ['vip', 'list'],
    args: [],
    about: 'list the VIPs and their frontends',
    async run(c) {
      const vips = await getJson<Obj[]>(c, '/v1/vips');
      if (c.json) {
        printJson(c, vips);
        return 0;
      }
      // a SCOPE column once a VIP is internal (docs/east-west.md): public, or internal:<its network>
      const scoped = vips.some((v) => v['scope'] === 'internal');
      c.io.out(
        formatTable(
          scoped ? ['VIP', 'SCOPE', 'RULES', 'FRONTENDS'] : ['VIP', 'RULES', 'FRONTENDS'],
          vips.map((v) => {
            const rules = (v['rules'] ?? []) as Obj[];
            const scope = v['scope'] === 'internal' ? [`internal:${str(v['network'])}`] : scoped ? ['public'] : [];
            return [
              str(v['address']),
              ...scope,
              String(rules.length),
              rules.map((r) => `${str(r['protocol'])}/${str(r['frontendPort'])}`).join(' '),
            ];
          }),
        ),
      );
      return 0;
    },
  },
  {
    words: ['vip', 'show'],
    args: ['VIP'],
    about: 'show a VIP and its rules',
    async run(c, [vip]) {
      const v = await getJson<Obj>(c, `/v1/vips/${enc(vip!)}`);
      if (c.json) {
        printJson(c, v);
        return 0;
      }
      const rules = (v['rules'] ?? []) as Obj[];
      c.io.out(
        `vip ${str(v['address'])}: ${rules.length} rule${rules.length === 1 ? '' : 's'}\n${formatTable(RULE_HEADER, ruleRows(rules))}`,
      );
      return 0;
    },
  },
  {
    words: ['vip', 'add'],
    args: ['VIP'],
    options: [...RULE_OPTIONS, WAIT_OPTION],
    about: 'add a VIP with its first rule (a VIP has at least one): --protocol, --frontend-port and --pool are required',
    run: (c, [vip]) => write(c, 'POST', '/v1/vips', { address: vip, rules: [ruleBody(c, false)] }, `vip ${vip} added`),
  },
  {
    words: ['vip', 'del'],
    args: ['VIP'],
    about: 'delete a VIP and all its rules',
    options: [WAIT_OPTION],
    run: (c, [vip]) => write(c, 'DELETE', `/v1/vips/${enc(vip!)}`, undefined, `vip ${vip} deleted`),
  },
  {
    words: ['rule', 'list'],
    args: ['VIP'],
    about: 'list the rules of a VIP',
    async run(c, [vip]) {
      const rules = await getJson<Obj[]>(c, `/v1/vips/${enc(vip!)}/rules`);
      if (c.json) printJson(c, rules);
      else c.io.out(formatTable(RULE_HEADER, ruleRows(rules)));
      return 0;
    },
  },
  {
    words: ['rule', 'add'],
    args: ['VIP'],
    options: [...RULE_OPTIONS, WAIT_OPTION],
    about: 'add a rule to a VIP: --protocol, --frontend-port and --pool are required',
    run: (c, [vip]) => write(c, 'POST', `/v1/vips/${enc(vip!)}/rules`, ruleBody(c, false), `rule added to vip ${vip}`),
  },
  {
    words: ['rule', 'set'],
    args: ['VIP', 'RULE'],
    options: [...RULE_OPTIONS.filter((o) => o.name !== 'name'), WAIT_OPTION],
    about: 'change fields of a rule (the others keep their values; --probe none removes the probe)',
    run: (c, [vip, rule]) =>
      write(c, 'PATCH', `/v1/vips/${enc(vip!)}/rules/${enc(rule!)}`, ruleBody(c, true), `rule ${rule} of vip ${vip} changed`),
  },
  {
    words: ['rule', 'del'],
    args: ['VIP', 'RULE'],
    about: 'delete a rule (a VIP keeps at least one: delete the VIP instead)',
    options: [WAIT_OPTION],
    run: (c, [vip, rule]) =>
      write(c, 'DELETE', `/v1/vips/${enc(vip!)}/rules/${enc(rule!)}`, undefined, `rule ${rule} of vip ${vip} deleted`),
  },

  // --- pools and backends
  {
    words: ['pool', 'list'],
    args: [],
    about: 'list the pools',
    async run(c) {
      const config = await stateConfig(c);
      const pools = (config['pools'] ?? []) as Obj[];
      if (c.json) {
        printJson(c, pools);
        return 0;
      }
      const users = (p: string) =>
        ((config['vips'] ?? []) as Obj[]).flatMap((v) =>
          ((v['rules'] ?? []) as Obj[]).filter((r) => r['pool'] === p).map((r) => `${str(v['address'])}/${str(r['name'])}`),
        );
      c.io.out(
        formatTable(
          ['POOL', 'BACKENDS', 'ACTIVE', 'RULES'],
          pools.map((p) => {
            const bs = (p['backends'] ?? []) as Obj[];
            const active = bs.filter((b) => b['enabled'] !== false && b['drain'] !== true).length;
            return [str(p['name']), String(bs.length), String(active), users(str(p['name'])).join(' ') || '-'];
          }),
        ),
      );
      return 0;
    },
  },
  {
    words: ['pool', 'show'],
    args: ['POOL'],
    about: 'show a pool and its backends, with their health',
    async run(c, [name]) {
      if (c.json) {
        printJson(c, await getJson(c, `/v1/pools/${enc(name!)}`));
        return 0;
      }
      const [config, health] = await Promise.all([stateConfig(c), getJson<HealthRow[]>(c, '/v1/health')]);
      const p = findPool(config, name!);
      c.io.out(
        `pool ${name}: latencySensitivityMs ${str(p['latencySensitivityMs'])}\n${formatTable(BACKEND_HEADER, backendRows(p, config, health))}`,
      );
      return 0;
    },
  },
  {
    words: ['pool', 'add'],
    args: ['POOL'],
    about: 'add a pool (at least one --backend NIC)',
    options: [
      { name: 'backend', value: 'NIC', help: 'a backend nic (repeatable, or NIC,NIC,...)', repeat: true },
      { name: 'latency-sensitivity-ms', value: 'MS', help: 'backends within MS of the fastest stay candidates (default 0)' },
      WAIT_OPTION,
    ],
    run(c, [name]) {
      const nics = (c.args.values.get('backend') ?? []).flatMap((v) => v.split(',')).filter((v) => v !== '');
      if (nics.length === 0) throw new CliError('a pool needs at least one --backend NIC', 2);
      const body: Obj = { name, backends: nics.map((nic) => ({ nic })) };
      const l = intOpt(c, 'latency-sensitivity-ms');
      if (l !== undefined) body['latencySensitivityMs'] = l;
      return write(c, 'POST', '/v1/pools', body, `pool ${name} added`);
    },
  },
  {
    words: ['pool', 'set'],
    args: ['POOL'],
    about: "change a pool's latency sensitivity (docs/latency.md)",
    options: [{ name: 'latency-sensitivity-ms', value: 'MS', help: 'backends within MS of the fastest stay candidates' }, WAIT_OPTION],
    run(c, [name]) {
      const l = intOpt(c, 'latency-sensitivity-ms');
      if (l === undefined) throw new CliError('nothing to change: give --latency-sensitivity-ms MS', 2);
      return write(c, 'PATCH', `/v1/pools/${enc(name!)}`, { latencySensitivityMs: l }, `pool ${name}: latencySensitivityMs ${l}`);
    },
  },
  genericDel('pools'),
  {
    words: ['backend', 'list'],
    args: ['POOL'],
    about: 'list the backends of a pool with priority, weight, state and health',
    async run(c, [name]) {
      if (c.json) {
        printJson(c, await getJson(c, `/v1/pools/${enc(name!)}/backends`));
        return 0;
      }
      const [config, health] = await Promise.all([stateConfig(c), getJson<HealthRow[]>(c, '/v1/health')]);
      c.io.out(formatTable(BACKEND_HEADER, backendRows(findPool(config, name!), config, health)));
      return 0;
    },
  },
  {
    words: ['backend', 'add'],
    args: ['POOL', 'NIC'],
    about: 'add a nic to a pool',
    options: [
      { name: 'priority', value: 'P', help: '1 (highest, default) .. 5' },
      { name: 'weight', value: 'W', help: '1 .. 1000 (default 50)' },
      { name: 'disabled', help: 'add it disabled' },
      { name: 'drain', help: 'add it drained' },
      WAIT_OPTION,
    ],
    run(c, [pool, nic]) {
      const b: Obj = { nic };
      const p = intOpt(c, 'priority');
      if (p !== undefined) b['priority'] = p;
      const w = intOpt(c, 'weight');
      if (w !== undefined) b['weight'] = w;
      if (c.args.flags.has('disabled')) b['enabled'] = false;
      if (c.args.flags.has('drain')) b['drain'] = true;
      return write(c, 'POST', `/v1/pools/${enc(pool!)}/backends`, b, `backend ${nic} added to pool ${pool}`);
    },
  },
  {
    words: ['backend', 'set'],
    args: ['POOL', 'NIC'],
    about: 'change the priority and/or weight of a backend',
    options: [{ name: 'priority', value: 'P', help: '1 (highest) .. 5' }, { name: 'weight', value: 'W', help: '1 .. 1000' }, WAIT_OPTION],
    run(c, [pool, nic]) {
      const b: Obj = {};
      const p = intOpt(c, 'priority');
      if (p !== undefined) b['priority'] = p;
      const w = intOpt(c, 'weight');
      if (w !== undefined) b['weight'] = w;
      if (Object.keys(b).length === 0) throw new CliError('nothing to change: give --priority and/or --weight', 2);
      return write(
        c,
        'PATCH',
        `/v1/pools/${enc(pool!)}/backends/${enc(nic!)}`,
        b,
        `backend ${nic} of pool ${pool} set to ${Object.entries(b)
          .map(([k, v]) => `${k} ${String(v)}`)
          .join(', ')}`,
      );
    },
  },
  backendVerb('drain', { drain: true }, 'stop new flows to a backend; its established flows continue', 'drained (no new flows)'),
  backendVerb('undrain', { drain: false }, 'let a drained backend take new flows again', 'takes new flows again'),
  backendVerb('enable', { enabled: true }, 'enable a backend', 'enabled'),
  backendVerb(
    'disable',
    { enabled: false },
    'disable a backend: no new flows, and its established connections end (each re-placed at its next packet, so TCP is reset); drain keeps them',
    'disabled',
  ),
  {
    words: ['backend', 'del'],
    args: ['POOL', 'NIC'],
    about:
      'remove a nic from a pool: its established connections end (each re-placed at its next packet, so TCP is reset); drain keeps them',
    options: [WAIT_OPTION],
    run: (c, [pool, nic]) =>
      write(c, 'DELETE', `/v1/pools/${enc(pool!)}/backends/${enc(nic!)}`, undefined, `backend ${nic} removed from pool ${pool}`),
  },

  // --- probes
  genericList('probes', ['PROBE', 'PROTO', 'PORT', 'PATH', 'INTERVAL', 'TIMEOUT', 'UP', 'DOWN'], (p) => [
    str(p['name']),
    str(p['protocol']),
    str(p['port']),
    str(p['path']),
    `${str(p['intervalMs'])}ms`,
    `${str(p['timeoutMs'])}ms`,
    str(p['upThreshold']),
    str(p['downThreshold']),
  ]),
  genericShow('probes'),
  {
    words: ['probe', 'add'],
    args: ['PROBE'],
    about: 'add a probe: --protocol and --port are required',
    options: [
      { name: 'protocol', value: 'P', help: 'http (GET PATH, healthy on 200) or tcp (connect)' },
      { name: 'port', value: 'N', help: "the port probed on the nic's address" },
      { name: 'path', value: 'PATH', help: 'the HTTP path (default /)' },
      { name: 'interval-ms', value: 'MS', help: 'time between probes (default 5000, at least 100)' },
      { name: 'timeout-ms', value: 'MS', help: 'a probe without an answer by then failed (default min(2000, interval))' },
      { name: 'up-threshold', value: 'N', help: 'successes in a row to come up (default 2)' },
      { name: 'down-threshold', value: 'N', help: 'failures in a row to go down (default 2)' },
      WAIT_OPTION,
    ],
    run(c, [name]) {
      const b: Obj = { name };
      const protocol = opt(c, 'protocol');
      const port = intOpt(c, 'port');
      if (protocol === undefined || port === undefined) throw new CliError('a probe needs --protocol and --port', 2);
      Object.assign(b, { protocol, port });
      const path = opt(c, 'path');
      if (path !== undefined) b['path'] = path;
      for (const [o, f] of [
        ['interval-ms', 'intervalMs'],
        ['timeout-ms', 'timeoutMs'],
        ['up-threshold', 'upThreshold'],
        ['down-threshold', 'downThreshold'],
      ] as const) {
        const v = intOpt(c, o);
        if (v !== undefined) b[f] = v;
      }
      return write(c, 'POST', '/v1/probes', b, `probe ${name} added`);
    },
  },
  genericDel('probes'),

  // --- the rest of the config: read only here (the API writes them)
  genericList('networks', ['NETWORK', 'VNI', 'GATEWAY', 'GATEWAY6'], (n) => [
    str(n['name']),
    str(n['vni']),
    str(n['gateway']),
    str(n['gateway6']),
  ]),
  genericShow('networks'),
  genericList('muxes', ['MUX', 'ADDRESS', 'ADDRESS6'], (n) => [str(n['name']), str(n['address']), str(n['address6'])]),
  genericShow('muxes'),
  genericList('hosts', ['HOST', 'ADDRESS', 'ADDRESS6'], (n) => [str(n['name']), str(n['address']), str(n['address6'])]),
  genericShow('hosts'),
  genericList('nics', ['NIC', 'HOST', 'NETWORK', 'PORT', 'MAC', 'ADDRESSES'], (n) => [
    str(n['name']),
    str(n['host']),
    str(n['network']),
    str(n['port']),
    str(n['mac']),
    ((n['addresses'] ?? []) as string[]).join(','),
  ]),
  genericShow('nics'),

  // --- live state
  {
    words: ['snat'],
    args: [],
    about:
      "outbound NAT (docs/outbound.md): each nic's ports per family against its cap, each host's frontend port ranges, and what each host agent's last heartbeat says: ports in use and exhaustion drops per nic",
    async run(c) {
      const r = await getJson<SnatAnswer>(c, '/v1/snat');
      // each host agent's side, from its heartbeat (GET /v1/agents/host/NAME/status reaches the leader from any replica)
      const hosts: SnatHostView[] = [];
      for (const host of [...new Set(r.nics.map((n) => n.host))].sort()) {
        const s = await getJson<{ status: Obj; at: string }>(c, `/v1/agents/host/${enc(host)}/status`).catch(() => null);
        const snat = ((s?.status['status'] ?? {}) as Obj)['snat'] as SnatHostView['snat'] | undefined;
        hosts.push({ host, at: s?.at ?? null, snat: snat ?? null });
      }
      if (c.json) {
        printJson(c, { ...r, hosts });
        return 0;
      }
      c.io.out(
        formatTable(
          ['NIC', 'HOST', 'RULE', 'PORTS4', 'PORTS6', 'CAP'],
          r.nics.map((n) => [n.nic, n.host, n.rule, String(n.ports4), String(n.ports6), String(n.portsPerNic)]),
        ),
      );
      c.io.out('\n');
      c.io.out(
        formatTable(
          ['HOST', 'NIC', 'FRONTEND', 'PORTS'],
          r.ranges.map((x) => [x.host, x.nic, x.ip, `${x.first}-${x.last}`]),
        ),
      );
      c.io.out('\n');
      c.io.out(
        formatTable(
          ['HOST', 'NIC', 'INUSE4', 'HELD4', 'EXHAUSTED4', 'INUSE6', 'HELD6', 'EXHAUSTED6', 'HEARTBEAT'],
          hosts.flatMap((h) =>
            h.snat === null
              ? [[h.host, '-', '-', '-', '-', '-', '-', '-', h.at === null ? 'no status yet' : ago(h.at)]]
              : h.snat.nics.map((n) => [
                  h.host,
                  n.nic,
                  String(n.inUse4),
                  String(n.ports4),
                  String(n.exhausted4),
                  String(n.inUse6),
                  String(n.ports6),
                  String(n.exhausted6),
                  h.at === null ? '' : ago(h.at),
                ]),
          ),
        ),
      );
      return 0;
    },
  },
  {
    words: ['health'],
    args: [],
    about: 'probe state per (nic, probe), and which host agent reported it',
    async run(c) {
      const rows = await getJson<HealthRow[]>(c, '/v1/health');
      if (c.json) {
        printJson(c, rows);
        return 0;
      }
      c.io.out(
        formatTable(
          ['NIC', 'PROBE', 'STATE', 'HOST', 'SINCE', 'REPORTED', 'DETAIL'],
          rows.map((h) => [
            h.nic,
            h.probe,
            h.reported ? h.state : 'unknown (not reported)',
            str(h.host),
            ago(h.since),
            ago(h.reportedAt),
            str(h.detail),
          ]),
        ),
      );
      await printLatency(c);
      return 0;
    },
  },
  {
    words: ['agents'],
    args: [],
    about: 'the MUXes and host agents: generation applied, behind or not, last seen, last refusal',
    async run(c) {
      const agents = await getJson<Obj[]>(c, '/v1/agents');
      if (c.json) {
        printJson(c, agents);
        return 0;
      }
      c.io.out(
        formatTable(
          ['KIND', 'NAME', 'APPLIED', 'CURRENT', 'BEHIND', 'CONNECTED', 'LAST-SEEN', 'LAST-ERROR'],
          agents.map((a) => [
            str(a['kind']),
            str(a['name']) + (a['inConfig'] === false ? ' (not in config)' : ''),
            str(a['appliedGeneration']),
            str(a['currentGeneration']),
            a['behind'] === true ? 'yes' : 'no',
            a['connected'] === true ? 'yes' : 'no',
            ago(a['lastSeen']),
            a['lastError'] === null || a['lastError'] === undefined
              ? '-'
              : `gen ${str((a['lastError'] as Obj)['generation'])}: ${str((a['lastError'] as Obj)['message']).split('\n')[0]}`,
          ]),
        ),
      );
      return 0;
    },
  },
  {
    words: ['counters'],
    args: ['[AGENT]'],
    about: 'counters per agent (from their heartbeats); with AGENT (mux1, host/host1) every non-zero counter of it',
    async run(c, [agent]) {
      if (agent !== undefined) {
        const [kind, name] = await resolveAgent(c, agent);
        const s = await getJson<{ status: Obj; at: string }>(c, `/v1/agents/${kind}/${enc(name)}/status`);
        const st = (s.status['status'] ?? {}) as Obj;
        const counters = (st['counters'] ?? {}) as Record<string, number>;
        if (c.json) {
          printJson(c, { agent: `${kind}/${name}`, at: s.at, counters });
          return 0;
        }
        c.io.out(`${kind} ${name}, heartbeat ${ago(s.at)}, tables generation ${str(st['generation'])}\n`);
        c.io.out(
          formatTable(
            ['COUNTER', 'VALUE'],
            Object.entries(counters)
              .filter(([, v]) => v !== 0)
              .map(([k, v]) => [k, String(v)]),
          ),
        );
        return 0;
      }
      const agents = await getJson<Obj[]>(c, '/v1/agents');
      const rows: string[][] = [];
      const out: Obj[] = [];
      for (const a of agents) {
        const kind = str(a['kind']);
        const name = str(a['name']);
        // an agent that sent no heartbeat yet (404) is a row of dashes; anything else (401: no token) is an error
        const r = await api(c, 'GET', `/v1/agents/${kind}/${enc(name)}/status`).catch((e: CliError) =>
          e.status === 404 ? null : Promise.reject(e),
        );
        const s = (r?.body ?? null) as { status: Obj; at: string } | null;
        const st = (s?.status['status'] ?? {}) as Obj;
        const k = (st['counters'] ?? {}) as Record<string, number>;
        const drops = Object.entries(k)
          .filter(([n]) => n.startsWith('drop_'))
          .reduce((x, [, v]) => x + v, 0);
        const flows = st['flows'] as { ipv4?: number; ipv6?: number } | undefined;
        out.push({ agent: `${kind}/${name}`, at: s?.at ?? null, counters: k });
        rows.push([
          kind,
          name,
          ago(s?.at),
          str(st['generation']),
          str(k['rx_packets'] ?? k['in_packets'] ?? (s === null ? null : 0)),
          str(k['tx_packets'] ?? k['out_packets'] ?? (s === null ? null : 0)),
          s === null ? '-' : String(drops),
          flows !== undefined && typeof flows === 'object' ? String((flows.ipv4 ?? 0) + (flows.ipv6 ?? 0)) : (hostFlowEntries(st) ?? '-'),
        ]);
      }
      if (c.json) printJson(c, out);
      else c.io.out(formatTable(['KIND', 'NAME', 'HEARTBEAT', 'TABLES-GEN', 'PKTS-IN', 'PKTS-OUT', 'DROPS', 'FLOWS'], rows));
      return 0;
    },
  },
  {
    words: ['flows'],
    args: ['AGENT'],
    about:
      "the live flows of a MUX, or the entries of a host agent's one flow table by kind (east-west to_mux/fastpath, the return path's dsr, outbound NAT's snat_out with its frontend) and each feature's quota; a sample of up to 100, from its last heartbeat",
    options: [{ name: 'limit', value: 'N', help: 'print at most N (default 100)' }],
    async run(c, [agent]) {
      // a MUX's name, else a host agent's (404 from the first: no MUX of that name)
      const mux = await api(c, 'GET', `/v1/agents/mux/${enc(agent!)}/status`).catch((e: CliError) =>
        e.status === 404 ? null : Promise.reject(e),
      );
      const limit = intOpt(c, 'limit') ?? 100;
      if (mux === null) {
        const h = await getJson<{ status: Obj; at: string }>(c, `/v1/agents/host/${enc(agent!)}/status`);
        const flows = (h.status['flows'] ?? []) as Obj[];
        const ew = (((h.status['status'] ?? {}) as Obj)['eastWest'] ?? null) as {
          flows?: Record<string, number>;
          maxFlows?: number;
          quotas?: Record<string, { max: number; used: number }>;
        } | null;
        if (c.json) {
          printJson(c, { host: agent, at: h.at, summary: ew?.flows ?? null, quotas: ew?.quotas ?? null, flows: flows.slice(0, limit) });
          return 0;
        }
        const by = Object.entries(ew?.flows ?? {}).filter(([, n]) => n > 0);
        const total = by.reduce((n, [, k]) => n + k, 0);
        const quotas = Object.entries(ew?.quotas ?? {}).map(([f, q]) => `${f} ${q.used}/${q.max}`);
        c.io.out(
          `host ${agent}: ${total} entries of ${ew?.maxFlows ?? '?'} in one flow table (${by.map(([k, n]) => `${n} ${k}`).join(', ') || 'none'}), ` +
            `quotas ${quotas.join(', ') || '-'}, heartbeat ${ago(h.at)}\n`,
        );
        c.io.out(
          formatTable(
            ['KIND', 'CLIENT', 'VIP', 'PROTO', 'VNI', 'VIA', 'IDLE-EXPIRES'],
            flows
              .slice(0, limit)
              .map((f) => [
                str(f['kind']),
                str(f['client']),
                str(f['vip']),
                str(f['protocol']),
                str(f['vni']),
                f['kind'] === 'fastpath'
                  ? `${str(f['backend'])} on ${str(f['host'])}`
                  : f['kind'] === 'snat_out'
                    ? `${str(f['backend'])} from ${str(f['frontend'])}`
                    : f['mux'] !== undefined
                      ? str(f['mux'])
                      : str(f['backend']),
                `${str(f['expiresInS'])}s`,
              ]),
          ),
        );
        return 0;
      }
      const s = mux.body as { status: Obj; at: string };
      const flows = (s.status['flows'] ?? []) as Obj[];
      const st = (s.status['status'] ?? {}) as Obj;
      if (c.json) {
        printJson(c, { mux: agent, at: s.at, summary: st['flows'] ?? null, flows: flows.slice(0, limit) });
        return 0;
      }
      const sum = (st['flows'] ?? {}) as { ipv4?: number; ipv6?: number };
      c.io.out(
        `mux ${agent}: ${(sum.ipv4 ?? 0) + (sum.ipv6 ?? 0)} flows (${sum.ipv4 ?? 0} IPv4, ${sum.ipv6 ?? 0} IPv6), heartbeat ${ago(s.at)}\n`,
      );
      c.io.out(
        formatTable(
          ['SRC', 'DST', 'PROTO', 'NIC', 'IDLE-EXPIRES'],
          flows
            .slice(0, limit)
            .map((f) => [str(f['src']), str(f['dst']), str(f['protocol']), str(f['nic']), `${str(f['idleExpiresInS'])}s`]),
        ),
      );
      return 0;
    },
  },
  {
    words: ['state'],
    args: [],
    about: 'the generation and a summary of the desired state; --yaml prints it as an slbx config file',
    options: [{ name: 'yaml', help: 'print the config as YAML (a valid slbx config: every default written out)' }],
    async run(c) {
      const s = await getJson<{ stateId: string; generation: number; config: unknown }>(c, '/v1/state');
      if (c.json) {
        printJson(c, s);
        return 0;
      }
      const v = validateConfig(s.config);
      if (!v.ok)
        throw new CliError(
          `the controller's config does not validate here (another slbx version?):\n${formatConfigErrors(v.errors, 'state')}`,
          1,
        );
      if (c.args.flags.has('yaml')) {
        c.io.out(serializeConfig(v.config));
        return 0;
      }
      c.io.out(`generation ${s.generation} (state ${s.stateId})\n${configSummary(v.config)}\n`);
      return 0;
    },
  },
  {
    words: ['state', 'apply'],
    args: ['FILE'],
    about: 'replace the whole config with an slbx config file (checked here first, then by the controller)',
    options: [{ name: 'generation', value: 'N', help: 'only if the controller is still at generation N' }, WAIT_OPTION],
    run(c, [file]) {
      let text: string;
      try {
        text = readFileSync(file!, 'utf8');
      } catch (e) {
        throw new CliError(`cannot read ${file}: ${(e as Error).message}`, 1);
      }
      const r = parseConfig(text, file);
      if (!r.ok) throw new CliError(formatConfigErrors(r.errors, file!), 1);
      const body: Obj = { config: toPlainConfig(r.config) };
      const g = intOpt(c, 'generation');
      if (g !== undefined) body['generation'] = g;
      return write(c, 'PUT', '/v1/state', body, `config replaced from ${file}`);
    },
  },
  {
    words: ['generations'],
    args: [],
    about: 'the recent generations: when each was made and why',
    async run(c) {
      const g = await getJson<{ current: number; history: { generation: number; at: string; cause: string }[] }>(c, '/v1/generations');
      if (c.json) {
        printJson(c, g);
        return 0;
      }
      c.io.out(
        formatTable(
          ['GEN', 'AT', 'CAUSE'],
          g.history.map((h) => [String(h.generation), h.at, h.cause]),
        ),
      );
      return 0;
    },
  },
  {
    words: ['wait'],
    args: ['[GEN]'],
    about: 'wait until the agents applied generation GEN (default: the current one); prints how long each took',
    options: [
      { name: 'kind', value: 'K', help: 'mux, host or all (default all)' },
      { name: 'wait-s', value: 'S', help: 'give up after S seconds (default 20), exit 1' },
    ],
    async run(c, [genText]) {
      let gen: number | 'current' = 'current';
      if (genText !== undefined) {
        if (!/^\d+$/.test(genText)) throw new CliError(`GEN must be a generation number, got ${JSON.stringify(genText)}`, 2);
        gen = Number(genText);
      }
      const kind = opt(c, 'kind') ?? 'all';
      if (!['mux', 'host', 'all'].includes(kind)) throw new CliError('--kind must be mux, host or all', 2);
      const w = opt(c, 'wait-s');
      const waitS = w === undefined ? 20 : Number(w);
      if (!Number.isFinite(waitS) || waitS < 0 || waitS > 120)
        throw new CliError(`--wait-s must be a number of seconds 0..120, got ${JSON.stringify(w)}`, 2);
      const r = await waitGeneration(c, gen, kind, waitS);
      if (c.json) printJson(c, r);
      else {
        c.io.out(describeReport(r));
        c.io.out(
          formatTable(
            ['KIND', 'NAME', 'APPLIED', 'ACKED-AFTER', 'APPLY-TIME'],
            r.agents.map((a) => [
              a.kind,
              a.name,
              str(a.appliedGeneration),
              a.ms === null ? (a.applied ? 'before' : '-') : `${a.ms} ms`,
              a.applyMs === null ? '-' : `${a.applyMs} ms`,
            ]),
          ),
        );
      }
      return r.complete ? 0 : 1;
    },
  },
  {
    words: ['top'],
    args: [],
    about: 'live rates per VIP and backend (packets/s, bits/s, share, health, weight), per MUX and host agent (q quits)',
    options: [
      { name: 'interval', value: 'S', help: 'seconds between screens, 0.5..60 (default 2: the agents send a heartbeat every 2 s)' },
      { name: 'count', value: 'N', help: 'draw N screens and exit (default: until q or Ctrl-C)' },
    ],
    async run(c) {
      const iv = opt(c, 'interval');
      const intervalS = iv === undefined ? 2 : Number(iv);
      if (!(intervalS >= 0.5 && intervalS <= 60)) throw new CliError(`--interval must be seconds 0.5..60, got ${JSON.stringify(iv)}`, 2);
      const count = intOpt(c, 'count') ?? null;
      if (count !== null && count < 1) throw new CliError('--count must be at least 1', 2);
      if (c.json) throw new CliError('top has no --json: slbctl counters --json prints the heartbeats it reads', 2);
      const keys = terminalQuit();
      try {
        return await runTop((path) => getJson(c, path), { out: (t) => c.io.out(t), quit: keys.quit }, { intervalS, count });
      } finally {
        keys.close();
      }
    },
  },
  {
    words: ['api'],
    args: ['METHOD', 'PATH', '[JSON]'],
    about: 'a raw API request (METHOD PATH [JSON body]); prints the answer',
    async run(c, [method, path, body]) {
      let parsed: unknown;
      if (body !== undefined) {
        try {
          parsed = JSON.parse(body);
        } catch (e) {
          throw new CliError(`the body is not JSON: ${(e as Error).message}`, 2);
        }
      }
      if (!path!.startsWith('/')) throw new CliError('PATH starts with / (e.g. /v1/state)', 2);
      const r = await api(c, method!.toUpperCase(), path!, parsed);
      if (r.body !== null) printJson(c, r.body);
      else if (r.text !== '') c.io.out(`${r.text}\n`);
      return 0;
    },
  },
];

/** Every command's words and arguments (`['backend', 'drain', 'POOL', 'NIC']`), for help and tests. */
export function slbctlCommands(): string[][] {
  return COMMANDS.map((c) => [...c.words, ...c.args]);
}

/** `mux1` or `mux/mux1` -> [kind, name], looked up in the controller's agent list. */
async function resolveAgent(c: Ctx, text: string): Promise<[string, string]> {
  const m = /^(mux|host)\/(.+)$/.exec(text);
  if (m !== null) return [m[1]!, m[2]!];
  const agents = await getJson<Obj[]>(c, '/v1/agents');
  const hits = agents.filter((a) => a['name'] === text);
  if (hits.length === 0) throw new CliError(`no agent named ${text} (agents: ${agents.map((a) => str(a['name'])).join(', ')})`, 1);
  if (hits.length > 1) throw new CliError(`${text} is both a mux and a host: write mux/${text} or host/${text}`, 2);
  return [str(hits[0]!['kind']), text];
}

// ---------------------------------------------------------------------------------------------
// help and dispatch

const OBJECTS = ['vip', 'rule', 'pool', 'backend', 'probe', 'network', 'mux', 'host', 'nic'];

function usageLine(cmd: Command): string {
  const opts = (cmd.options ?? [])
    .filter((o) => o.name !== 'wait')
    .map((o) => `[--${o.name}${o.value !== undefined ? ` ${o.value}` : ''}]`);
  const required = ['protocol', 'frontend-port', 'pool'];
  if (cmd.words.join(' ') === 'vip add' || cmd.words.join(' ') === 'rule add') {
    for (const r of required) {
      const i = opts.findIndex((o) => o.startsWith(`[--${r} `));
      if (i >= 0) opts[i] = opts[i]!.slice(1, -1);
    }
  }
  return `slbctl ${[...cmd.words, ...cmd.args, ...opts].join(' ')}`;
}

function mainHelp(): string {
  const lines = COMMANDS.map((c) => `  ${[...c.words, ...c.args].join(' ').padEnd(30)} ${c.about}`);
  return `usage: slbctl [--controller URL] [--json] OBJECT VERB [ARGS] [options]     (slbctl OBJECT VERB --help)

The slbx controller's command line. Changes go through the controller's API, which validates the
whole resulting config and refuses a bad change as a whole; the MUXes and host agents pick up each new
generation at once.

commands:
${lines.join('\n')}

global options:
${GLOBAL_OPTIONS.map((o) => `  --${o.name}${o.value !== undefined ? ` ${o.value}` : ''}`.padEnd(22) + o.help).join('\n')}

exit status: 0 done; 1 refused by the controller, or it could not be reached (the reason is printed); 2 usage.
examples:
  slbctl vip list
  slbctl rule add 203.0.113.10 --protocol tcp --frontend-port 443 --pool web
  slbctl backend drain web h1vm1 --wait
  slbctl backend set web h2vm1 --weight 100 --priority 2
  slbctl agents; slbctl health; slbctl counters mux1; slbctl flows mux1
  slbctl top --interval 1
`;
}

function objectHelp(word: string): string {
  const cmds = COMMANDS.filter((c) => c.words[0] === word);
  return `usage:\n${cmds.map((c) => `  ${usageLine(c)}\n      ${c.about}`).join('\n')}\n`;
}

function commandHelp(cmd: Command): string {
  return formatHelp(usageLine(cmd).slice('slbctl '.length).length > 0 ? usageLine(cmd) : 'slbctl', cmd.about, [
    ...(cmd.options ?? []),
    ...GLOBAL_OPTIONS,
  ]);
}

function findCommand(pos: string[]): { cmd: Command; rest: string[] } | null {
  let best: { cmd: Command; rest: string[] } | null = null;
  for (const cmd of COMMANDS) {
    if (cmd.words.length > pos.length) continue;
    if (cmd.words.every((w, i) => pos[i] === w) && (best === null || cmd.words.length > best.cmd.words.length)) {
      best = { cmd, rest: pos.slice(cmd.words.length) };
    }
  }
  return best;
}

/** The positional words of argv, skipping the values of options that take one. */
function commandWords(argv: readonly string[]): string[] {
  const takesValue = new Set(
    [...GLOBAL_OPTIONS, ...COMMANDS.flatMap((c) => c.options ?? [])].filter((o) => o.value !== undefined).map((o) => o.name),
  );
  const words: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      words.push(...argv.slice(i + 1));
      break;
    }
    if (a.startsWith('--')) {
      if (!a.includes('=') && takesValue.has(a.slice(2))) i++;
      continue;
    }
    if (a.startsWith('-') && a !== '-') continue;
    words.push(a);
  }
  return words;
}

export async function runSlbctl(argv: readonly string[], io: SlbctlIo = PROCESS_IO): Promise<number> {
  const usage = (m: string) => {
    io.err(`slbctl: ${m}\n`);
    return 2;
  };
  // the command words come first among the positionals; options may be anywhere
  const words = commandWords(argv);
  const wantsHelp = argv.includes('--help') || argv.includes('-h');
  if (words.length === 0 || (words[0] === 'help' && words.length === 1)) {
    if (wantsHelp || words[0] === 'help') {
      io.out(mainHelp());
      return 0;
    }
    io.err(mainHelp());
    return 2;
  }
  let found = findCommand(words);
  // an object alone lists (slbctl vip == slbctl vip list)
  if (found === null && words.length === 1 && OBJECTS.includes(words[0]!)) {
    const list = COMMANDS.find((c) => c.words[0] === words[0] && c.words[1] === 'list' && c.args.length === 0);
    if (list !== undefined && !wantsHelp) found = { cmd: list, rest: [] };
  }
  if (found === null) {
    if (OBJECTS.includes(words[0]!)) {
      if (wantsHelp) {
        io.out(objectHelp(words[0]!));
        return 0;
      }
      io.err(`slbctl: unknown command '${words.join(' ')}'\n${objectHelp(words[0]!)}`);
      return 2;
    }
    return usage(`unknown command '${words[0]}' (see slbctl --help)`);
  }
  const { cmd } = found;
  if (wantsHelp) {
    io.out(commandHelp(cmd));
    return 0;
  }
  let args: ParsedArgs;
  try {
    args = parseArgs(argv, [...(cmd.options ?? []), ...GLOBAL_OPTIONS]);
  } catch (e) {
    if (e instanceof UsageError) return usage(`${e.message}\n${usageLine(cmd)}`);
    throw e;
  }
  const pos = args.positional.slice(cmd.words.length);
  const required = cmd.args.filter((a) => !a.startsWith('['));
  if (pos.length < required.length) return usage(`missing ${required.slice(pos.length).join(' ')}\nusage: ${usageLine(cmd)}`);
  if (pos.length > cmd.args.length) return usage(`unexpected argument '${pos[cmd.args.length]}'\nusage: ${usageLine(cmd)}`);
  const urlText = args.values.get('controller')?.[0] ?? io.env['SLBX_CONTROLLER'] ?? DEFAULT_CONTROLLER;
  const bases = parseControllerUrls(urlText);
  if (typeof bases === 'string') return usage(`--controller: ${bases}`);
  const base = bases[0]!;
  const t = args.values.get('timeout')?.[0];
  const timeoutS = t === undefined ? 10 : Number(t);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0 || timeoutS > 600) return usage('--timeout must be a number of seconds, 0 < S <= 600');
  const tokenPath = args.values.get('token-file')?.[0] ?? io.env['SLBX_TOKEN_FILE'];
  let token: string | null = null;
  if (tokenPath !== undefined && tokenPath !== '') {
    const tk = readToken(tokenPath);
    if (typeof tk !== 'string') return usage(`--token-file: ${tk.error}`);
    token = tk;
  }
  const tokenSource =
    token === null ? null : args.values.get('token-file')?.[0] !== undefined ? tokenPath! : `SLBX_TOKEN_FILE (${tokenPath})`;
  const c: Ctx = { io, base, bases, json: args.flags.has('json'), timeoutMs: timeoutS * 1000, args, token, tokenSource };
  try {
    return await cmd.run(c, pos);
  } catch (e) {
    if (e instanceof CliError) {
      if (e.code === 1 && c.json && e.body !== undefined) printJson(c, e.body);
      io.err(`slbctl: ${e.message}\n`);
      return e.code;
    }
    throw e;
  }
}

if (isMain(import.meta.url)) {
  runSlbctl(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      process.stderr.write(`slbctl: internal error: ${(e as Error).stack ?? String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
