// `slbctl top`: a live terminal view in the spirit of top and `ipvsadm -L --rate`, over the controller's
// API. Everything it shows comes from the controller: the desired state (GET /v1/state: VIPs, rules,
// pools, weights), health (GET /v1/health) and each agent's last status heartbeat (GET
// /v1/agents/{kind}/{name}/status, every 2 s: its counters, the MUX's per-backend and per-rule counts,
// the host agent's per-backend counts). The controller only keeps each agent's last heartbeat; top sums
// over the agents itself. Rates are the difference of two heartbeats of the same agent over the time
// between them (their `at`), so they do not depend on when top polls; a row shows '-' until its agent
// sent two heartbeats.
//   per VIP rule: packets/s and bits/s the MUXes forwarded under it (the client's frames as captured),
//     new flows/s, its pool
//   per pool and backend: packets/s and bits/s the MUXes forwarded to the backend (VXLAN frames, so the
//     client's packets toward it; replies go by DSR and cross no MUX), new flows/s placed on it, share
//     of its pool's packets, health, weight, priority, whether the MUXes' tables hold it as a candidate
//     for new flows, and from its host agent the frames delivered to it and its replies sent by DSR /s
//   per MUX: packets/s and bits/s received, new flows/s, live flows, drops/s, BGP, heartbeat age
//   per host agent: packets/s and bits/s received (VXLAN), delivered/s, replies sent by DSR /s, drops/s
import { validateConfig, type SlbxConfig } from '../shared/config.js';

export interface TopIo {
  out(text: string): void;
  /** Resolves when the user asks to quit (q, Q or Ctrl-C); never when there is no terminal. */
  quit: Promise<void>;
}

export type Get = (path: string) => Promise<unknown>;

type Obj = Record<string, unknown>;

/** Counts of one backend or VIP rule in a heartbeat: packets, bytes, new flows (0 from a MUX that does not count them). */
export interface Counts {
  packets: number;
  bytes: number;
  newFlows: number;
}

/** A host agent's counts of one backend: frames delivered to its port, its replies sent by DSR. */
export interface HostCounts {
  delivered: number;
  dsr: number;
}

/** One agent's heartbeat: when, its counters, per-backend and (MUX) per-rule counts. */
export interface Beat {
  at: number;
  counters: Record<string, number>;
  /** MUX: per backend, frames forwarded to it. */
  backends: Map<string, Counts>;
  /** MUX: per VIP rule, by `${vip} ${rule}`. */
  rules: Map<string, Counts>;
  /** Host agent: per backend. */
  hostBackends: Map<string, HostCounts>;
  status: Obj;
}

/** The rates of one agent between two of its heartbeats (per second). */
export type Rates = Record<string, number>;

/** Packets/s, bits/s and new flows/s of a backend or VIP rule. */
export interface Rate {
  pps: number;
  bps: number;
  nfps: number;
}

export interface AgentView {
  kind: 'mux' | 'host';
  name: string;
  beat: Beat | null;
  /** Counter rates; null until two heartbeats. */
  rates: Rates | null;
  /** MUX: per backend. */
  backendRates: Map<string, Rate> | null;
  /** MUX: per VIP rule, by `${vip} ${rule}`. */
  ruleRates?: Map<string, Rate> | null;
  /** Host agent: per backend, delivered/s and DSR replies/s. */
  hostRates?: Map<string, HostCounts> | null;
}

/** Rates from two heartbeats of one agent: every counter's delta over the time between them. */
export function ratesBetween(
  a: Beat,
  b: Beat,
): { rates: Rates; backends: Map<string, Rate>; rules: Map<string, Rate>; hostBackends: Map<string, HostCounts> } | null {
  const dt = (b.at - a.at) / 1000;
  if (!(dt > 0)) return null;
  const d = (x: number, y: number | undefined) => Math.max(0, x - (y ?? 0)) / dt;
  const rates: Rates = {};
  for (const [k, v] of Object.entries(b.counters)) rates[k] = d(v, a.counters[k]);
  const per = (now: Map<string, Counts>, then: Map<string, Counts>) => {
    const out = new Map<string, Rate>();
    for (const [k, v] of now) {
      const p = then.get(k);
      out.set(k, { pps: d(v.packets, p?.packets), bps: d(v.bytes, p?.bytes) * 8, nfps: d(v.newFlows, p?.newFlows) });
    }
    return out;
  };
  const hostBackends = new Map<string, HostCounts>();
  for (const [k, v] of b.hostBackends) {
    const p = a.hostBackends.get(k);
    hostBackends.set(k, { delivered: d(v.delivered, p?.delivered), dsr: d(v.dsr, p?.dsr) });
  }
  return { rates, backends: per(b.backends, a.backends), rules: per(b.rules, a.rules), hostBackends };
}

export function parseBeat(body: unknown): Beat | null {
  const b = body as { status?: { status?: Obj }; at?: string } | null;
  const st = b?.status?.status;
  const at = Date.parse(b?.at ?? '');
  if (st === undefined || Number.isNaN(at)) return null;
  const num = (x: unknown) => (typeof x === 'number' ? x : 0);
  const backends = new Map<string, Counts>();
  const hostBackends = new Map<string, HostCounts>();
  for (const x of (st['backends'] ?? []) as Obj[]) {
    const name = String(x['backend']);
    if ('deliveredPackets' in x) hostBackends.set(name, { delivered: num(x['deliveredPackets']), dsr: num(x['dsrPackets']) });
    else backends.set(name, { packets: num(x['packets']), bytes: num(x['bytes']), newFlows: num(x['newFlows']) });
  }
  const rules = new Map<string, Counts>();
  for (const x of (st['rules'] ?? []) as Obj[])
    rules.set(`${String(x['vip'])} ${String(x['rule'])}`, {
      packets: num(x['packets']),
      bytes: num(x['bytes']),
      newFlows: num(x['newFlows']),
    });
  return { at, counters: (st['counters'] ?? {}) as Record<string, number>, backends, rules, hostBackends, status: st };
}

/** 1234 -> "1234", 12345 -> "12.3k", 2.5e6 -> "2.50M": at most 5 characters for columns. */
export function humanRate(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '-';
  if (v < 10) return v.toFixed(1);
  if (v < 10_000) return String(Math.round(v));
  if (v < 1e6) return `${(v / 1e3).toFixed(1)}k`;
  if (v < 1e9) return `${(v / 1e6).toFixed(2)}M`;
  return `${(v / 1e9).toFixed(2)}G`;
}

function table(header: string[], rows: string[][]): string[] {
  const w = header.map((_, i) => Math.max(...[header, ...rows].map((r) => (r[i] ?? '').length)));
  return [header, ...rows].map((r) =>
    r
      .map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!)))
      .join('  ')
      .trimEnd(),
  );
}

interface HealthRow {
  nic: string;
  probe: string;
  effective?: string;
  state: string;
  reported: boolean;
}

/** The screen, as lines, from the state, health and agents' views. Pure: tests render it too. */
export function renderTop(
  config: SlbxConfig,
  generation: number,
  health: readonly HealthRow[],
  agents: readonly AgentView[],
  nowMs: number,
  intervalS: number,
): string[] {
  const lines: string[] = [];
  const clock = new Date(nowMs).toISOString().slice(11, 19);
  lines.push(`slbctl top - ${clock} UTC  generation ${generation}  every ${intervalS} s  (rates between the agents' heartbeats; q quits)`);
  lines.push('');
  const muxes = agents.filter((a) => a.kind === 'mux');
  // a backend's or rule's rates, summed over the MUXes that reported rates (null: none did yet)
  const sumOver = (of: (m: AgentView) => Rate | undefined): Rate | null => {
    let any = false;
    const sum = { pps: 0, bps: 0, nfps: 0 };
    for (const m of muxes) {
      const r = of(m);
      if (r === undefined) continue;
      any = true;
      sum.pps += r.pps;
      sum.bps += r.bps;
      sum.nfps += r.nfps;
    }
    return any ? sum : null;
  };
  const backendRate = (nic: string) => sumOver((m) => m.backendRates?.get(nic));
  const ruleRate = (vip: string, rule: string) => sumOver((m) => m.ruleRates?.get(`${vip} ${rule}`) ?? undefined);
  // a backend's host agent: frames delivered to it and its DSR replies per second
  const hostRate = (nic: string): HostCounts | null => {
    for (const h of agents) if (h.kind === 'host' && h.hostRates?.has(nic)) return h.hostRates.get(nic)!;
    return null;
  };
  const candidates = new Set<string>();
  for (const m of muxes)
    for (const p of (m.beat?.status['pools'] ?? []) as { candidates?: string[] }[]) for (const c of p.candidates ?? []) candidates.add(c);
  const healthOf = (nic: string, probe: string): string => {
    const h = health.find((x) => x.nic === nic && x.probe === probe);
    if (h === undefined || !h.reported) return 'unknown';
    return h.effective ?? h.state;
  };
  const ruleText = (v: SlbxConfig['vips'][number], r: SlbxConfig['vips'][number]['rules'][number]) => {
    const proto = r.protocols.length === 2 ? 'all' : r.protocols[0] === 6 ? 'tcp' : 'udp';
    return `${v.address.family === 6 ? `[${v.address.text}]` : v.address.text}:${r.frontendPort}/${proto}`;
  };
  // per VIP rule: what the MUXes forwarded under it
  lines.push(
    ...table(
      ['VIP RULE', 'NAME', 'POOL', 'PKTS/S', 'BITS/S', 'NEW-FLOWS/S'],
      config.vips.flatMap((v) =>
        v.rules.map((r) => {
          const x = ruleRate(v.address.text, r.name);
          return [ruleText(v, r), r.name, r.pool, humanRate(x?.pps), humanRate(x?.bps), humanRate(x?.nfps)];
        }),
      ),
    ),
  );
  lines.push('');
  // one block per pool: the VIP rules it serves, then its backends. The MUXes count per backend (nic): a
  // pool behind several VIPs or rules shows their sum once (the VIP rule table above splits them)
  const rows: string[][] = [];
  const poolVips = new Map<number, string>();
  for (const pool of config.pools) {
    const rules = config.vips.flatMap((v) => v.rules.filter((r) => r.pool === pool.name).map((r) => ({ v, r })));
    if (rules.length === 0) continue;
    const probes = [...new Set(rules.map(({ r }) => r.probe).filter((p): p is string => p !== null))];
    const rates = pool.backends.map((b) => backendRate(b.nic));
    const known = rates.filter((x): x is Rate => x !== null);
    const total = (f: (x: Rate) => number) => (known.length === 0 ? null : known.reduce((t, x) => t + f(x), 0));
    const poolPps = total((x) => x.pps);
    const hosts = pool.backends.map((b) => hostRate(b.nic));
    const hostsKnown = hosts.filter((x): x is HostCounts => x !== null);
    const hostTotal = (f: (x: HostCounts) => number) => (hostsKnown.length === 0 ? null : hostsKnown.reduce((t, x) => t + f(x), 0));
    poolVips.set(rows.length, rules.map(({ v, r }) => ruleText(v, r)).join(' '));
    rows.push([
      `pool ${pool.name}`,
      '',
      '',
      '',
      '',
      humanRate(poolPps),
      humanRate(total((x) => x.bps)),
      humanRate(total((x) => x.nfps)),
      '',
      humanRate(hostTotal((x) => x.delivered)),
      humanRate(hostTotal((x) => x.dsr)),
    ]);
    pool.backends.forEach((b, i) => {
      const x = rates[i] ?? null;
      const h = hosts[i] ?? null;
      const share = x === null || poolPps === null || poolPps === 0 ? '-' : `${((100 * x.pps) / poolPps).toFixed(1)}%`;
      const state = !b.enabled ? 'disabled' : b.drain ? 'draining' : candidates.has(b.nic) ? 'new flows' : 'no new flows';
      const hs = probes.map((p) => healthOf(b.nic, p));
      const hl = hs.length === 0 ? 'no probe' : hs.includes('down') ? 'down' : hs.every((y) => y === 'up') ? 'up' : hs.join(',');
      rows.push([
        `  -> ${b.nic}`,
        hl,
        String(b.weight),
        String(b.priority),
        state,
        humanRate(x?.pps),
        humanRate(x?.bps),
        humanRate(x?.nfps),
        share,
        humanRate(h?.delivered),
        humanRate(h?.dsr),
      ]);
    });
  }
  // a pool's line ends with the VIP rules it serves (kept out of the column widths)
  const poolTable = table(
    ['POOL -> BACKEND', 'HEALTH', 'WEIGHT', 'PRIO', 'TABLE', 'PKTS/S', 'BITS/S', 'NEW-FLOWS/S', 'SHARE', 'DELIVERED/S', 'DSR/S'],
    rows,
  );
  lines.push(...poolTable.map((l, i) => (poolVips.has(i - 1) ? `${l}  for ${poolVips.get(i - 1)}` : l)));
  lines.push('');
  const age = (b: Beat | null) => (b === null ? '-' : `${Math.max(0, Math.round((nowMs - b.at) / 1000))}s`);
  const drops = (r: Rates | null) => (r === null ? null : Object.entries(r).reduce((s, [k, v]) => (k.startsWith('drop_') ? s + v : s), 0));
  lines.push(
    ...table(
      ['MUX', 'PKTS/S', 'BITS/S', 'NEW-FLOWS/S', 'FLOWS', 'DROPS/S', 'BGP', 'HEARTBEAT'],
      muxes.map((m) => {
        const f = m.beat?.status['flows'] as { ipv4?: number; ipv6?: number } | undefined;
        const bgp = m.beat?.status['bgp'] as { peers?: { state?: string }[] } | null | undefined;
        const bgpText = bgp === null || bgp === undefined ? '-' : (bgp.peers ?? []).map((s) => s.state ?? '?').join(',') || '-';
        const r = m.rates;
        return [
          m.name,
          humanRate(r?.['rx_packets']),
          humanRate(r === null ? null : (r['rx_bytes'] ?? 0) * 8),
          humanRate(r === null ? null : (r['flow_new'] ?? 0) + (r['flow_replaced'] ?? 0)),
          f === undefined ? '-' : String((f.ipv4 ?? 0) + (f.ipv6 ?? 0)),
          humanRate(drops(r)),
          bgpText,
          age(m.beat),
        ];
      }),
    ),
  );
  lines.push('');
  lines.push(
    ...table(
      ['HOST', 'PKTS/S', 'BITS/S', 'DELIVERED/S', 'DSR/S', 'DROPS/S', 'HEARTBEAT'],
      agents
        .filter((a) => a.kind === 'host')
        .map((h) => {
          const r = h.rates;
          return [
            h.name,
            humanRate(r?.['in_packets']),
            humanRate(r === null ? null : (r['in_bytes'] ?? 0) * 8),
            humanRate(r?.['in_delivered']),
            humanRate(r?.['out_dsr']),
            humanRate(drops(r)),
            age(h.beat),
          ];
        }),
    ),
  );
  return lines;
}

/** Runs the view until q (or `count` screens, or the quit promise); returns the exit status. */
export async function runTop(get: Get, io: TopIo, opts: { intervalS: number; count: number | null }): Promise<number> {
  const last = new Map<string, { beat: Beat; prev: Beat | null }>();
  let quit = false;
  void io.quit.then(() => (quit = true));
  let wake: () => void = () => {};
  void io.quit.then(() => wake());
  for (let n = 0; opts.count === null || n < opts.count; n++) {
    const [state, health, agents] = (await Promise.all([get('/v1/state'), get('/v1/health'), get('/v1/agents')])) as [
      { generation: number; config: unknown },
      HealthRow[],
      Obj[],
    ];
    const v = validateConfig(state.config);
    if (!v.ok) throw new Error("the controller's config does not validate here (another slbx version?)");
    const views: AgentView[] = [];
    for (const a of agents) {
      const kind = a['kind'] as 'mux' | 'host';
      const name = String(a['name']);
      const key = `${kind}/${name}`;
      // 404: no heartbeat yet (a row of dashes); anything else (401: no token) ends top with the reason
      const body = await get(`/v1/agents/${kind}/${encodeURIComponent(name)}/status`).catch((e: { status?: number }) =>
        e.status === 404 ? null : Promise.reject(e),
      );
      const beat = parseBeat(body);
      let e = last.get(key);
      if (beat !== null && (e === undefined || beat.at !== e.beat.at)) {
        e = { beat, prev: e?.beat ?? null };
        last.set(key, e);
      }
      const r = e?.prev ? ratesBetween(e.prev, e.beat) : null;
      views.push({
        kind,
        name,
        beat: e?.beat ?? null,
        rates: r?.rates ?? null,
        backendRates: r?.backends ?? null,
        ruleRates: r?.rules ?? null,
        hostRates: r?.hostBackends ?? null,
      });
    }
    views.sort((a, b) => a.kind.localeCompare(b.kind) || a.name.localeCompare(b.name, undefined, { numeric: true }));
    const screen = renderTop(v.config, state.generation, health, views, Date.now(), opts.intervalS);
    // home, clear, draw
    io.out(`\x1b[H\x1b[2J${screen.join('\n')}\n`);
    if (quit || (opts.count !== null && n + 1 >= opts.count)) break;
    await new Promise<void>((r) => {
      const t = setTimeout(r, opts.intervalS * 1000);
      wake = () => {
        clearTimeout(t);
        r();
      };
    });
    if (quit) break;
  }
  return 0;
}

/**
 * Keys on a terminal: q, Q or Ctrl-C (raw mode: no Enter needed) resolve `quit`; SIGINT and SIGTERM too.
 * Without a terminal on stdin only the signals do. close() restores the terminal.
 */
export function terminalQuit(): { quit: Promise<void>; close(): void } {
  let resolve!: () => void;
  const quit = new Promise<void>((r) => (resolve = r));
  const stdin = process.stdin;
  const tty = stdin.isTTY === true;
  const onData = (d: Buffer) => {
    const s = d.toString('latin1');
    if (s.includes('q') || s.includes('Q') || s.includes('\x03')) resolve();
  };
  const onSignal = () => resolve();
  if (tty) {
    stdin.setRawMode(true);
    stdin.on('data', onData);
    stdin.resume();
  }
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    quit,
    close() {
      if (tty) {
        stdin.off('data', onData);
        stdin.setRawMode(false);
        stdin.pause();
      }
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
