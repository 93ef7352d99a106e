#!/usr/bin/env node
// The SYN flood's rate ramp (scenario 17): steps of trafgen in the client's namespace, each paced at a
// rate (-b PPS, -n PPS: one second's worth, cut after --step-cap-s when the generator falls short), the
// rate following what the lab carries. After each step it reads what reached the MUX's namespace (its
// IpInAddrErrors: the VIP is not a local address there), what the MUX read (rx_packets without ARP and
// ND) and sent (tx_packets), and what the host agents got (in_packets); the share the lab carried is the
// smaller of MUX read / arrived and host agents' in / MUX sent, per mille. The rate grows by --grow-pct
// a step while the share is >= --carried-per-mille, then, once it was not, by --grow-found-pct; it stays
// while the share is >= --hold-per-mille and falls by --fall-pct below that. So it settles at the highest
// rate the lab carries, wherever the CPU goes (the machine may be shared), and pushes past it now and
// then. Steps go on until --seconds have passed and --min-syns were sent (never past --max-seconds).
// Each counter is read after the one it is compared with, so traffic meanwhile can only make a share
// look higher, never lower.
//
// Writes one line per step to --out: "STEP START_US END_US RATE SENT ARRIVED MUX_READ MUX_TX HOST_IN
// SHARE_MUX SHARE_HOST" (counts are the step's deltas, shares per mille), and "flood START_US END_US" to
// --times (appended); trafgen's output goes to --log. Exit 1 when trafgen fails or a daemon's counters
// cannot be read.
import { appendFileSync, closeSync, openSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';

export interface RampParams {
  readonly startPps: number;
  readonly maxPps: number;
  /** Growth a step while the lab carries the rate, before it first did not (percent). */
  readonly growPct: number;
  /** Growth a step while it carries it, once it did not once (percent). */
  readonly growFoundPct: number;
  /** The share (per mille) at and above which the lab carries the rate. */
  readonly carriedPerMille: number;
  /** The share below which the rate falls. */
  readonly holdPerMille: number;
  readonly fallPct: number;
}

export const DEFAULT_RAMP: RampParams = {
  startPps: 20000,
  maxPps: 2000000,
  growPct: 40,
  growFoundPct: 10,
  carriedPerMille: 970,
  holdPerMille: 900,
  fallPct: 30,
};

/** Counters read after a step (totals since the daemons started, not deltas). */
export interface RampReading {
  /** Packets the client's interface sent. */
  readonly clientTx: number;
  /** Packets that reached the MUX's namespace for an address not its own (the VIP): IpInAddrErrors. */
  readonly arrived: number;
  /** Packets the MUX read, without ARP and neighbour discovery. */
  readonly muxRead: number;
  readonly muxTx: number;
  /** Packets the host agents read, summed. */
  readonly hostIn: number;
}

/** NUM / DEN in per mille, integer (DEN 0 counts as 1). */
export function perMille(num: number, den: number): number {
  return Math.trunc((num * 1000) / (den > 0 ? den : 1));
}

export interface RampStep {
  readonly sent: number;
  readonly arrived: number;
  readonly muxRead: number;
  readonly muxTx: number;
  readonly hostIn: number;
  readonly shareMux: number;
  readonly shareHost: number;
}

/** What a step did, from the readings before (a) and after (b) it. */
export function rampStep(a: RampReading, b: RampReading): RampStep {
  const d = {
    sent: b.clientTx - a.clientTx,
    arrived: b.arrived - a.arrived,
    muxRead: b.muxRead - a.muxRead,
    muxTx: b.muxTx - a.muxTx,
    hostIn: b.hostIn - a.hostIn,
  };
  return { ...d, shareMux: perMille(d.muxRead, d.arrived), shareHost: perMille(d.hostIn, d.muxTx) };
}

/** The next step's rate after a step at RATE in which the lab carried SHARE per mille. */
export function nextRate(rate: number, share: number, found: boolean, p: RampParams): { rate: number; found: boolean } {
  let r = rate;
  let f = found;
  if (share >= p.carriedPerMille) r = Math.trunc((r * (100 + (f ? p.growFoundPct : p.growPct))) / 100);
  else {
    f = true;
    if (share < p.holdPerMille) r = Math.trunc((r * (100 - p.fallPct)) / 100);
  }
  return { rate: Math.min(r, p.maxPps), found: f };
}

/** The line of RUN/ramp.txt for a step (the verifier's format). */
export function formatStepLine(i: number, startUs: number, endUs: number, rate: number, s: RampStep): string {
  return `${[i, startUs, endUs, rate, s.sent, s.arrived, s.muxRead, s.muxTx, s.hostIn, s.shareMux, s.shareHost].join(' ')}\n`;
}

/** The numeric counters of a daemon's GET /counters body; a counter it does not list is 0. */
export function parseCounters(body: string, what: string): Map<string, number> {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch (e) {
    throw new Error(`${what}: /counters is not JSON: ${(e as Error).message}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new Error(`${what}: /counters is not a JSON object`);
  const m = new Map<string, number>();
  for (const [k, v] of Object.entries(doc)) if (typeof v === 'number') m.set(k, v);
  return m;
}

/** The value of KEY in `nstat -asz` output (0 when it does not list it). */
export function nstatValue(text: string, key: string): number {
  for (const line of text.split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k === key && v !== undefined && /^\d+$/.test(v)) return Number(v);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// the program

interface Options {
  readonly clientNs: string;
  readonly iface: string;
  readonly trafgenFile: string;
  readonly muxNs: string;
  readonly hostNs: readonly string[];
  readonly muxPort: number;
  readonly hostPort: number;
  readonly seconds: number;
  readonly minSyns: number;
  readonly maxSeconds: number;
  readonly stepCapS: string;
  readonly out: string;
  readonly times: string;
  readonly log: string;
  readonly ramp: RampParams;
}

const nowUs = (): number => Date.now() * 1000;

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** CMD in namespace NS; its stdout, or an Error naming the command (3 tries: a loaded machine is slow). */
function inNs(ns: string, cmd: readonly string[]): string {
  let last = '';
  for (let i = 0; i < 3; i++) {
    const r = spawnSync('ip', ['netns', 'exec', ns, ...cmd], { encoding: 'utf8', timeout: 10000 });
    if (r.status === 0) return r.stdout;
    last = r.error?.message ?? `status ${r.status}: ${r.stderr.trim()}`;
    sleepMs(100);
  }
  throw new Error(`${cmd.join(' ')} in ${ns}: ${last}`);
}

function counters(ns: string, port: number): Map<string, number> {
  return parseCounters(inNs(ns, ['curl', '-sf', '-m', '5', `http://127.0.0.1:${port}/counters`]), `the daemon in ${ns}`);
}

/** The readings, each after the one it is compared with (arrived, then the MUX, then the hosts). */
function readAll(o: Options): RampReading {
  const arrived = nstatValue(inNs(o.muxNs, ['nstat', '-asz', 'IpInAddrErrors']), 'IpInAddrErrors');
  const m = counters(o.muxNs, o.muxPort);
  let hostIn = 0;
  for (const ns of o.hostNs) hostIn += counters(ns, o.hostPort).get('in_packets') ?? 0;
  const clientTx = Number(inNs(o.clientNs, ['cat', `/sys/class/net/${o.iface}/statistics/tx_packets`]).trim());
  const c = (k: string): number => m.get(k) ?? 0;
  return { clientTx, arrived, muxRead: c('rx_packets') - c('control_arp') - c('control_nd'), muxTx: c('tx_packets'), hostIn };
}

function runRamp(o: Options): number {
  const start = nowUs();
  const end = start + o.seconds * 1e6;
  const hardEnd = start + o.maxSeconds * 1e6;
  let rate = o.ramp.startPps;
  let found = false;
  let total = 0;
  let i = 0;
  let firstUs = 0;
  let t1 = start;
  let a = readAll(o);
  const log = openSync(o.log, 'a');
  try {
    while ((nowUs() < end || total < o.minSyns) && nowUs() < hardEnd) {
      i++;
      const t0 = nowUs();
      if (i === 1) firstUs = t0;
      const r = spawnSync(
        'ip',
        [
          'netns',
          'exec',
          o.clientNs,
          'timeout',
          '-s',
          'INT',
          o.stepCapS,
          'trafgen',
          '--in',
          o.trafgenFile,
          '--out',
          o.iface,
          '--cpus',
          '1',
        ].concat(['-b', `${rate}pps`, '-n', String(rate), '--no-sock-mem', '--notouch-irq', '--no-cpu-stats']),
        { stdio: ['ignore', log, log] },
      );
      if (r.status !== 0 && r.status !== 124) {
        process.stdout.write(`FAIL trafgen exited with ${r.status ?? r.signal ?? r.error?.message}\n`);
        return 1;
      }
      t1 = nowUs();
      sleepMs(50);
      const b = readAll(o);
      const s = rampStep(a, b);
      appendFileSync(o.out, formatStepLine(i, t0, t1, rate, s));
      ({ rate, found } = nextRate(rate, Math.min(s.shareMux, s.shareHost), found, o.ramp));
      total += s.sent;
      a = b;
    }
  } finally {
    closeSync(log);
  }
  appendFileSync(o.times, `flood ${firstUs} ${t1}\n`);
  return 0;
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'client-ns', value: 'NS', help: 'the namespace trafgen runs in (required)' },
  { name: 'iface', value: 'IF', help: "the client's interface trafgen sends on", default: 'eth0' },
  { name: 'trafgen-file', value: 'FILE', help: "trafgen's packet config (verify.js gen-syn-flood writes it; required)" },
  { name: 'mux-ns', value: 'NS', help: "the MUX's namespace (required)" },
  { name: 'host-ns', value: 'NS', help: "a host's namespace (at least one)", repeat: true },
  { name: 'mux-status-port', value: 'PORT', help: "the MUX's status endpoint on 127.0.0.1", default: '9180' },
  { name: 'host-status-port', value: 'PORT', help: "the host agents' status endpoint on 127.0.0.1", default: '9181' },
  { name: 'seconds', value: 'S', help: 'steps until this long has passed', default: '12' },
  { name: 'min-syns', value: 'N', help: 'and until the client sent this many packets', default: '30000' },
  { name: 'max-seconds', value: 'S', help: 'but never longer than this', default: '90' },
  { name: 'step-cap-s', value: 'S', help: 'a step ends after this even if the generator is short of its rate', default: '1.5' },
  { name: 'start-pps', value: 'PPS', help: "the first step's rate", default: String(DEFAULT_RAMP.startPps) },
  { name: 'max-pps', value: 'PPS', help: 'the rate never exceeds this', default: String(DEFAULT_RAMP.maxPps) },
  {
    name: 'grow-pct',
    value: 'P',
    help: 'growth a step while the lab carries the rate, until it first did not',
    default: String(DEFAULT_RAMP.growPct),
  },
  { name: 'grow-found-pct', value: 'P', help: 'growth a step while it carries it, after that', default: String(DEFAULT_RAMP.growFoundPct) },
  {
    name: 'carried-per-mille',
    value: 'M',
    help: 'the share at and above which the lab carries the rate',
    default: String(DEFAULT_RAMP.carriedPerMille),
  },
  { name: 'hold-per-mille', value: 'M', help: 'the share below which the rate falls', default: String(DEFAULT_RAMP.holdPerMille) },
  { name: 'fall-pct', value: 'P', help: 'how much it falls', default: String(DEFAULT_RAMP.fallPct) },
  { name: 'out', value: 'FILE', help: 'the steps, one line each (appended; required)' },
  { name: 'times', value: 'FILE', help: 'the "flood START_US END_US" line is appended here (required)' },
  { name: 'log', value: 'FILE', help: "trafgen's output (appended; required)" },
  { name: 'help', help: 'this help' },
];

export const COMMAND: CommandSpec = {
  program: 'syn-flood',
  usage:
    'node dist/scripts/lab/syn-flood.js --client-ns NS --trafgen-file FILE --mux-ns NS --host-ns NS [--host-ns NS...] --out FILE --times FILE --log FILE [ramp options]',
  options: OPTIONS,
  noPositional: true,
  about:
    "Floods in 1 s steps of paced trafgen whose rate follows what the lab carries (the MUX's and host agents' shares of what reached them), " +
    'for scenario 17; run as root. One line per step in --out.',
};

function req(args: ParsedArgs, name: string): string {
  const v = one(args, name);
  if (v === undefined || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

function int(args: ParsedArgs, name: string, min: number, max: number): number {
  const s = req(args, name);
  if (!/^\d+$/.test(s) || Number(s) < min || Number(s) > max) throw new UsageError(`--${name} must be an integer ${min}..${max}, got ${s}`);
  return Number(s);
}

/** The options as the program reads them (exported for the test). */
export function optionsOf(args: ParsedArgs): Options {
  const hostNs = args.values.get('host-ns') ?? [];
  if (hostNs.length === 0) throw new UsageError('--host-ns is required (once per host)');
  const cap = req(args, 'step-cap-s');
  if (!/^\d+(\.\d+)?$/.test(cap) || Number(cap) <= 0) throw new UsageError(`--step-cap-s must be a positive number of seconds, got ${cap}`);
  const ramp: RampParams = {
    startPps: int(args, 'start-pps', 1, 100_000_000),
    maxPps: int(args, 'max-pps', 1, 100_000_000),
    growPct: int(args, 'grow-pct', 0, 1000),
    growFoundPct: int(args, 'grow-found-pct', 0, 1000),
    carriedPerMille: int(args, 'carried-per-mille', 0, 1000),
    holdPerMille: int(args, 'hold-per-mille', 0, 1000),
    fallPct: int(args, 'fall-pct', 0, 99),
  };
  if (ramp.holdPerMille > ramp.carriedPerMille) throw new UsageError('--hold-per-mille must not exceed --carried-per-mille');
  return {
    clientNs: req(args, 'client-ns'),
    iface: req(args, 'iface'),
    trafgenFile: req(args, 'trafgen-file'),
    muxNs: req(args, 'mux-ns'),
    hostNs,
    muxPort: int(args, 'mux-status-port', 1, 65535),
    hostPort: int(args, 'host-status-port', 1, 65535),
    seconds: int(args, 'seconds', 1, 3600),
    minSyns: int(args, 'min-syns', 0, 1e9),
    maxSeconds: int(args, 'max-seconds', 1, 3600),
    stepCapS: cap,
    out: req(args, 'out'),
    times: req(args, 'times'),
    log: req(args, 'log'),
    ramp,
  };
}

const main = (argv: readonly string[]): number =>
  runCommand(COMMAND, argv, (args) => {
    const o = optionsOf(args);
    try {
      return runRamp(o);
    } catch (e) {
      process.stdout.write(`FAIL the flood's ramp: ${(e as Error).message}\n`);
      return 1;
    }
  });

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
