// Verifiers of the restart scenarios, from the captures, the clients' records, the daemons' logs,
// counters and the router's route polls:
//   host-restart  (19) a host agent killed and stopped while long-lived connections run through it:
//                 every connection completes on its backend, none reset; while the agent is down VXLAN
//                 reaches the host and nothing reaches its backends; after each start the connections
//                 of its backends resume (packets of the same 5-tuples, no new SYN); new connections
//                 reach its backends at once; no probe went down
//   mux-restart   (20) a MUX stopped (SIGTERM) and started again while long-lived connections and new
//                 ones run: it withdrew before it stopped forwarding, the router dropped and re-added it,
//                 no request failed, every connection stayed on the backend the Maglev table names, the
//                 restarted MUX carried established connections again (its flow table empty) and new ones
// Usage: node verify.js host-restart|mux-restart --run RUNDIR ... (see each function)
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields } from './check.js';
import { birdEstablished, birdLog, expectedBackend, ipOf, readJson, readPolls } from './bgp.js';
import { binomialBounds, fmtBinomial, withinBinomial } from './stats.js';
import { readClientJson } from '../../lab/client.js';

const TCP_FIN = 0x01;
const TCP_SYN = 0x02;
const TCP_RST = 0x04;

/** One restart: the signal sent, the process gone (the stop returned), the new one started, ready. */
interface Restart {
  sig: string;
  stopUs: number;
  goneUs: number;
  startUs: number;
  readyUs: number;
}

function readRestarts(path: string): Restart[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [sig, a, g, b, c] = l.trim().split(/\s+/);
      return { sig: sig!, stopUs: Number(a), goneUs: Number(g), startUs: Number(b), readyUs: Number(c) };
    });
}

const ms = (us: number) => (us / 1000).toFixed(0);
const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

/** Every log event of a daemon, over its rotated logs too (NODE.log.1, .2, ... then NODE.log): [file, parsed]. */
function logEvents(run: string, node: string): { file: string; e: Record<string, unknown> }[] {
  const dir = join(run, 'logs');
  const files = readdirSync(dir)
    .filter((f) => f === `${node}.log` || f.startsWith(`${node}.log.`))
    .sort((a, b) => (a === `${node}.log` ? 1 : b === `${node}.log` ? -1 : Number(a.split('.').pop()) - Number(b.split('.').pop())));
  const out: { file: string; e: Record<string, unknown> }[] = [];
  for (const f of files) {
    for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        out.push({ file: f, e: JSON.parse(line) as Record<string, unknown> });
      } catch {
        /* a torn last line of a killed process */
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// 19-host-agent-restart
// --run R --vip A --port N --host H --restarts F --hold-json F --http-json F --counters F --health F
// [--slow-json F --slow-ms MS]

export function verifyHostRestart(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const port = Number(need(f, 'port'));
  const host = need(f, 'host');
  const config = loadConfig(join(run, 'config.yaml'));
  const restarts = readRestarts(need(f, 'restarts'));
  const c = new Checks();
  const nics = config.nics.filter((n) => n.host === host);
  const nicNames = new Set(nics.map((n) => n.name));
  const nicAddr = new Map(nics.map((n) => [n.name, n.address4?.text ?? '']));
  c.check(
    restarts.length >= 2 && restarts.every((r) => r.stopUs <= r.goneUs && r.goneUs < r.startUs && r.startUs <= r.readyUs),
    `${host}'s agent was restarted ${restarts.length} times (${restarts.map((r) => `SIG${r.sig}`).join(', ')})`,
    restarts
      .map(
        (r) =>
          `gone ${ms(r.goneUs - r.stopUs)} ms after the signal, down ${ms(r.startUs - r.goneUs)} ms, ready ${ms(r.readyUs - r.startUs)} ms after its start`,
      )
      .join('; '),
  );

  // 1. the long-lived connections
  const hold = readClientJson(need(f, 'hold-json'), 'hold');
  const recs = hold.records;
  const failed = recs.filter((r) => !r.ok);
  c.check(
    recs.length >= 100 && failed.length === 0,
    `all ${recs.length} long-lived connections opened before the restarts completed`,
    `${recs.length - failed.length} ok; ${fmtCounts(countBy(failed, (r) => r.error ?? 'no answer'))}`,
  );
  c.check(
    recs.every((r) => r.error !== 'ECONNRESET'),
    'none was reset',
  );
  c.check(
    recs.every((r) => r.backends.length === 1),
    'each was answered by one backend all along',
    `${recs.filter((r) => r.backends.length !== 1).length} saw another`,
  );
  c.check(
    hold.summary.answered === hold.summary.requests,
    'every request on them was answered',
    `${hold.summary.answered} of ${hold.summary.requests}`,
  );
  const mine = recs.filter((r) => r.backends.length === 1 && nicNames.has(r.backends[0]!));
  const others = recs.filter((r) => r.backends.length === 1 && !nicNames.has(r.backends[0]!));
  // a connection of host's backends asks every 200 ms: its request in the gap waits at least the gap minus one interval
  const shortest = Math.min(...restarts.map((r) => (r.startUs - r.goneUs) / 1000)) - 400;
  const gapsMine = mine.map((r) => r.maxGapMs as number);
  const gapsOthers = others.map((r) => r.maxGapMs as number);
  c.check(
    mine.length > 0 && gapsMine.every((g) => g >= shortest),
    `the ${mine.length} connections on ${host}'s backends (${[...nicNames].join(', ')}) waited out each outage (longest wait >= ${shortest.toFixed(0)} ms each: the gap, less one interval)`,
    `longest wait per connection: min ${Math.min(...gapsMine)} / median ${quantile(gapsMine, 0.5)} / max ${Math.max(...gapsMine)} ms`,
  );
  c.note(
    `the ${others.length} connections on the other host's backends: longest wait min ${Math.min(...gapsOthers)} / median ${quantile(gapsOthers, 0.5)} / max ${Math.max(...gapsOthers)} ms (TCP's retransmission backoff explains waits beyond the gap on ${host})`,
  );

  // 2. captures: nothing delivered during the outages, VXLAN still arriving; the same 5-tuples after
  const clientSources = new Set(recs.map((r) => r.sourceAddress as string));
  const delivered = new Map<string, { us: number; syn: boolean; rst: boolean }[]>(); // "nic src:sport" -> packets to the backend
  let rstOnMine = 0;
  // an RST on a connection both sides had closed (FIN each way) answers a late duplicate ACK (the client
  // acknowledging a FIN the server retransmitted under load) after the server's socket was gone: no
  // connection is reset by it; counted apart
  let rstAfterClose = 0;
  const fins = new Map<string, number>(); // "client:port nic" -> 1 client FIN, 2 server FIN
  for (const n of nics) {
    for (const p of loadCapture(join(run, 'pcaps', `${n.name}.pcap`))) {
      const ip = ipOf(p);
      const t = p.d.first('tcp');
      if (ip === undefined || t === undefined) continue;
      const fromClient = clientSources.has(ip.src);
      const conn = fromClient ? `${ip.src}:${t.srcPort} ${n.name}` : `${ip.dst}:${t.dstPort} ${n.name}`;
      if ((t.flags & TCP_FIN) !== 0 && (fromClient || clientSources.has(ip.dst)))
        fins.set(conn, (fins.get(conn) ?? 0) | (fromClient ? 1 : 2));
      if ((t.flags & TCP_RST) !== 0 && (fromClient || clientSources.has(ip.dst))) {
        if (fins.get(conn) === 3) rstAfterClose++;
        else rstOnMine++;
      }
      if (ip.dst !== nicAddr.get(n.name) || t.dstPort !== port || !clientSources.has(ip.src)) continue;
      const k = `${n.name} ${ip.src}:${t.srcPort}`;
      const list = delivered.get(k) ?? [];
      list.push({ us: p.tsUs, syn: (t.flags & TCP_SYN) !== 0, rst: (t.flags & TCP_RST) !== 0 });
      delivered.set(k, list);
    }
  }
  c.check(
    rstOnMine === 0,
    `no RST in the captures of ${host}'s backends on a connection not closed both ways`,
    `${rstOnMine}; ${rstAfterClose} after a FIN each way (answers to a late duplicate ACK)`,
  );
  const hostCap = loadCapture(join(run, 'pcaps', `${host}.pcap`));
  const toolsVx: number[] = [];
  for (const r of restarts) {
    const from = r.goneUs + 20_000; // a frame already on its way when the process ended
    let inGap = 0;
    for (const list of delivered.values()) inGap += list.filter((x) => x.us >= from && x.us < r.startUs).length;
    const vx = hostCap.filter((p) => p.tsUs >= from && p.tsUs < r.startUs && p.d.first('vxlan') !== undefined).length;
    toolsVx.push(vx);
    c.check(
      vx > 0 && inGap === 0,
      `SIG${r.sig}: while ${host}'s agent was down, VXLAN still reached ${host} and nothing reached its backends`,
      `${vx} VXLAN packets at ${host}, ${inGap} client packets at its backends in ${ms(r.startUs - from)} ms`,
    );
  }
  const vxTimes = tsharkFields(join(run, 'pcaps', `${host}.pcap`), ['frame.time_epoch'], 'vxlan');
  if (vxTimes !== null) {
    const ts = vxTimes.map((row) => Math.round(Number(row[0]) * 1e6));
    const tv = restarts.map((r) => ts.filter((t) => t >= r.goneUs + 20_000 && t < r.startUs).length);
    c.check(
      tv.join(',') === toolsVx.join(','),
      'tshark counts the same VXLAN packets in those gaps',
      `tshark ${tv.join(', ')}; slbx ${toolsVx.join(', ')}`,
    );
  }
  let resumed = 0;
  let newSyn = 0;
  for (const r of mine) {
    const list = delivered.get(`${r.backends[0]} ${r.sourceAddress}:${r.sourcePort}`) ?? [];
    const synUs = list.filter((x) => x.syn).map((x) => x.us);
    if (synUs.length > 1 || synUs.some((u) => u > restarts[0]!.stopUs)) newSyn++;
    if (restarts.every((rs) => list.some((x) => x.us >= rs.startUs && !x.syn))) resumed++;
  }
  c.check(
    mine.length > 0 && resumed === mine.length,
    `every connection on ${host}'s backends went on after each restart: the new agent delivered packets of the same 5-tuple`,
    `${resumed} of ${mine.length}`,
  );
  c.check(newSyn === 0, 'none of them was opened again (one SYN per 5-tuple, before the first restart)', `${newSyn}`);

  // 3. the new agent: it forwarded both ways, and no probe went down
  const counters = readJson(need(f, 'counters'));
  c.check(
    (counters.in_delivered ?? 0) > 0 && (counters.out_dsr ?? 0) > 0,
    `the last ${host} agent delivered inbound and sent replies straight to the router (DSR)`,
    `in_delivered ${counters.in_delivered ?? 0}, out_dsr ${counters.out_dsr ?? 0}, drops ${
      Object.entries(counters)
        .filter(([k, v]) => k.startsWith('drop_') && Number(v) > 0)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none'
    }`,
  );
  // the return path's state across each restart (host-agent/flow-snapshot.ts, flow-journal.ts): each new
  // agent read the flows its predecessor had recorded (SIGKILL: its last periodic snapshot and the journal
  // written since; SIGTERM: the snapshot written at stop), so a backend's first segment after the start
  // (a response retransmitted) finds its flow. Every connection on the host's backends was open before
  // each restart and lives on: each new agent must have at least that many return-path entries at its start
  const events = logEvents(run, host);
  const files = [...new Set(events.map((x) => x.file))];
  // with --workers N each worker loads its own set (and its share of the others'): one flow_snapshot_loaded
  // line per worker, their entries (dsrAfter: each worker's table) and counts added up
  const loads = files.slice(1).map((file) => {
    const ls = events.filter((x) => x.file === file && String(x.e['event']).startsWith('flow_snapshot_')).map((x) => x.e);
    if (ls.length <= 1 || ls.some((l) => l['event'] !== 'flow_snapshot_loaded')) return ls[0];
    const sum = (f: (l: Record<string, unknown>) => unknown) => ls.reduce((a, l) => a + Number(f(l) ?? 0), 0);
    const j = (l: Record<string, unknown>) => (l['journal'] ?? {}) as Record<string, unknown>;
    return {
      event: 'flow_snapshot_loaded',
      workers: ls.length,
      dsrAfter: sum((l) => l['dsrAfter']),
      dsrRestored: sum((l) => l['dsrRestored']),
      dsrExpired: sum((l) => l['dsrExpired']),
      ageMs: Math.max(...ls.map((l) => Number(l['ageMs'] ?? 0))),
      journal: {
        dsrReplayed: sum((l) => j(l)['dsrReplayed']),
        files: sum((l) => j(l)['files']),
        torn: sum((l) => j(l)['torn']),
        damaged: sum((l) => j(l)['damaged']),
      },
    } as Record<string, unknown>;
  });
  const journalOf = (l: Record<string, unknown>) => (l['journal'] ?? {}) as Record<string, unknown>;
  c.check(
    loads.length === restarts.length &&
      loads.every((l) => l?.['event'] === 'flow_snapshot_loaded' && Number(l['dsrAfter']) >= mine.length && journalOf(l)['damaged'] === 0),
    `each restarted agent had, at its start, a return-path entry for each of the ${mine.length} connections on ${host}'s backends (snapshot and journal)`,
    loads
      .map((l, i) =>
        l === undefined
          ? `after SIG${restarts[i]?.sig}: no snapshot read`
          : l['event'] !== 'flow_snapshot_loaded'
            ? `after SIG${restarts[i]?.sig}: ${String(l['event'])} ${String(l['reason'] ?? l['error'] ?? '')}`
            : `after SIG${restarts[i]?.sig}: ${l['dsrAfter']} entries${l['workers'] !== undefined ? ` (${l['workers']} workers)` : ''}: ${l['dsrRestored']} restored from the snapshot (${l['ageMs']} ms old, ${l['dsrExpired']} expired), ` +
              `${journalOf(l)['dsrReplayed']} journal records replayed (${journalOf(l)['files']} file(s), ${journalOf(l)['torn']} torn, ${journalOf(l)['damaged']} damaged)`,
      )
      .join('; '),
  );
  // what each restarted agent did with flows it did not have: learned from a client's segment without SYN
  // (re-learned), and backend segments dropped as unsolicited (the middle agent's counters are in its stop
  // line, the last one's in the counters file)
  const stopCounters = files
    .slice(1, -1)
    .map((file) => events.find((x) => x.file === file && x.e['event'] === 'host_agent_stopped')?.e['counters']);
  const perAgent = [...stopCounters, counters].map((k: any, i) =>
    k === undefined
      ? `agent ${i + 2}: no counters`
      : `agent ${i + 2}: ${k.dsr_flows_restored ?? 0} restored, ${k.dsr_flows_replayed ?? 0} replayed, ${k.dsr_flows_learned ?? 0} learned (${k.dsr_flows_learned_midstream ?? 0} without SYN), ${k.drop_out_dsr_unsolicited ?? 0} dropped as unsolicited`,
  );
  c.note(`the restarted agents' return path: ${perAgent.join('; ')}`);
  // the server-first requests, sent just before the SIGKILL: the server answers after its SLOW_MS, when
  // the client has nothing to send; answered only if the new agent knew their flows
  if (f.get('slow-json') !== undefined) {
    const slow = readClientJson(need(f, 'slow-json'), 'http');
    const slowMs = Number(need(f, 'slow-ms'));
    const bad = slow.records.filter((r) => !r.ok);
    const onHost = slow.records.filter((r) => r.ok && nicNames.has(r.backend ?? ''));
    const lat = onHost.map((r) => Math.round(Number(r.latencyMs)));
    c.check(
      slow.records.length > 0 && bad.length === 0 && onHost.length > 0,
      `the ${slow.records.length} server-first requests opened just before the SIGKILL were all answered, ${onHost.length} of them by ${host}'s backends across its restart`,
      `${bad.length} failed (${fmtCounts(countBy(bad, (r) => r.error ?? '?'))}); answered by ${host}'s backends after ${lat.length ? `${Math.min(...lat)}-${Math.max(...lat)}` : '-'} ms (the server waits ${slowMs} ms)`,
    );
  }
  const transitions = events.filter((x) => x.e['event'] === 'probe_state');
  const downs = transitions.filter((x) => x.e['to'] === 'down');
  const agents = new Set(transitions.map((x) => x.file)).size;
  c.check(
    downs.length === 0 && agents === restarts.length + 1,
    `no probe of ${host} went down across its restarts (a restarted agent reports nothing down before a failure)`,
    `${downs.length} down transitions; ${transitions.length - downs.length} others in the logs of ${agents} agent processes`,
  );
  const health: any[] = readJson(need(f, 'health'));
  const notUp = health.filter((h) => h.effective !== 'up');
  c.check(
    health.length > 0 && notUp.length === 0,
    'the controller sees every backend up at the end',
    notUp.map((h) => `${h.nic}/${h.probe} ${h.effective}`).join(', ') || `${health.length} rows`,
  );

  // 4. new connections right after the restarts: the host's backends take their share at once
  const http = readClientJson(need(f, 'http-json'), 'http');
  const bad = http.records.filter((r) => !r.ok);
  const per = countBy(
    http.records.filter((r) => r.ok),
    (r) => r.backend ?? '?',
  );
  c.check(
    http.records.length > 0 && bad.length === 0,
    `${http.records.length} new connections after the restarts all succeeded`,
    `${bad.length} failed; ${fmtCounts(countBy(bad, (r) => r.error ?? '?'))}`,
  );
  // its share: the weight of each backend over the pool's (the config), a binomial count over the
  // connections (each one's 5-tuple hash is an independent draw), within 6 standard deviations
  const rule = config.vips.flatMap((v) => v.rules).find((r) => r.frontendPort === port && r.protocol === 'tcp');
  const pool = config.pools.find((p) => p.name === rule?.pool);
  const totalWeight = pool === undefined ? 0 : pool.backends.reduce((a, b) => a + b.weight, 0);
  const shares = [...nicNames].map((n) => {
    const w = pool?.backends.find((b) => b.nic === n)?.weight ?? 0;
    const b = binomialBounds(http.records.length, totalWeight > 0 ? w / totalWeight : 0);
    return { n, k: per.get(n) ?? 0, b };
  });
  c.check(
    totalWeight > 0 && shares.every((x) => x.b.p > 0 && withinBinomial(x.k, x.b)),
    `each of ${host}'s backends got its share of them at once (its weight over the pool's: ${shares.map((x) => `${x.n} ${(100 * x.b.p).toFixed(0)} %`).join(', ')}; a binomial count, within 6 standard deviations)`,
    `${shares.map((x) => `${x.n} ${fmtBinomial(x.k, x.b)}`).join('; ')}; all: ${fmtCounts(per)}`,
  );
  return c;
}

// ---------------------------------------------------------------------------------------------
// 20-mux-restart
// --run R --vip A --port N --mux M --restarts F --polls F --hold-json F --http-json F --counters F
//   --bird-protocols F [--withdraw-limit-ms MS] [--rejoin-limit-ms MS]
// The times of the withdrawal and the rejoin are measured and printed; they are asserted only when a
// limit is given (the scenario gives none: a verdict must not depend on how busy the machine is).

export function verifyMuxRestart(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const mux = need(f, 'mux');
  const withdrawLimit = f.has('withdraw-limit-ms') ? Number(f.get('withdraw-limit-ms')) : Infinity;
  const rejoinLimit = f.has('rejoin-limit-ms') ? Number(f.get('rejoin-limit-ms')) : Infinity;
  const within = (limit: number) => (Number.isFinite(limit) ? ` within ${limit} ms` : '');
  const measured = (limit: number) => (Number.isFinite(limit) ? '' : '; measured, not asserted');
  const config = loadConfig(join(run, 'config.yaml'));
  const [r] = readRestarts(need(f, 'restarts'));
  const c = new Checks();
  if (r === undefined) {
    c.check(false, 'the restart was recorded');
    return c;
  }
  const pa = config.muxes.find((m) => m.name === mux)!.address.text;
  const otherPas = config.muxes
    .filter((m) => m.name !== mux)
    .map((m) => m.address.text)
    .sort();

  // 1. the router: the MUX's next hop left after the SIGTERM and came back after the start
  const polls = readPolls(need(f, 'polls'));
  const before = polls.filter((p) => p.us < r.stopUs);
  const gone = polls.find((p) => p.us >= r.stopUs && !p.hops.includes(pa));
  const back = polls.find((p) => p.us >= r.startUs && p.hops.includes(pa));
  c.check(
    before.length > 0 && before.every((p) => p.hops.includes(pa)),
    `before the restart the router routed ${vip} over ${mux}`,
    `${before.length} polls`,
  );
  const goneMs = gone === undefined ? Infinity : (gone.us - r.stopUs) / 1000;
  c.check(
    gone !== undefined && goneMs <= withdrawLimit && gone.hops.slice().sort().join(',') === otherPas.join(','),
    `after the SIGTERM the router dropped ${mux} (its withdrawal)${within(withdrawLimit)} and kept the others`,
    gone === undefined ? 'never' : `${goneMs.toFixed(0)} ms${measured(withdrawLimit)}; next hops ${gone.hops.join(', ')}`,
  );
  const backMs = back === undefined ? Infinity : (back.us - r.startUs) / 1000;
  c.check(
    back !== undefined && backMs <= rejoinLimit,
    `after its start the router routed ${vip} over ${mux} again${within(rejoinLimit)}`,
    back === undefined
      ? 'never'
      : `${backMs.toFixed(0)} ms (process start, BGP session, announcement, BIRD, kernel)${measured(rejoinLimit)}`,
  );
  const inGap = polls.filter((p) => gone !== undefined && p.us > gone.us && p.us < r.startUs && p.hops.includes(pa)).length;
  c.check(inGap === 0, `while ${mux} was down the router never routed over it`, `${inGap} polls`);
  const shut = birdLog(run, new RegExp(`${mux}: .*(Administrative shutdown|Received: Administrative)`)).filter(
    (x) => x.ms >= r.stopUs / 1000 - 1000,
  );
  c.check(
    shut.length > 0,
    `BIRD received Cease / Administrative Shutdown from ${mux}`,
    shut[0]?.line.replace(/^\S+ \S+ /, '') ?? 'not in bird.log',
  );
  const protos = birdEstablished(readFileSync(need(f, 'bird-protocols'), 'utf8'));
  c.check(
    config.muxes.every((m) => protos.includes(m.name)),
    'at the end every MUX session is Established',
    protos.join(', '),
  );

  // 2. the old process withdrew before it stopped forwarding, and nothing reached it after
  const ev = logEvents(run, mux);
  const at = (file: string, event: string) => {
    const x = ev.find((e) => e.file === file && e.e['event'] === event);
    return x === undefined ? null : Date.parse(String(x.e['ts']));
  };
  const oldLog = ev.find((e) => e.file !== `${mux}.log`)?.file ?? null;
  const withdrawnMs = oldLog === null ? null : at(oldLog, 'bgp_shutdown');
  const stoppedMs = oldLog === null ? null : at(oldLog, 'mux_stopped');
  c.check(
    withdrawnMs !== null && stoppedMs !== null && withdrawnMs < stoppedMs,
    `the stopped ${mux} withdrew (and sent Cease) before it stopped forwarding`,
    withdrawnMs === null || stoppedMs === null
      ? `log events missing in ${oldLog ?? 'the rotated log'}`
      : `withdrawn at +${(withdrawnMs - r.stopUs / 1000).toFixed(0)} ms, stopped forwarding at +${(stoppedMs - r.stopUs / 1000).toFixed(0)} ms after the SIGTERM`,
  );
  const muxCap = loadCapture(join(run, 'pcaps', `${mux}.pcap`)).filter((p) => {
    const ip = ipOf(p);
    const t = p.d.first('tcp');
    return ip !== undefined && t !== undefined && ip.dst === vip && t.dstPort === port && p.d.first('vxlan') === undefined;
  });
  const lateOld = stoppedMs === null ? -1 : muxCap.filter((p) => p.tsUs / 1000 > stoppedMs && p.tsUs < r.startUs).length;
  c.check(lateOld === 0, `no packet reached ${mux} between its stop and its start`, `${lateOld}`);

  // 3. the connections: no failure, each on the backend the Maglev table names
  const hold = readClientJson(need(f, 'hold-json'), 'hold');
  const recs = hold.records;
  const failed = recs.filter((x) => !x.ok);
  c.check(
    recs.length >= 100 && failed.length === 0,
    `all ${recs.length} long-lived connections opened before the restart completed, none reset`,
    `${recs.length - failed.length} ok; ${fmtCounts(countBy(failed, (x) => x.error ?? 'no answer'))}; longest wait ${hold.summary.maxGapMs} ms`,
  );
  const expect = expectedBackend(config, vip, 6, port);
  const wrong = recs.filter((x) => x.backends.length !== 1 || x.backends[0] !== expect(x.sourceAddress, x.sourcePort)).length;
  c.check(wrong === 0, 'each was answered all along by the backend the Maglev table names (computed from the config)', `${wrong} differ`);
  const http = readClientJson(need(f, 'http-json'), 'http');
  const bad = http.records.filter((x) => !x.ok);
  c.check(
    http.records.length > 0 && bad.length === 0,
    `zero failed requests out of ${http.records.length} new connections during the restart`,
    `${bad.length} failed; ${fmtCounts(countBy(bad, (x) => x.error ?? '?'))}`,
  );
  const wrongHttp = http.records.filter((x) => x.ok && x.backend !== expect(x.sourceAddress, x.sourcePort)).length;
  c.check(wrongHttp === 0, 'and each reached the backend the Maglev table names', `${wrongHttp} differ`);

  // 4. the restarted MUX: an empty flow table, yet it carried connections opened before its restart
  const holdKeys = new Set(recs.map((x) => `${x.sourceAddress}:${x.sourcePort}`));
  const carriedBefore = new Set<string>();
  const carriedAfter = new Set<string>();
  let newAfter = 0;
  for (const p of muxCap) {
    const ip = ipOf(p)!;
    const t = p.d.first('tcp')!;
    const k = `${ip.src}:${t.srcPort}`;
    if (p.tsUs < r.stopUs && holdKeys.has(k)) carriedBefore.add(k);
    if (p.tsUs >= r.startUs) {
      if (holdKeys.has(k) && (t.flags & TCP_SYN) === 0) carriedAfter.add(k);
      if ((t.flags & TCP_SYN) !== 0) newAfter++;
    }
  }
  const counters = readJson(need(f, 'counters'));
  // about half: the router's multipath hash gives each connection to one of the MUXes, an independent
  // draw per connection (1 / the number of MUXes each), so a binomial count within 6 standard deviations
  const half = binomialBounds(recs.length, 1 / config.muxes.length);
  c.check(
    withinBinomial(carriedAfter.size, half),
    `after its start ${mux} carried its share (1/${config.muxes.length}) of the connections opened before its restart again (none in its new flow table: the Maglev choice)`,
    `${fmtBinomial(carriedAfter.size, half)}; ${carriedBefore.size} at ${mux} before the stop; flow_new ${counters.flow_new ?? 0}, flow_promoted ${counters.flow_promoted ?? 0}`,
  );
  c.check(newAfter > 0, `and new connections`, `${newAfter} SYNs after its start`);
  return c;
}
