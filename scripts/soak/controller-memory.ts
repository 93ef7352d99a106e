#!/usr/bin/env node
// The controller's memory under many agents, in minutes rather than the soak's hour (docs/soak.md,
// "The controller's memory"). Starts slbx-controller (dist/controller/main.js, with the node flags given)
// on loopback with the lab's config, and drives it with --agents real policy clients
// (runtime/policy-client.ts: long-poll watches, acks, heartbeats every --heartbeat-ms with a status body
// like a MUX's), each replaced every --churn-ms (new keep-alive connections, watches cut mid-wait), while
// host1 reports h1vm1 down and up again every --flap-ms (a new generation each time, every watch
// answered). The controller samples itself (scripts/soak/memory-probe.ts, --import) every 5 s:
// resident memory, V8's heap (total, used, each space), external and array buffers. Prints one line per
// --every seconds and, after --warmup, the growth from the median of the first window to the median of
// the last (as the soak judges), per measure.
//   node dist/scripts/soak/controller-memory.js --duration 300 [--node-flag --max-semi-space-size=1] [--gc-interval-s S]
//       [--env MALLOC_ARENA_MAX=2] [--smaps] [--out DIR]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';
import { PolicyClient } from '../../runtime/policy-client.js';
import { requestJson } from '../../runtime/http-json.js';
import type { MemorySample } from './memory-probe.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const DIST = join(ROOT, 'dist');

const OPTIONS: OptionSpec[] = [
  { name: 'duration', value: 'S', help: 'seconds of load', default: '300' },
  { name: 'agents', value: 'N', help: 'policy clients (half MUXes, half hosts)', default: '40' },
  { name: 'flap-ms', value: 'MS', help: "h1vm1's health changes this often (each a new generation)", default: '500' },
  { name: 'heartbeat-ms', value: 'MS', help: "each agent's status heartbeat", default: '1000' },
  { name: 'churn-ms', value: 'MS', help: 'each agent is replaced (new connections) this often; 0: never', default: '2000' },
  { name: 'warmup', value: 'S', help: 'seconds before the growth is judged (windows: a third of the rest, at most 60 s)', default: '60' },
  { name: 'every', value: 'S', help: 'print one sample this often', default: '30' },
  { name: 'node-flag', value: 'FLAG', help: "a flag for the controller's node (repeatable), e.g. --max-semi-space-size=1", repeat: true },
  {
    name: 'gc-interval-s',
    value: 'S',
    help: "the controller's --gc-interval-s (a full collection every S s; 0: V8's own schedule, as before that option); default: the controller's",
  },
  {
    name: 'env',
    value: 'VAR=VALUE',
    help: 'an environment variable for the controller (repeatable), e.g. MALLOC_ARENA_MAX=2',
    repeat: true,
  },
  { name: 'smaps', help: 'also sample /proc/PID/smaps: resident memory per kind of mapping ([heap], anonymous, files, stack)' },
  { name: 'out', value: 'DIR', help: "the controller's state and the samples (default: a new temp directory)" },
  { name: 'help', help: 'this help' },
];

const SPEC: CommandSpec = {
  program: 'controller-memory',
  usage: 'controller-memory.js [--duration S] [--agents N] [--node-flag FLAG ...] [--out DIR]',
  options: OPTIONS,
  about:
    'Drives a controller with many agents and frequent policy changes and samples its memory (docs/soak.md, "The controller\'s memory").',
};

const MB = (b: number) => (b / 1048576).toFixed(1);

function intOpt(a: ParsedArgs, name: string, min: number): number {
  const v = Number(one(a, name));
  if (!Number.isInteger(v) || v < min) throw new UsageError(`--${name} must be an integer >= ${min}`);
  return v;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Growth of each measure from the first window after the warm-up to the last (medians), as the soak judges. */
export function growth(samples: readonly MemorySample[], warmupS: number): { measure: string; first: number; last: number; pct: number }[] {
  if (samples.length === 0) return [];
  const t0 = samples[0]!.t;
  const after = samples.filter((s) => s.t - t0 >= warmupS * 1000);
  if (after.length < 2) return [];
  const spanS = (after[after.length - 1]!.t - after[0]!.t) / 1000;
  const winMs = Math.min(60, spanS / 3) * 1000;
  const first = after.filter((s) => s.t - after[0]!.t <= winMs);
  const last = after.filter((s) => after[after.length - 1]!.t - s.t <= winMs);
  const measures: [string, (s: MemorySample) => number][] = [
    ['rss', (s) => s.rss],
    ['heapTotal', (s) => s.heapTotal],
    ['new space', (s) => s.spaces['new'] ?? 0],
    ['old space', (s) => s.spaces['old'] ?? 0],
    ['heapUsed', (s) => s.heapUsed],
    ['rss - heapTotal', (s) => s.rss - s.heapTotal],
    ['external', (s) => s.external],
    ['arrayBuffers', (s) => s.arrayBuffers],
  ];
  if (samples[0]!.maps !== undefined) for (const k of Object.keys(samples[0]!.maps)) measures.push([`smaps ${k}`, (s) => s.maps?.[k] ?? 0]);
  return measures.map(([measure, f]) => {
    const a = median(first.map(f));
    const b = median(last.map(f));
    return { measure, first: a, last: b, pct: a === 0 ? 0 : (100 * (b - a)) / a };
  });
}

async function run(a: ParsedArgs): Promise<number> {
  const durationS = intOpt(a, 'duration', 10);
  const agents = intOpt(a, 'agents', 1);
  const flapMs = intOpt(a, 'flap-ms', 50);
  const heartbeatMs = intOpt(a, 'heartbeat-ms', 50);
  const churnMs = intOpt(a, 'churn-ms', 0);
  const warmupS = intOpt(a, 'warmup', 0);
  const everyS = intOpt(a, 'every', 1);
  const flags = a.values.get('node-flag') ?? [];
  const extraEnv: Record<string, string> = {};
  for (const e of a.values.get('env') ?? []) {
    const eq = e.indexOf('=');
    if (eq < 1) throw new UsageError(`--env ${e}: give VAR=VALUE`);
    extraEnv[e.slice(0, eq)] = e.slice(eq + 1);
  }
  const smaps = a.flags.has('smaps');
  const dir = one(a, 'out') ?? mkdtempSync(join(tmpdir(), 'slbx-controller-memory-'));
  const samplesPath = join(dir, 'memory.jsonl');
  if (existsSync(samplesPath)) throw new UsageError(`${samplesPath} exists: give another --out`);
  const port = await freePort();
  const url = new URL(`http://127.0.0.1:${port}`);
  const child = spawn(
    process.execPath,
    [
      ...flags,
      '--import',
      join(DIST, 'scripts/soak/memory-probe.js'),
      join(DIST, 'controller/main.js'),
      '--state',
      join(dir, 'state.json'),
      '--init',
      join(ROOT, 'examples/lab.yaml'),
      '--listen',
      `127.0.0.1:${port}`,
      '--token-file',
      join(dir, 'api-token'),
      '--log-level',
      'warn',
      ...(one(a, 'gc-interval-s') === undefined ? [] : ['--gc-interval-s', one(a, 'gc-interval-s')!]),
    ],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, ...extraEnv, SLBX_MEMORY_PROBE_OUT: samplesPath, ...(smaps ? { SLBX_MEMORY_PROBE_SMAPS: '1' } : {}) },
    },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  for (let i = 0; ; i++) {
    const r = await requestJson(new URL('/v1/state', url), { timeoutMs: 2000 }).catch(() => null);
    if (r !== null && r.status === 200) break;
    if (i > 300 || child.exitCode !== null) {
      process.stderr.write(`controller-memory: the controller did not answer on ${url.href}\n`);
      child.kill('SIGTERM');
      return 1;
    }
    await new Promise((r2) => setTimeout(r2, 100));
  }
  process.stdout.write(
    `controller pid ${child.pid} (node ${flags.join(' ') || '(no flags)'}${
      Object.keys(extraEnv).length > 0
        ? `, env ${Object.entries(extraEnv)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')}`
        : ''
    }), ${agents} agents, a generation every ${flapMs} ms, heartbeats every ${heartbeatMs} ms, each agent replaced every ${churnMs || 'never'} ms, ${durationS} s; samples in ${samplesPath}\n`,
  );
  const token = readFileSync(join(dir, 'api-token'), 'utf8').trim();
  // a status body like a MUX's heartbeat: counters and a sample of flows
  const status = {
    counters: Object.fromEntries(Array.from({ length: 120 }, (_, i) => [`counter_${i}`, i * 1000])),
    flows: Array.from({ length: 20 }, (_, i) => ({ client: `198.51.100.${i}:40000`, vip: '203.0.113.10:80', backend: 'h1vm1' })),
  };
  const make = (i: number) => {
    const kind = i % 2 === 0 ? 'mux' : 'host';
    const name = i === 1 ? 'host1' : i === 3 ? 'host2' : `${kind}${i}`;
    const c = new PolicyClient({ url, kind, name, token, apply: () => {}, heartbeat: () => status, heartbeatMs, log: () => {} });
    c.start();
    return c;
  };
  const clients = Array.from({ length: agents }, (_, i) => make(i));
  let k = 0;
  const churn =
    churnMs > 0
      ? setInterval(
          () => {
            const i = k++ % agents;
            clients[i]!.stop();
            clients[i] = make(i);
          },
          Math.max(1, Math.floor(churnMs / agents)),
        )
      : null;
  let down = false;
  const flap = setInterval(() => {
    down = !down;
    const host1 = clients[Math.min(1, agents - 1)]!;
    host1.reportHealth([
      { nic: 'h1vm1', probe: 'http80', state: down ? 'down' : 'up' },
      { nic: 'h1vm2', probe: 'http80', state: 'up' },
    ]);
  }, flapMs);
  const t0 = Date.now();
  let printed = 0;
  const header = 'time_s  rss_MB  heapTotal_MB  new_MB  old_MB  heapUsed_MB  external_MB  arrayBuffers_MB';
  process.stdout.write(`${header}\n`);
  const samples = () =>
    existsSync(samplesPath)
      ? readFileSync(samplesPath, 'utf8')
          .trim()
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as MemorySample)
      : [];
  while (Date.now() - t0 < durationS * 1000) {
    await new Promise((r) => setTimeout(r, 1000));
    const s = samples();
    const due = s.filter((x) => x.t - (s[0]?.t ?? 0) >= printed * everyS * 1000);
    const x = due[0];
    if (x !== undefined) {
      printed++;
      process.stdout.write(
        `${((x.t - s[0]!.t) / 1000).toFixed(0).padStart(6)}  ${MB(x.rss).padStart(6)}  ${MB(x.heapTotal).padStart(12)}  ${MB(x.spaces['new'] ?? 0).padStart(6)}  ${MB(x.spaces['old'] ?? 0).padStart(6)}  ${MB(x.heapUsed).padStart(11)}  ${MB(x.external).padStart(11)}  ${MB(x.arrayBuffers).padStart(15)}\n`,
      );
    }
  }
  if (churn !== null) clearInterval(churn);
  clearInterval(flap);
  for (const c of clients) c.stop();
  const gens = await requestJson(new URL('/v1/state', url), { timeoutMs: 5000 }).catch(() => null);
  child.kill('SIGTERM');
  await exited;
  const g = growth(samples(), warmupS);
  process.stdout.write(
    `generations: ${(gens?.body as { generation?: number } | null)?.generation ?? '?'}; after a ${warmupS} s warm-up, first window -> last window (medians):\n`,
  );
  for (const x of g)
    process.stdout.write(
      `  ${x.measure.padEnd(16)} ${MB(x.first).padStart(7)} MB -> ${MB(x.last).padStart(7)} MB  ${x.pct >= 0 ? '+' : ''}${x.pct.toFixed(1)} %\n`,
    );
  return 0;
}

export function main(argv: readonly string[]): Promise<number> {
  return runCommandAsync(SPEC, argv, run);
}

if (isMain(import.meta.url)) main(process.argv.slice(2)).then((c) => process.exit(c));
