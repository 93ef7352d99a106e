#!/usr/bin/env node
// The soak's sampler (scripts/soak.sh, docs/soak.md): every --interval-ms, for each daemon listed in
// --daemons (lines "NAME PID", re-read every time: the soak rewrites it when a MUX restarts), one JSON
// line to --out with its resident memory (VmRSS), open file descriptors (entries of /proc/PID/fd) and
// CPU time; plus one line for the whole machine's CPU. Reads /proc only, signals nothing. SIGTERM or
// SIGINT: one last sample, then exit.
//   node dist/scripts/soak/sample.js --daemons daemons.txt --out samples.jsonl [--interval-ms 1000]
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { formatHelp, isMain, one, parseArgs, UsageError, type OptionSpec } from '../../cli/args.js';

export interface DaemonSample {
  /** Epoch milliseconds. */
  t: number;
  name: string;
  pid: number;
  rssKb: number | null;
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

const CLOCK_TICKS = 100; // USER_HZ on Linux

/** VmRSS in kB from the text of /proc/PID/status, or null. */
export function parseVmRssKb(status: string): number | null {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
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
    try { fds = readdirSync(`/proc/${pid}/fd`).length; } catch { /* raced with its exit */ }
    let cpuS: number | null = null;
    try { cpuS = parseCpuS(readFileSync(`/proc/${pid}/stat`, 'utf8')); } catch { /* raced */ }
    return { t, name, pid, rssKb: parseVmRssKb(status), fds, cpuS };
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
  { name: 'help', help: 'this help' },
];

export function main(argv: readonly string[]): number {
  let daemons: string, out: string, intervalMs: number;
  try {
    const args = parseArgs(argv, OPTIONS);
    if (args.flags.has('help')) {
      process.stdout.write(formatHelp('sample.js --daemons FILE --out FILE [--interval-ms MS]', 'Samples the resident memory, open file descriptors and CPU time of the soak\'s daemons from /proc.', OPTIONS));
      return 0;
    }
    const d = one(args, 'daemons');
    const o = one(args, 'out');
    if (d === undefined || o === undefined) throw new UsageError('--daemons and --out are required');
    const i = one(args, 'interval-ms')!;
    if (!/^\d+$/.test(i) || Number(i) < 100) throw new UsageError('--interval-ms must be an integer >= 100');
    daemons = d; out = o; intervalMs = Number(i);
  } catch (e) {
    if (e instanceof UsageError) { process.stderr.write(`sample: ${e.message}\n`); return 2; }
    throw e;
  }
  let lastCpu = cpuTotals();
  const once = () => {
    const t = Date.now();
    let list: { name: string; pid: number }[] = [];
    try { list = parseDaemonList(readFileSync(daemons, 'utf8')); } catch { /* not written yet */ }
    const lines = list.map((d) => JSON.stringify(sampleDaemon(d.name, d.pid, t)));
    const cpu = cpuTotals();
    if (cpu !== null && lastCpu !== null && cpu.all > lastCpu.all) {
      const m: MachineSample = { t, name: 'machine', busy: Math.round(((cpu.busy - lastCpu.busy) / (cpu.all - lastCpu.all)) * 1000) / 1000 };
      lines.push(JSON.stringify(m));
    }
    lastCpu = cpu;
    if (lines.length > 0) appendFileSync(out, `${lines.join('\n')}\n`);
  };
  const timer = setInterval(once, intervalMs);
  const stop = () => { clearInterval(timer); once(); process.exit(0); };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  once();
  return -1;
}

if (isMain(import.meta.url)) {
  const rc = main(process.argv.slice(2));
  if (rc >= 0) process.exitCode = rc;
}
