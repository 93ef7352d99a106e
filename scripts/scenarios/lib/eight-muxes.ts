// 37-eight-muxes: the router's route at each step, and the long-lived connections held through them.
// --run R --vip A --port N --killed muxA --stopped muxB --steps F --kill-us T --stop-us T --cont-us T
//   --restart-us T --hold-json F --http-json F [--min-share 0.08] [--health-since-us T]
// The spread: each of the --http-json flows (a new connection each, all 8 MUXes up) is counted at the MUX
// whose capture holds its first packet; each MUX must carry at least --min-share of them.
// The steps are fixed by the scenario (all8, killed, stopped, resumed, restarted); the live MUXes of each
// are derived here from --killed and --stopped and the config, never read from the route under judgement.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readClientJson } from '../../lab/client.js';
import { birdEstablished, birdPaths, expectedBackend, healthDownEvents, ipOf, readJson } from './bgp.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields } from './check.js';

const TCP_RST = 0x04;
const TCP_FIN = 0x01;
const TCP_SYN = 0x02;
const TCP_ACK = 0x10;

/** The scenario's steps and the MUXes each leaves out of the route. */
export function eightMuxSteps(killed: string, stopped: string): { name: string; dead: string[] }[] {
  return [
    { name: 'all8', dead: [] },
    { name: 'killed', dead: [killed] },
    { name: 'stopped', dead: [killed, stopped] },
    { name: 'resumed', dead: [killed] },
    { name: 'restarted', dead: [] },
  ];
}

/** `ip -j route show VIP/32`: the next hops' gateways (sorted) and whether their weights are equal; null: not one route. */
export function fibNextHops(fib: unknown, vip: string): { gateways: string[]; equal: boolean } | null {
  if (!Array.isArray(fib)) return null;
  const route = fib.filter((r: { dst?: string }) => r.dst === vip || r.dst === `${vip}/32`);
  if (route.length !== 1) return null;
  const r = route[0] as { gateway?: string; nexthops?: { gateway?: string; weight?: number }[] };
  const hops = r.nexthops ?? (r.gateway === undefined ? [] : [{ gateway: r.gateway }]);
  return { gateways: hops.map((h) => h.gateway ?? '?').sort(), equal: new Set(hops.map((h) => h.weight ?? 1)).size <= 1 };
}

export function verifyEightMuxes(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const killed = need(f, 'killed');
  const stopped = need(f, 'stopped');
  const ev = {
    kill: Number(need(f, 'kill-us')),
    stop: Number(need(f, 'stop-us')),
    cont: Number(need(f, 'cont-us')),
    restart: Number(need(f, 'restart-us')),
  };
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const muxes = config.muxes.map((m) => m.name);
  const paOf = new Map(config.muxes.map((m) => [m.name, m.address.text]));
  c.check(muxes.length === 8, 'the lab ran 8 MUXes (one controller, the limit)', muxes.join(', '));

  // 1. the route at each step: the kernel FIB and BIRD, against the live set derived from the steps
  const recorded = new Set(
    readFileSync(need(f, 'steps'), 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[0])
      .filter((x) => x !== undefined && x !== ''),
  );
  for (const s of eightMuxSteps(killed, stopped)) {
    const live = muxes.filter((m) => !s.dead.includes(m));
    const pas = live.map((m) => paOf.get(m)!).sort();
    const fibFile = join(run, `step-${s.name}-fib.json`);
    if (!recorded.has(s.name) || !existsSync(fibFile)) {
      c.check(false, `step ${s.name}: recorded`, 'no record (the scenario did not reach it)');
      continue;
    }
    const fib = fibNextHops(readJson(fibFile), vip);
    c.check(
      fib !== null && fib.gateways.join() === pas.join() && fib.equal,
      `step ${s.name}: the router's kernel route to ${vip} has exactly the ${live.length} live MUXes as next hops, equal weights`,
      fib === null
        ? 'not one route'
        : `${fib.gateways.map((g) => [...paOf].find(([, pa]) => pa === g)?.[0] ?? `${g} (not a MUX)`).join(', ')}`,
    );
    const paths = birdPaths(readFileSync(join(run, `step-${s.name}-route.txt`), 'utf8'));
    const fromProtos = paths.map((p) => p.proto).sort();
    c.check(
      fromProtos.join() === [...live].sort().join() && paths.every((p) => paOf.get(p.proto) === p.nextHop),
      `step ${s.name}: BIRD has a path to ${vip} from each live MUX and no other, next hop the MUX itself`,
      paths.map((p) => `${p.proto} via ${p.nextHop}`).join(', ') || 'none',
    );
    const up = birdEstablished(readFileSync(join(run, `step-${s.name}-protocols.txt`), 'utf8')).filter((p) => muxes.includes(p));
    c.check(
      up.sort().join() === [...live].sort().join(),
      `step ${s.name}: BIRD's sessions Established with exactly the live MUXes`,
      up.join(', ') || 'none',
    );
  }

  // 2. the long-lived connections: the client's records
  const hold = readClientJson(need(f, 'hold-json'), 'hold');
  const recs = hold.records;
  const failed = recs.filter((r) => !r.ok);
  c.check(
    recs.length > 0 && failed.length === 0,
    `all ${recs.length} long-lived connections completed through the four steps`,
    `${recs.length - failed.length} ok; ${fmtCounts(countBy(failed, (r) => r.error ?? 'no answer'))}`,
  );
  const resets = recs.filter((r) => r.error === 'ECONNRESET').length;
  c.check(resets === 0, 'none was reset', `${resets} ECONNRESET`);
  c.check(
    hold.summary.answered === hold.summary.requests,
    'every request on them was answered',
    `${hold.summary.answered} of ${hold.summary.requests}; longest wait ${hold.summary.maxGapMs} ms`,
  );
  const expect = expectedBackend(config, vip, 6, port);
  const wrong = recs.filter((r) => r.backends.length !== 1 || r.backends[0] !== expect(r.sourceAddress, r.sourcePort)).length;
  c.check(
    wrong === 0,
    'each was answered by one backend all along, the one Maglev chooses (the independent oracle, from the config)',
    `${wrong} differ`,
  );
  const since = f.get('health-since-us');
  if (since !== undefined) {
    const down = healthDownEvents(run, muxes, Number(since));
    c.check(
      down.length === 0,
      "every backend stayed up in every MUX's tables (policy_applied log events): the pool was stable under the connections",
      down.length === 0
        ? `${muxes.length} MUX logs`
        : `the machine was too loaded for the probes: ${down
            .slice(0, 3)
            .map((e) => `${e.mux} generation ${e.generation} with ${e.down.join(', ')} down`)
            .join('; ')}`,
    );
  }

  // 3. the captures: which MUX carried each flow to the VIP, and when
  const keys = new Set(recs.map((r) => `${r.sourceAddress}:${r.sourcePort}`));
  const http = readClientJson(need(f, 'http-json'), 'http').records;
  const httpKeys = new Set(http.map((r) => `${r.sourceAddress}:${r.sourcePort}`));
  const seen = new Map<string, { mux: string; us: number }[]>();
  const firstAt = new Map<string, { mux: string; us: number }>();
  const syns = new Map<string, number>();
  for (const m of muxes) {
    for (const p of loadCapture(join(run, 'pcaps', `${m}.pcap`))) {
      const ip = ipOf(p);
      const t = p.d.first('tcp');
      if (ip === undefined || t === undefined || ip.dst !== vip || t.dstPort !== port || p.d.first('vxlan') !== undefined) continue;
      const k = `${ip.src}:${t.srcPort}`;
      if (httpKeys.has(k)) {
        const cur = firstAt.get(k);
        if (cur === undefined || p.tsUs < cur.us) firstAt.set(k, { mux: m, us: p.tsUs });
        if ((t.flags & (TCP_SYN | TCP_ACK)) === TCP_SYN) syns.set(m, (syns.get(m) ?? 0) + 1);
      }
      if (!keys.has(k)) continue;
      const l = seen.get(k) ?? [];
      l.push({ mux: m, us: p.tsUs });
      seen.set(k, l);
    }
  }

  // the spread: every new connection answered, by the oracle's backend; each MUX carried its share
  const minShare = Number(f.get('min-share') ?? '0.08');
  const httpBad = http.filter((r) => !r.ok);
  c.check(
    http.length > 0 && httpBad.length === 0,
    `every one of ${http.length} new connections (all 8 MUXes up) was answered`,
    `${http.length - httpBad.length} ok; ${fmtCounts(countBy(httpBad, (r) => r.error ?? 'no answer'))}`,
  );
  const httpWrong = http.filter((r) => r.ok && r.backend !== expect(r.sourceAddress, r.sourcePort)).length;
  c.check(httpWrong === 0, 'each answered by the backend Maglev chooses (the independent oracle, from the config)', `${httpWrong} differ`);
  const flows = [...httpKeys];
  const unseen = flows.filter((k) => !firstAt.has(k)).length;
  c.check(unseen === 0, "every new connection's packets are in a MUX's capture", `${unseen} of ${flows.length} in none`);
  const share = countBy(flows, (k) => firstAt.get(k)?.mux ?? 'none');
  const least = Math.min(...muxes.map((m) => share.get(m) ?? 0));
  c.check(
    least >= minShare * flows.length,
    `each of the 8 MUXes carried at least ${Math.round(minShare * 100)} % of the ${flows.length} new connections (the router's ECMP; the MUX with the first packet)`,
    muxes.map((m) => `${m} ${share.get(m) ?? 0} (${(((share.get(m) ?? 0) * 100) / flows.length).toFixed(1)} %)`).join(', '),
  );
  // tshark, independently: the SYNs to the VIP each MUX captured, against slbx's decoder
  const tsSyns: string[] = [];
  let tsAgree = true;
  for (const m of muxes) {
    const rows = tsharkFields(
      join(run, 'pcaps', `${m}.pcap`),
      ['ip.src', 'tcp.srcport'],
      `ip.dst == ${vip} && tcp.dstport == ${port} && tcp.flags.syn == 1 && tcp.flags.ack == 0 && !vxlan`,
    );
    if (rows === null) {
      tsAgree = false;
      break;
    }
    const n = rows.filter((r) => httpKeys.has(`${r[0]}:${r[1]}`)).length;
    tsSyns.push(`${m} ${n}`);
    if (n !== (syns.get(m) ?? 0)) tsAgree = false;
  }
  c.check(tsAgree, "tshark counts the same new connections' SYNs at each MUX", tsSyns.join(', '));
  const okOf = new Map(recs.map((r) => [`${r.sourceAddress}:${r.sourcePort}`, r.ok]));
  // moved(victim, from, at, until): on the victim in [from, at), at another MUX in [at, until)
  const moved = (victim: string, from: number, at: number, until: number) => {
    const out: string[] = [];
    for (const [k, l] of seen) {
      if (l.some((s) => s.mux === victim && s.us >= from && s.us < at) && l.some((s) => s.mux !== victim && s.us >= at && s.us < until))
        out.push(k);
    }
    return out;
  };
  const fromKill = moved(killed, 0, ev.kill, ev.stop);
  c.check(
    fromKill.length > 0 && fromKill.every((k) => okOf.get(k) === true),
    `connections that were on ${killed} moved to the other MUXes after the kill -9 and completed`,
    `${fromKill.length} moved, ${fromKill.filter((k) => okOf.get(k) === true).length} completed`,
  );
  const fromStop = moved(stopped, ev.kill, ev.stop, ev.cont);
  c.check(
    fromStop.length > 0 && fromStop.every((k) => okOf.get(k) === true),
    `connections that were on ${stopped} moved to the other MUXes after its SIGSTOP and completed`,
    `${fromStop.length} moved, ${fromStop.filter((k) => okOf.get(k) === true).length} completed`,
  );
  const atRestarted = [...seen].filter(([, l]) => l.some((s) => s.mux === killed && s.us >= ev.restart)).map(([k]) => k);
  c.check(
    atRestarted.length > 0 && atRestarted.every((k) => okOf.get(k) === true),
    `the restarted ${killed} carried held connections again (no flow state: placed by its Maglev tables) and they completed`,
    `${atRestarted.length} connections`,
  );
  const perMux = countBy(
    [...seen].flatMap(([, l]) => [...new Set(l.filter((s) => s.us < ev.kill).map((s) => s.mux))]),
    (m) => m,
  );
  c.note(`held connections per MUX before the kill: ${muxes.map((m) => `${m} ${perMux.get(m) ?? 0}`).join(', ')}`);

  // 4. the backends' captures: no RST on a held connection before both FINs
  let rst = 0;
  for (const n of config.nics) {
    const file = join(run, 'pcaps', `${n.name}.pcap`);
    if (!existsSync(file)) continue;
    const fins = new Map<string, number>();
    for (const p of loadCapture(file)) {
      const ip = ipOf(p);
      const t = p.d.first('tcp');
      if (ip === undefined || t === undefined) continue;
      const fwd = `${ip.src}:${t.srcPort}`;
      const rev = `${ip.dst}:${t.dstPort}`;
      const k = keys.has(fwd) ? fwd : keys.has(rev) ? rev : null;
      if (k === null) continue;
      if ((t.flags & TCP_FIN) !== 0) fins.set(k, (fins.get(k) ?? 0) | (k === fwd ? 1 : 2));
      if ((t.flags & TCP_RST) !== 0 && fins.get(k) !== 3) rst++;
    }
  }
  c.check(rst === 0, "the backends' captures hold no RST on a held connection (before its FIN exchange)", `${rst}`);
  return c;
}
