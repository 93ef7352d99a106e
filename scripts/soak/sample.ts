#!/usr/bin/env node
// The soak's sampler (scripts/soak.sh, docs/soak.md): every --interval-ms, for each daemon listed in
// --daemons (lines "NAME PID", re-read every time: the soak rewrites it when a MUX restarts), one JSON
// line to --out with its resident memory (VmRSS), open file descriptors (entries of /proc/PID/fd) and
// CPU time; plus one line for the whole machine's CPU. Reads /proc only, signals nothing. SIGTERM or
// SIGINT: one last sample, then exit.
// Every --counters-interval-ms, for each MUX (a name starting with "mux") and host agent ("host"), one
// line to --counters-out (default counters.jsonl beside --out) with its send_error_* counters, read
// from GET /counters on the loopback of its own network namespace (nsenter --net=/proc/PID/ns/net curl);
// the judge requires them all to stay 0.
//   node dist/scripts/soak/sample.js --daemons daemons.txt --out samples.jsonl [--interval-ms 1000]
import { execFile } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';

export interface DaemonSample {
  /** Epoch milliseconds. */
  t: number;
  name: string;
  pid: number;
  rssKb: number | null;
  /** The resident memory's anonymous and file-backed parts (RssAnon, RssFile of /proc/PID/status): not judged, for explaining a growth. */
  rssAnonKb?: number | null;
  rssFileKb?: number | null;
  fds: number | null;
  /** User + system CPU seconds so far. */
  cpuS: number | null;
  /** The process was gone when sampled. */
  gone?: true;
}

export interface MachineSample {
  t: number;
  name: 'machine';
  /** Fraction of all CPUs busy since the previous sample. */
  busy: number;
}

/** One line of counters.jsonl: a MUX's or host agent's send_error_* counters (zeros included), or why none. */
export interface CounterSample {
  t: number;
  name: string;
  pid: number;
  /** null: /counters could not be read (error says why). */
  sendErrors: Record<string, number> | null;
  error?: string;
}

/** The status port of a daemon by its node name (lab convention), or null for the others (bird, controller). */
export function statusPortOf(name: string): number | null {
  if (name.startsWith('mux')) return 9180;
  if (name.startsWith('host')) return 9181;
  return null;
}

/** The send_error_* counters of a /counters body, or an error when it has none (an older daemon, not JSON). */
export function sendErrorsOf(body: string): Record<string, number> | string {
  let c: unknown;
  try {
    c = JSON.parse(body);
  } catch {
    return 'the answer is not JSON';
  }
  if (c === null || typeof c !== 'object') return 'the answer is not an object';
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(c as Record<string, unknown>)) if (k.startsWith('send_error_') && typeof v === 'number') out[k] = v;
  return Object.keys(out).length === 0 ? 'no send_error_ counters' : out;
}

/** Reads a daemon's counters inside its network namespace; calls back once with the sample. */
export function sampleCounters(name: string, pid: number, port: number, done: (s: CounterSample) => void): void {
  const t = Date.now();
  execFile(
    'nsenter',
    [`--net=/proc/${pid}/ns/net`, 'curl', '-sf', '-m', '2', `http://127.0.0.1:${port}/counters`],
    { timeout: 5000 },
    (err, stdout) => {
      if (err) {
        done({ t, name, pid, sendErrors: null, error: err.message.split('\n')[0]! });
        return;
      }
      const r = sendErrorsOf(stdout);
      done(typeof r === 'string' ? { t, name, pid, sendErrors: null, error: r } : { t, name, pid, sendErrors: r });
    },
  );
}

const CLOCK_TICKS = 100; // USER_HZ on Linux

/** VmRSS in kB from the text of /proc/PID/status, or null. */
export function parseVmRssKb(status: string): number | null {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  return m === null ? null : Number(m[1]);
}

/** A `NAME:  N kB` line of /proc/PID/status (RssAnon, RssFile, ...) in kB, or null. */
export function parseStatusKb(status: string, field: string): number | null {
  const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm').exec(status);
  return m === null ? null : Number(m[1]);
}

/** utime + stime in seconds from the text of /proc/PID/stat (fields 14 and 15, after the comm in parentheses). */
export function parseCpuS(stat: string): number | null {
  const close = stat.lastIndexOf(')');
  if (close < 0) return null;
  const f = stat.slice(close + 2).split(' ');
  const u = Number(f[11]);
  const s = Number(f[12]);
  return Number.isFinite(u) && Number.isFinite(s) ? (u + s) / CLOCK_TICKS : null;
}

/** "NAME PID" lines; blank lines and # comments ignored. */
export function parseDaemonList(text: string): { name: string; pid: number }[] {
  const out: { name: string; pid: number }[] = [];
  for (const line of text.split('\n')) {
    const l = line.trim();
    if (l === '' || l.startsWith('#')) continue;
    const [name, pid] = l.split(/\s+/);
    if (name !== undefined && pid !== undefined && /^\d+$/.test(pid)) out.push({ name, pid: Number(pid) });
  }
  return out;
}

export function sampleDaemon(name: string, pid: number, t: number): DaemonSample {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    if (/^State:\s+Z/m.test(status)) return { t, name, pid, rssKb: null, fds: null, cpuS: null, gone: true };
    let fds: number | null = null;
    try {
      fds = readdirSync(`/proc/${pid}/fd`).length;
    } catch {
      /* raced with its exit */
    }
    let cpuS: number | null = null;
    try {
      cpuS = parseCpuS(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      /* raced */
    }
    return {
      t,
      name,
      pid,
      rssKb: parseVmRssKb(status),
      rssAnonKb: parseStatusKb(status, 'RssAnon'),
      rssFileKb: parseStatusKb(status, 'RssFile'),
      fds,
      cpuS,
    };
  } catch {
    return { t, name, pid, rssKb: null, fds: null, cpuS: null, gone: true };
  }
}

function cpuTotals(): { busy: number; all: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const all = v.reduce((a, b) => a + b, 0);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    return { busy: all - idle, all };
  } catch {
    return null;
  }
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'daemons', value: 'FILE', help: '"NAME PID" lines, re-read at every sample' },
  { name: 'out', value: 'FILE', help: 'JSON lines are appended here' },
  { name: 'interval-ms', value: 'MS', help: 'between samples', default: '1000' },
  {
    name: 'counters-out',
    value: 'FILE',
    help: 'send_error_* counters of the MUXes and host agents are appended here (default: counters.jsonl beside --out; "none": not read)',
  },
  { name: 'counters-interval-ms', value: 'MS', help: 'between reads of the counters', default: '2000' },
  { name: 'help', help: 'this help' },
];

const COMMAND: CommandSpec = {
  program: 'sample',
  usage: 'sample.js --daemons FILE --out FILE [--interval-ms MS]',
  options: OPTIONS,
  about: "Samples the resident memory, open file descriptors and CPU time of the soak's daemons from /proc.",
};

export const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  const daemons = one(args, 'daemons');
  const out = one(args, 'out');
  if (daemons === undefined || out === undefined) throw new UsageError('--daemons and --out are required');
  const i = one(args, 'interval-ms')!;
  if (!/^\d+$/.test(i) || Number(i) < 100) throw new UsageError('--interval-ms must be an integer >= 100');
  const ci = one(args, 'counters-interval-ms')!;
  if (!/^\d+$/.test(ci) || Number(ci) < 100) throw new UsageError('--counters-interval-ms must be an integer >= 100');
  const co = one(args, 'counters-out') ?? join(dirname(out), 'counters.jsonl');
  const intervalMs = Number(i);
  const countersOut = co === 'none' ? null : co;
  const countersMs = Number(ci);
  let lastCpu = cpuTotals();
  const once = () => {
    const t = Date.now();
    let list: { name: string; pid: number }[] = [];
    try {
      list = parseDaemonList(readFileSync(daemons, 'utf8'));
    } catch {
      /* not written yet */
    }
    const lines = list.map((d) => JSON.stringify(sampleDaemon(d.name, d.pid, t)));
    const cpu = cpuTotals();
    if (cpu !== null && lastCpu !== null && cpu.all > lastCpu.all) {
      const m: MachineSample = {
        t,
        name: 'machine',
        busy: Math.round(((cpu.busy - lastCpu.busy) / (cpu.all - lastCpu.all)) * 1000) / 1000,
      };
      lines.push(JSON.stringify(m));
    }
    lastCpu = cpu;
    if (lines.length > 0) appendFileSync(out, `${lines.join('\n')}\n`);
  };
  const readCounters = () => {
    if (countersOut === null) return;
    let list: { name: string; pid: number }[] = [];
    try {
      list = parseDaemonList(readFileSync(daemons, 'utf8'));
    } catch {
      /* not written yet */
    }
    for (const d of list) {
      const port = statusPortOf(d.name);
      if (port !== null) sampleCounters(d.name, d.pid, port, (s) => appendFileSync(countersOut!, `${JSON.stringify(s)}\n`));
    }
  };
  const timer = setInterval(once, intervalMs);
  const cTimer = setInterval(readCounters, countersMs);
  const stop = () => {
    clearInterval(timer);
    clearInterval(cTimer);
    once();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  once();
  readCounters();
  return -1;
}

if (isMain(import.meta.url)) {
  const rc = main(process.argv.slice(2));
  if (rc >= 0) process.exitCode = rc;
}
