// The soak's judge (scripts/soak/judge.ts) on synthetic runs: which failures it predicts (and which it
// does not), the health view changes it reads from the MUXes' logs, the restart windows, and the memory,
// file descriptor and crash rules. Each rule is shown failing as well as passing.
import { describe, expect, it } from 'vitest';
import { planSoak, type SoakPlan } from '../scripts/soak/plan.js';
import {
  judgeSoak,
  maglevNamer,
  median,
  parsePolicyLog,
  viewChanges,
  FD_SLACK,
  type JudgeInput,
  type PolicyApplied,
  type RunEvent,
  type RunMeta,
} from '../scripts/soak/judge.js';
import type { TrafficKind, TrafficRecord } from '../scripts/soak/traffic.js';
import { sendErrorsOf, statusPortOf, type CounterSample, type DaemonSample, type MachineSample } from '../scripts/soak/sample.js';
import { labConfig } from './helpers/lab-config.js';

const T0 = 1_800_000_000_000;
const config = labConfig();
const namer = maglevNamer(config);
const NICS = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'];
const SRC4 = '198.51.100.10';
const SRC6 = '2001:db8:c::10';

/** A source port whose 5-tuple the all-healthy Maglev table sends to `nic`. */
function portTo(nic: string, k: TrafficKind, from = 20000): number {
  const v6 = k.endsWith('6');
  for (let sp = from; sp < 65536; sp++) {
    if (namer({ k, src: v6 ? SRC6 : SRC4, sp, dst: v6 ? '2001:db8:ff::10' : '203.0.113.10', dp: k.startsWith('udp') ? 7 : 80 }) === nic)
      return sp;
  }
  throw new Error(`no port to ${nic}`);
}

interface Run extends JudgeInput {
  plan: SoakPlan;
  meta: RunMeta;
}

/**
 * A clean 60 s run at 5 flows/s per kind: every event on time, every request answered (never by h1vm1
 * while it is out), the MUXes' logs taking h1vm1 out 1.5 s after each stop and back 1.8 s after each
 * start, flat memory. With lateMs, every event starts that much after the plan (a busy machine) and the
 * MUXes' logs, the requests and mux2's lives follow the events' real times.
 */
function cleanRun(lateMs = 0): Run {
  const plan = planSoak(60, { flapNic: 'h1vm1', restartMux: 'mux2' });
  const rate = 5;
  const meta: RunMeta = {
    name: 't',
    durationS: 60,
    rate,
    keepAlive: 2,
    startMs: T0,
    endMs: T0 + 60_000,
    vip4: '203.0.113.10',
    vip6: '2001:db8:ff::10',
    httpPort: 80,
  };
  // mux2's processes: 4000 from the start, then 5000, 5001, ... after each restart
  let cur = 4000;
  let next = 5000;
  const events: RunEvent[] = plan.events.map((e) => {
    const t0 = T0 + e.atS * 1000 + 5 + lateMs;
    if (e.action === 'mux-start') cur = next++;
    return {
      atS: e.atS,
      action: e.action,
      target: e.target,
      planned: T0 + e.atS * 1000,
      t0,
      t1: t0 + (e.action === 'mux-start' ? 1100 : 300),
      ok: true,
      ...(e.action.startsWith('mux') ? { pid: cur } : {}),
    };
  });
  const policies: PolicyApplied[] = [
    { t: T0 - 20_000, mux: 'mux1', down: [], first: true },
    { t: T0 - 20_000, mux: 'mux2', down: [], first: true },
  ];
  const outOf = (t: number) => events.some((e) => e.action === 'backend-stop' && t >= e.t0 && t <= e.t0 + 15_000 + 2000);
  for (const e of events) {
    if (e.action === 'backend-stop')
      for (const [m, d] of [
        ['mux1', 1500],
        ['mux2', 1510],
      ] as const)
        policies.push({ t: e.t1 + d, mux: m, down: ['h1vm1/http80'], first: false });
    if (e.action === 'backend-start')
      for (const [m, d] of [
        ['mux1', 1800],
        ['mux2', 1805],
      ] as const)
        policies.push({ t: e.t1 + d, mux: m, down: [], first: false });
  }
  const records: TrafficRecord[] = [];
  let id = 0;
  for (const k of ['http4', 'http6', 'udp4', 'udp6'] as const) {
    for (let i = 0; i < 60 * rate; i++) {
      const t = T0 + i * (1000 / rate);
      const be = NICS.filter((n) => n !== 'h1vm1' || !outOf(t))[i % (outOf(t) ? 3 : 4)]!;
      records.push({
        k,
        id: id++,
        t0: t,
        t1: t + 3,
        src: k.endsWith('6') ? SRC6 : SRC4,
        sp: 30000 + i,
        dst: k.endsWith('6') ? '2001:db8:ff::10' : '203.0.113.10',
        dp: k.startsWith('udp') ? 7 : 80,
        be,
        err: null,
      });
    }
  }
  for (const k of ['ka4', 'ka6'] as const) {
    for (let i = 0; i < 100; i++)
      records.push({
        k,
        id: id++,
        t0: T0 + i * 500,
        t1: T0 + i * 500 + 2,
        src: SRC4,
        sp: 40000,
        dst: '203.0.113.10',
        dp: 80,
        be: 'h2vm1',
        err: null,
        conn: 0,
        seq: i,
        prev: i === 0 ? null : 'h2vm1',
      });
  }
  const samples: (DaemonSample | MachineSample)[] = [];
  const muxPids = [4000, ...events.filter((e) => e.action === 'mux-start').map((e) => e.pid as number)];
  const muxLife = (t: number): number | null => {
    // mux2's process at time t: the one started last before t, none while stopped
    let cur: number | null = muxPids[0]!;
    for (const e of events) {
      if (e.t0 > t) break;
      if (e.action === 'mux-stop') cur = null;
      if (e.action === 'mux-start' && e.t1 <= t) cur = e.pid as number;
    }
    return cur;
  };
  for (let s = 0; s <= 60; s++) {
    const t = T0 + s * 1000;
    for (const [name, p, rss] of [
      ['mux1', 4001, 125_000],
      ['host1', 4002, 140_000],
      ['host2', 4003, 140_000],
      ['controller', 4004, 57_000],
      ['bird', 4005, 4_800],
    ] as const) {
      samples.push({ t, name, pid: p, rssKb: rss + (s % 3) * 100, fds: 30, cpuS: s * 0.02 });
    }
    const m2 = muxLife(t);
    if (m2 !== null) samples.push({ t, name: 'mux2', pid: m2, rssKb: 130_000, fds: 27, cpuS: s * 0.02 });
    samples.push({ t, name: 'machine', busy: 0.4 });
  }
  return { plan, meta, events, records, samples, policies, config };
}

const failing = (r: ReturnType<typeof judgeSoak>) => r.checks.filter((c) => !c.ok).map((c) => c.name);

describe('judgeSoak', () => {
  it('passes a clean run', () => {
    const r = judgeSoak(cleanRun());
    expect(failing(r)).toEqual([]);
    expect(r.verdict).toBe('pass');
    expect(r.flaps.map((f) => [f.detectDownMs, f.detectUpMs])).toEqual([
      [1510, 1805],
      [1510, 1805],
    ]);
    expect(
      r.series
        .filter((s) => s.judged)
        .map((s) => s.name)
        .sort(),
    ).toEqual(['bird', 'controller', 'host1', 'host2', 'mux1']);
    expect(r.restarts.every((x) => (x.marginBeforeMs ?? -1) >= 0 && (x.marginAfterMs ?? -1) >= 0)).toBe(true);
  });

  it('predicts refused and reset connections to the flapping backend between its stop and the MUXes taking it out', () => {
    const run = cleanRun();
    const stop = run.events.find((e) => e.action === 'backend-stop')!;
    const rec = (k: TrafficKind, sp: number, t: number, err: string, extra: Partial<TrafficRecord> = {}): TrafficRecord => ({
      k,
      id: 90000 + sp,
      t0: t,
      t1: t + 1,
      src: k.endsWith('6') ? SRC6 : SRC4,
      sp,
      dst: k.endsWith('6') ? '2001:db8:ff::10' : '203.0.113.10',
      dp: 80,
      be: null,
      err,
      ...extra,
    });
    run.records.push(
      rec('http4', portTo('h1vm1', 'http4'), stop.t0 + 200, 'ECONNREFUSED'), // new connection, Maglev names h1vm1: predicted
      rec('http6', portTo('h1vm1', 'http6'), stop.t0 + 1700, 'ECONNREFUSED'), // just before the second MUX took it out
      rec('ka4', 41000, stop.t0 + 3, 'closed by the server', { prev: 'h1vm1', conn: 7, seq: 5, idle: true }), // on it at the stop
    );
    let r = judgeSoak(run);
    expect(failing(r)).toEqual([]);
    expect(r.predicted.map((f) => f.k)).toEqual(['http4', 'http6', 'ka4']);
    expect(r.flaps[0]!.predicted).toBe(3);
    expect(r.totals.http4).toMatchObject({ failed: 1, predicted: 1, unpredicted: 0 });

    // not predicted: another backend, too late, a timeout, any UDP failure, a keep-alive connection on another backend
    run.records.push(
      rec('http4', portTo('h2vm2', 'http4'), stop.t0 + 500, 'ECONNREFUSED'),
      rec('http4', portTo('h1vm1', 'http4', 50000), stop.t0 + 4000, 'ECONNREFUSED'),
      rec('http6', portTo('h1vm1', 'http6', 50000), stop.t0 + 500, 'timeout'),
      { ...rec('udp4', portTo('h1vm1', 'udp4'), stop.t0 + 500, 'timeout'), dp: 7 },
      rec('ka6', 42000, stop.t0 + 10, 'ECONNRESET', { prev: 'h2vm1', conn: 9, seq: 3 }),
    );
    r = judgeSoak(run);
    expect(failing(r)).toEqual(['requests: no failure but the predicted ones']);
    expect(r.unpredicted.map((f) => f.why)).toEqual([
      'to h2vm2, not the flapping one',
      "outside every flap's detection window",
      'error timeout is not a refusal, reset or close',
      'UDP: never predicted',
      'to h2vm1, not the flapping one',
    ]);
  });

  it('bounds the predicted failures of a flap', () => {
    const run = cleanRun();
    const stop = run.events.find((e) => e.action === 'backend-stop')!;
    let sp = 20000;
    for (let i = 0; i < 60; i++) {
      sp = portTo('h1vm1', 'http4', sp + 1);
      run.records.push({
        k: 'http4',
        id: 80000 + i,
        t0: stop.t0 + 10 + i * 20,
        t1: stop.t0 + 11 + i * 20,
        src: SRC4,
        sp,
        dst: '203.0.113.10',
        dp: 80,
        be: null,
        err: 'ECONNREFUSED',
      });
    }
    const r = judgeSoak(run);
    expect(r.flaps[0]!.predicted).toBe(60);
    expect(r.flaps[0]!.bound).toBeLessThan(60);
    expect(failing(r)).toEqual(['requests: predicted failures within their bound']);
  });

  it('fails a run whose MUX restart overlapped a change of the health view', () => {
    const run = cleanRun();
    const stop = run.events.find((e) => e.action === 'mux-stop')!;
    // the backend came back (as the MUXes saw it) 1 s before the restart: connections placed while it
    // was out could still be open
    run.policies!.push(
      { t: stop.t0 - 1000, mux: 'mux1', down: [], first: false },
      { t: stop.t0 - 990, mux: 'mux2', down: [], first: false },
    );
    run.policies!.push({ t: stop.t0 + 20_000 - 100, mux: 'mux1', down: ['h1vm1/http80'], first: false });
    const r = judgeSoak(run);
    expect(failing(r)).toContain('restarts: each lay where every open connection was placed under the view in force');
    expect(r.restarts[0]!.marginBeforeMs).toBeLessThan(0);
  });

  it('fails on 11 % memory growth after the warm-up, not on 9 %', () => {
    for (const [growth, ok] of [
      [0.09, true],
      [0.11, false],
    ] as const) {
      const run = cleanRun();
      for (const s of run.samples) {
        if (s.name !== 'host1') continue;
        const d = s as DaemonSample;
        // the last window (the last 16 s: a third of what follows the 12 s warm-up) grown by `growth`
        d.rssKb = s.t > T0 + 40_000 ? Math.round(140_000 * (1 + growth)) : 140_000;
      }
      const r = judgeSoak(run);
      expect(failing(r).includes('memory: resident memory after the warm-up grew at most 10 %'), `growth ${growth}`).toBe(!ok);
    }
  });

  it('fails on file descriptors that keep growing; tolerates a passing spike', () => {
    const run = cleanRun();
    for (const s of run.samples) if (s.name === 'controller' && s.t > T0 + 45_000) (s as DaemonSample).fds = 31;
    expect(failing(judgeSoak(run))).toEqual(['fds: no growth in open file descriptors']);
    const spike = cleanRun();
    for (const s of spike.samples) if (s.name === 'controller' && s.t === T0 + 58_000) (s as DaemonSample).fds = 30 + FD_SLACK;
    expect(failing(judgeSoak(spike))).toEqual([]);
  });

  it("fails when a daemon dies, but not for the restarting MUX's planned stops", () => {
    const run = cleanRun();
    run.samples = run.samples.map((s) =>
      s.name === 'host2' && s.t > T0 + 40_000 ? { ...s, rssKb: null, fds: null, cpuS: null, gone: true as const } : s,
    );
    const r = judgeSoak(run);
    expect(failing(r)).toEqual(['daemons: none died but the restarting MUX at its planned stops']);
    expect(r.checks.find((c) => !c.ok)!.detail).toContain('host2 (pid 4003)');
  });

  it('fails when the traffic fell short of its rate, or an event failed', () => {
    const run = cleanRun();
    run.records = run.records.filter((r) => !(r.k === 'udp6' && r.t0 > T0 + 50_000));
    expect(failing(judgeSoak(run))).toEqual(['traffic: the open loop kept its rate']);
    const ev = cleanRun();
    ev.events[1] = { ...ev.events[1]!, ok: false };
    expect(failing(judgeSoak(ev))).toContain('plan: every event ran, within the traffic');
  });

  it('reports events that started late, and judges the run on their real times', () => {
    const r = judgeSoak(cleanRun(6000));
    expect(failing(r)).toEqual([]);
    // every event of the plan 6.005 s late: all listed, none a failure
    expect(r.timing.latestMs).toBe(6005);
    expect(r.timing.late).toHaveLength(planSoak(60, { flapNic: 'h1vm1', restartMux: 'mux2' }).events.length);
    expect(r.flaps.map((f) => f.stopAt - T0)).toEqual([11_005, 41_005]);
  });

  it('fails a run that lateness made meaningless: cycles that never ran, or events after the traffic', () => {
    const cut = cleanRun();
    cut.events = cut.events.slice(0, -2);
    const r = judgeSoak(cut);
    expect(failing(r)).toContain('plan: every event ran, within the traffic');
    expect(r.checks.find((c) => c.name === 'plan: every event ran, within the traffic')!.detail).toContain(
      'did not run: 2 events from mux-start at 47 s on (flap cycles 2): fewer cycles than planned',
    );
    // 11 s late: the last start (planned at 50 s) ends after the 60 s of traffic
    const after = judgeSoak(cleanRun(11_000));
    expect(failing(after)).toContain('plan: every event ran, within the traffic');
    expect(after.checks.find((c) => c.name === 'plan: every event ran, within the traffic')!.detail).toContain(
      'ended after the traffic: backend-start at 50 s',
    );
  });
});

describe("the MUXes' logs", () => {
  it("parsePolicyLog: the first policy of a file is its process's start", () => {
    const log = [
      '{"ts":"2026-11-30T01:51:31.278Z","daemon":"mux2","level":"info","event":"policy_applied","generation":1,"healthChanged":false,"down":[]}',
      '{"ts":"2026-11-30T01:51:31.300Z","daemon":"mux2","level":"info","event":"tables_installed","generation":2}',
      '{"ts":"2026-11-30T01:51:40.887Z","daemon":"mux2","level":"info","event":"policy_applied","generation":2,"healthChanged":true,"down":["h1vm1/http80"]}',
      'not json "policy_applied"',
    ].join('\n');
    expect(parsePolicyLog(log)).toEqual([
      { t: Date.parse('2026-11-30T01:51:31.278Z'), mux: 'mux2', down: [], first: true },
      { t: Date.parse('2026-11-30T01:51:40.887Z'), mux: 'mux2', down: ['h1vm1/http80'], first: false },
    ]);
  });

  it('viewChanges: one change per new down set, settled when the last MUX applied it; starts are no changes', () => {
    const p = (t: number, mux: string, down: string[], first = false): PolicyApplied => ({ t, mux, down, first });
    expect(
      viewChanges([
        p(0, 'mux1', [], true),
        p(1, 'mux2', [], true),
        p(100, 'mux1', ['h1vm1/http80']),
        p(130, 'mux2', ['h1vm1/http80']),
        p(500, 'mux2', ['h1vm1/http80'], true), // mux2 restarted: its first policy is no change
        p(900, 'mux2', []),
        p(905, 'mux1', []),
      ]),
    ).toEqual([
      { down: ['h1vm1/http80'], begin: 100, settled: 130 },
      { down: [], begin: 900, settled: 905 },
    ]);
  });

  it('median', () => {
    expect([median([]), median([3]), median([4, 1, 2]), median([1, 2, 3, 10])]).toEqual([null, 3, 2, 2.5]);
  });
});

describe('judgeSoak: send errors (the sampler reads every MUX and host agent /counters)', () => {
  const ZERO = { send_error_cap: 0, send_error_raw: 0, send_error_udp: 0 };
  const HOST_ZERO = { send_error_port: 0, send_error_dsr: 0, send_error_dsr_unavailable: 0 };
  /** A read every 2 s of each daemon process in the clean run's samples, all zero. */
  function withCounters(run: ReturnType<typeof cleanRun>): ReturnType<typeof cleanRun> & {
    counters: CounterSample[];
    finalCounters: { name: string; sendErrors: Record<string, number> | null }[];
  } {
    const counters: CounterSample[] = [];
    for (const s of run.samples) {
      if (s.name === 'machine' || !/^(mux|host)/.test(s.name) || (s.t - T0) % 2000 !== 0) continue;
      const d = s as DaemonSample;
      counters.push({ t: d.t, name: d.name, pid: d.pid, sendErrors: { ...(d.name.startsWith('mux') ? ZERO : HOST_ZERO) } });
    }
    const finalCounters = ['mux1', 'mux2', 'host1', 'host2'].map((name) => ({
      name,
      sendErrors: { ...(name.startsWith('mux') ? ZERO : HOST_ZERO) },
    }));
    return { ...run, counters, finalCounters };
  }
  const NAME = 'send errors: no MUX or host agent counted a send the kernel refused';
  const detail = (r: ReturnType<typeof judgeSoak>) => r.checks.find((c) => c.name === NAME)!.detail;

  it('passes when every daemon was read and every send_error_* stayed 0', () => {
    const run = withCounters(cleanRun());
    const r = judgeSoak(run);
    expect(failing(r)).toEqual([]);
    expect(detail(r)).toContain('every send_error_* 0');
    expect(run.counters.filter((c) => c.name === 'mux2').map((c) => c.pid)).toContain(4000); // the restarting MUX's first process too
  });

  it('fails naming the daemon, its pid and the counter when one moved, even in a process that stopped since', () => {
    const run = withCounters(cleanRun());
    const first = run.counters.find((c) => c.name === 'mux2' && c.pid === 4000 && c.t > T0 + 4000)!;
    first.sendErrors = { ...first.sendErrors!, send_error_cap: 3 };
    const r = judgeSoak(run);
    expect(failing(r)).toEqual([NAME]);
    expect(detail(r)).toContain('mux2 (pid 4000): send_error_cap 3');
  });

  it('fails when a daemon was never read, or its counters after the traffic are unreadable or not 0', () => {
    let run = withCounters(cleanRun());
    run.counters = run.counters.filter((c) => c.name !== 'host2');
    run.finalCounters = run.finalCounters.filter((c) => c.name !== 'host2');
    expect(detail(judgeSoak(run))).toContain('never read: host2');
    expect(failing(judgeSoak(run))).toEqual([NAME]);
    run = withCounters(cleanRun());
    run.finalCounters[2] = { name: 'host1', sendErrors: null };
    expect(failing(judgeSoak(run))).toEqual([NAME]);
    run = withCounters(cleanRun());
    run.finalCounters[3] = { name: 'host2', sendErrors: { ...HOST_ZERO, send_error_dsr: 1 } };
    expect(detail(judgeSoak(run))).toContain('host2 (after the traffic): send_error_dsr 1');
    run = withCounters(cleanRun());
    run.counters = [];
    run.finalCounters = [];
    expect(detail(judgeSoak(run))).toContain('never read: mux1, mux2, host1, host2');
  });

  it('reads send_error_* counters out of a /counters body, and says why it cannot', () => {
    expect(sendErrorsOf('{"rx_packets": 5, "send_error_cap": 0, "send_error_raw": 2}')).toEqual({ send_error_cap: 0, send_error_raw: 2 });
    expect(sendErrorsOf('{"rx_packets": 5}')).toBe('no send_error_ counters');
    expect(sendErrorsOf('<html>')).toBe('the answer is not JSON');
    expect([statusPortOf('mux2'), statusPortOf('host1'), statusPortOf('bird'), statusPortOf('controller')]).toEqual([
      9180,
      9181,
      null,
      null,
    ]);
  });
});
