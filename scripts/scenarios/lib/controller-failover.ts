#!/usr/bin/env node
// Scenario 30 (controller-failover) and 31 (etcd-member-loss): the change driver and the verifier.
//
//   node dist/scripts/scenarios/lib/controller-failover.js changes --out LOG.jsonl --end-file F [--rate 50]
//       slbctl (its own code, in this process: cli/slbctl.ts runSlbctl, with $SLBX_CONTROLLER's list of
//       replicas, the leader first once GET /v1/replica names it, asked every 500 ms, and
//       $SLBX_TOKEN_FILE) makes changes at up to RATE per second until F exists: backend
//       weights (backend set web NIC --weight W) of the pool's four backends, each value unique,
//       drains (backend drain|undrain web NIC) of two of them, and a VIP added and deleted (vip add|del
//       203.0.113.77). One JSON line per change: what it set, slbctl's exit status and the generation it
//       answered.
//   node dist/scripts/scenarios/lib/controller-failover.js verify --log LOG.jsonl --state STATE.json
//       [--agents AGENTS.json] [--load CLIENT.json ...] [--min-acked N] [--min-rate R]
//       Checks, from the driver's log (what slbctl was told) against the final state (read from the
//       replicas afterwards): every acknowledged change is in the final state (the last acknowledged value
//       of each field, unless a later attempt that was not acknowledged may have set it: then that value
//       or the acknowledged one); the acknowledged generations strictly increase (one per change, in the
//       order they were acknowledged, across leaders); every agent (AGENTS.json: [{name, generation}])
//       applied the final generation; every load (the lab client's --json) had no failed request. The
//       rate achieved (acknowledged changes per second: overall, and the median of the run's seconds) is
//       printed, and judged against --min-rate when given.
import { readFileSync, existsSync, appendFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { runSlbctl } from '../../../cli/slbctl.js';
import { one, parseArgs, type OptionSpec } from '../../../shared/args.js';
import { isMain } from '../../../runtime/command.js';
import { Checks } from './check.js';
import { requestJson } from '../../../runtime/http-json.js';

const NICS = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'] as const;

/** The VIP the driver adds and removes (inside examples/lab.yaml's vipRanges, used by nothing else). */
export const CHURN_VIP = '203.0.113.77';

export interface ChangeRecord {
  i: number;
  /** The backend changed, or CHURN_VIP for its adds and removes. */
  nic: string;
  field: 'weight' | 'drain' | 'vip';
  value: number | boolean;
  code: number;
  generation: number | null;
  /** The answer's `changed` (false: the value was already so; the generation stays). */
  changed: boolean | null;
  startMs: number;
  endMs: number;
  error: string | null;
}

/**
 * Change i: a weight (unique per i, 1..1000) of the four backends in turn or, every fifth change, a
 * drain flip of h1vm1 or h1vm2 in turn (each drained, then undrained at its next one): at most two
 * backends are ever drained, so the rule always has backends for new flows. Every 100th change (i = 77,
 * 177, ...) adds CHURN_VIP (a TCP rule on port 80 to pool web's port 8077: direct server return needs a
 * backend port no other VIP uses) or, the next time, deletes it: 100 changes apart, more than the
 * scenario keeps in flight (64), so an add and its delete are not in flight together (value: whether
 * the VIP exists after it).
 */
export function changeOf(i: number): { argv: string[]; nic: string; field: 'weight' | 'drain' | 'vip'; value: number | boolean } {
  if (i % 100 === 77) {
    const add = Math.floor(i / 100) % 2 === 0;
    return {
      argv: add
        ? ['vip', 'add', CHURN_VIP, '--protocol', 'tcp', '--frontend-port', '80', '--backend-port', '8077', '--pool', 'web']
        : ['vip', 'del', CHURN_VIP],
      nic: CHURN_VIP,
      field: 'vip',
      value: add,
    };
  }
  if (i % 5 === 4) {
    const nic = NICS[Math.floor(i / 5) % 2]!;
    const drain = Math.floor(i / 10) % 2 === 0;
    return { argv: ['backend', drain ? 'drain' : 'undrain', 'web', nic], nic, field: 'drain', value: drain };
  }
  const nic = NICS[i % NICS.length]!;
  const weight = 1 + (i % 1000);
  return { argv: ['backend', 'set', 'web', nic, '--weight', String(weight)], nic, field: 'weight', value: weight };
}

async function drive(args: string[]): Promise<number> {
  const spec: OptionSpec[] = [
    { name: 'out', value: 'FILE', help: 'the log, one JSON line per change' },
    { name: 'end-file', value: 'FILE', help: 'stop once this file exists' },
    { name: 'rate', value: 'N', help: 'changes per second at most', default: '50' },
    { name: 'timeout-s', value: 'S', help: "slbctl's --timeout", default: '20' },
    { name: 'concurrency', value: 'N', help: 'changes in flight at once (each waits for its answer)', default: '8' },
  ];
  const a = parseArgs(args, spec);
  const out = one(a, 'out')!;
  const end = one(a, 'end-file')!;
  const intervalMs = 1000 / Number(one(a, 'rate'));
  const t0 = Date.now();
  let next = 0;
  // the replicas slbctl is given, the leader first once known: a change sent to a follower costs a
  // forward (a second HTTP hop and the follower's CPU). slbctl still goes on to the next one on an error
  const replicas = (process.env['SLBX_CONTROLLER'] ?? '').split(',').filter((u) => u !== '');
  let env: NodeJS.ProcessEnv = process.env;
  const findLeader = async () => {
    for (const u of replicas) {
      const r = await requestJson(new URL('/v1/replica', u), { timeoutMs: 1000 }).catch(() => null);
      const url = (r?.body as { leader?: { url?: unknown } } | null)?.leader?.url;
      if (r?.status !== 200 || typeof url !== 'string') continue;
      const first = replicas.find((x) => new URL(x).href === new URL(url).href);
      if (first !== undefined) env = { ...process.env, SLBX_CONTROLLER: [first, ...replicas.filter((x) => x !== first)].join(',') };
      return;
    }
  };
  // one keep-alive agent for every call, as a program that makes many changes would hold its connections
  const agent = new Agent({ keepAlive: true, maxSockets: Math.max(1, Number(one(a, 'concurrency'))) });
  let finding = false;
  const leaderTimer =
    replicas.length > 1
      ? setInterval(() => {
          if (finding) return;
          finding = true;
          void findLeader().finally(() => (finding = false));
        }, 500)
      : null;
  const change = async (i: number) => {
    const c = changeOf(i);
    let text = '';
    let err = '';
    const startMs = Date.now();
    const code = await runSlbctl(['--json', '--timeout', one(a, 'timeout-s')!, ...c.argv], {
      out: (t) => void (text += t),
      err: (t) => void (err += t),
      env,
      agent,
    });
    let generation: number | null = null;
    let changed: boolean | null = null;
    try {
      const b = JSON.parse(text) as { generation?: unknown; changed?: unknown };
      if (typeof b.generation === 'number') generation = b.generation;
      if (typeof b.changed === 'boolean') changed = b.changed;
    } catch {
      /* no answer body: a failure, recorded with its message */
    }
    const rec: ChangeRecord = {
      i,
      nic: c.nic,
      field: c.field,
      value: c.value,
      code,
      generation,
      changed,
      startMs,
      endMs: Date.now(),
      error: code === 0 ? null : err.trim().slice(0, 300),
    };
    appendFileSync(out, `${JSON.stringify(rec)}\n`);
  };
  // each worker takes the next change when it is due (RATE per second at most) and waits for its answer
  const worker = async () => {
    while (!existsSync(end)) {
      const i = next++;
      const due = t0 + i * intervalMs;
      if (Date.now() < due) await new Promise((r) => setTimeout(r, due - Date.now()));
      await change(i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Number(one(a, 'concurrency'))) }, worker));
  if (leaderTimer !== null) clearInterval(leaderTimer);
  agent.destroy();
  return 0;
}

/**
 * Acknowledged changes per second: overall (from the first change sent to the last answer), and the
 * median, 10th percentile and best of the whole seconds of the run (counted by when the answer came),
 * the first and the last whole second left out when there are five or more: the driver's start (cold
 * connections and code) and its stop (no new change once the end file exists) are not the rate it holds.
 */
export function ackRate(log: readonly ChangeRecord[]): { overall: number; seconds: number; median: number; p10: number; max: number } {
  if (log.length === 0) return { overall: 0, seconds: 0, median: 0, p10: 0, max: 0 };
  const t0 = Math.min(...log.map((r) => r.startMs));
  const t1 = Math.max(...log.map((r) => r.endMs));
  const whole = Math.max(1, Math.floor((t1 - t0) / 1000));
  const all = new Array<number>(whole).fill(0);
  for (const r of log) {
    const k = Math.floor((r.endMs - t0) / 1000);
    if (r.code === 0 && k < whole) all[k]!++;
  }
  const bins = whole >= 5 ? all.slice(1, -1) : all;
  const seconds = bins.length;
  const sorted = [...bins].sort((x, y) => x - y);
  const acked = log.filter((r) => r.code === 0).length;
  return {
    overall: acked / Math.max(0.001, (t1 - t0) / 1000),
    seconds,
    median: sorted[Math.floor((sorted.length - 1) / 2)]!,
    p10: sorted[Math.floor((sorted.length - 1) / 10)]!,
    max: sorted.at(-1)!,
  };
}

function readJsonLines<T>(path: string): T[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as T);
}

export function verifyChanges(args: string[]): Checks {
  const spec: OptionSpec[] = [
    { name: 'log', value: 'FILE', help: "the driver's log" },
    { name: 'state', value: 'FILE', help: 'GET /v1/state afterwards' },
    { name: 'agents', value: 'FILE', help: '[{name, generation}] of every agent' },
    { name: 'load', value: 'FILE', help: "the lab client's --json", repeat: true },
    { name: 'min-acked', value: 'N', help: 'acknowledged changes at least', default: '1' },
    {
      name: 'min-rate',
      value: 'R',
      help: 'the median of the per-second counts of acknowledged changes at least (0: reported only)',
      default: '0',
    },
  ];
  const a = parseArgs(args, spec);
  const c = new Checks();
  const log = readJsonLines<ChangeRecord>(one(a, 'log')!);
  const state = JSON.parse(readFileSync(one(a, 'state')!, 'utf8')) as {
    generation: number;
    config: { pools: { name: string; backends: { nic: string; weight: number; drain: boolean }[] }[]; vips: { address: string }[] };
  };
  const acked = log.filter((r) => r.code === 0);
  const failed = log.filter((r) => r.code !== 0);
  const spanS = log.length > 1 ? (log.at(-1)!.endMs - log[0]!.startMs) / 1000 : 0;
  c.note(
    `${log.length} changes in ${spanS.toFixed(1)} s (${(log.length / Math.max(spanS, 0.001)).toFixed(1)}/s), ${acked.length} acknowledged, ${failed.length} not`,
  );
  const reasons = new Map<string, number>();
  for (const r of failed)
    reasons.set((r.error ?? '').split('\n')[0]!.slice(0, 140), (reasons.get((r.error ?? '').split('\n')[0]!.slice(0, 140)) ?? 0) + 1);
  for (const [why, n] of reasons) c.note(`not acknowledged (${n}): ${why}`);
  // the rate achieved: acknowledgements per whole second of the run (from the first change sent to the
  // last answer), whose median leaves out the seconds of the failovers (a few of a run of tens)
  const rate = ackRate(log);
  const minRate = Number(one(a, 'min-rate'));
  const rateText = `${rate.overall.toFixed(1)}/s overall, the elections included; per second (${rate.seconds} whole seconds, the first and last left out): median ${rate.median}, 10th percentile ${rate.p10}, best ${rate.max}`;
  if (minRate > 0) c.check(rate.median >= minRate, `changes acknowledged per second (median) at least ${minRate}`, rateText);
  else c.note(`changes acknowledged: ${rateText}`);
  c.check(acked.length >= Number(one(a, 'min-acked')), `at least ${one(a, 'min-acked')} changes acknowledged`, `${acked.length}`);
  // the changes are made concurrently: the order they took effect is their generations' order. Each
  // acknowledged change that changed something has a generation of its own (two with one generation:
  // one was overwritten, a lost write); one that changed nothing answers the generation it found
  const changing = acked.filter((r) => r.changed !== false);
  const seen = new Map<number, number>();
  const shared: string[] = [];
  for (const r of changing) {
    if (r.generation === null) shared.push(`#${r.i} without a generation`);
    else if (seen.has(r.generation)) shared.push(`#${seen.get(r.generation)} and #${r.i}: generation ${r.generation}`);
    else seen.set(r.generation, r.i);
  }
  const gs = [...seen.keys()].sort((x, y) => x - y);
  c.check(
    shared.length === 0,
    'every acknowledged change has a generation of its own',
    shared.length === 0 ? `${changing.length} changes, generations ${gs[0]}..${gs.at(-1)}` : shared.slice(0, 5).join('; '),
  );
  // an answer never names a generation older than one acknowledged before that change was sent
  const inversions = acked.filter((r) => acked.some((p) => p.endMs < r.startMs && (p.generation ?? 0) > (r.generation ?? 0)));
  c.check(
    inversions.length === 0,
    'no change is answered with a generation older than one acknowledged before it was sent',
    inversions.length === 0
      ? 'monotonic across the failovers'
      : inversions
          .slice(0, 5)
          .map((r) => `#${r.i} at ${r.generation}`)
          .join(', '),
  );
  // every acknowledged change in the final state
  const pool = state.config.pools.find((p) => p.name === 'web');
  let lost = 0;
  const fields = new Map<string, ChangeRecord[]>();
  for (const r of log) fields.set(`${r.nic}.${r.field}`, [...(fields.get(`${r.nic}.${r.field}`) ?? []), r]);
  for (const [key, recs] of fields) {
    // the acknowledged change of this field that took effect last: the highest generation
    const lastAcked = recs
      .filter((r) => r.code === 0 && r.generation !== null)
      .sort((x, y) => x.generation! - y.generation!)
      .at(-1);
    if (lastAcked === undefined) continue;
    // a change whose answer was lost may or may not have been made: its value is allowed too if it was
    // still in flight when the last acknowledged one was sent
    const allowed = [lastAcked.value, ...recs.filter((r) => r.code !== 0 && r.endMs >= lastAcked.startMs).map((r) => r.value)];
    const b = pool?.backends.find((x) => x.nic === lastAcked.nic);
    const final =
      lastAcked.field === 'vip'
        ? state.config.vips.some((v) => v.address === lastAcked.nic)
        : b === undefined
          ? undefined
          : lastAcked.field === 'weight'
            ? b.weight
            : b.drain;
    if (!allowed.includes(final as number | boolean)) {
      lost++;
      c.check(
        false,
        `${key} holds its last acknowledged value`,
        `final ${String(final)}, acknowledged ${String(lastAcked.value)} (change #${lastAcked.i}, generation ${lastAcked.generation})`,
      );
    }
  }
  c.check(
    lost === 0,
    'every acknowledged change is in the final state',
    `${fields.size} fields compared, final generation ${state.generation}`,
  );
  c.check(
    acked.length === 0 || state.generation >= acked.at(-1)!.generation!,
    'the final generation is at or after the last acknowledged one',
    `${state.generation}`,
  );
  const agentsPath = one(a, 'agents');
  if (agentsPath !== undefined) {
    const agents = JSON.parse(readFileSync(agentsPath, 'utf8')) as { name: string; generation: number | null }[];
    const behind = agents.filter((x) => x.generation !== state.generation);
    c.check(
      agents.length > 0 && behind.length === 0,
      `every agent applied the final generation ${state.generation}`,
      behind.length === 0 ? agents.map((x) => x.name).join(', ') : behind.map((x) => `${x.name} at ${x.generation}`).join(', '),
    );
  }
  for (const p of a.values.get('load') ?? []) {
    const s = (JSON.parse(readFileSync(p, 'utf8')) as { summary: { total: number; failed: number; errors: Record<string, number> } })
      .summary;
    c.check(
      s.total > 0 && s.failed === 0,
      `no failed request in the parallel load (${p.split('/').pop()})`,
      `${s.total} requests, ${s.failed} failed ${JSON.stringify(s.errors)}`,
    );
  }
  return c;
}

if (isMain(import.meta.url)) {
  const [cmd, ...rest] = process.argv.slice(2);
  if (cmd === 'changes') {
    drive(rest).then(
      (code) => process.exit(code),
      (e) => {
        process.stderr.write(`controller-failover changes: ${(e as Error).stack ?? String(e)}\n`);
        process.exit(1);
      },
    );
  } else if (cmd === 'verify') {
    verifyChanges(rest).exit();
  } else {
    process.stderr.write(
      'usage: controller-failover.js changes --out LOG --end-file F [--rate N] | verify --log LOG --state STATE.json [...]\n',
    );
    process.exit(cmd === '--help' || cmd === '-h' ? 0 : 2);
  }
}
