// Verifiers of the BGP / scale-out scenarios (10-13), from the captures, the router's state (BIRD and
// its kernel routes), the route polls and the daemons' logs and counters:
//   ecmp-spread     the router's kernel route to the VIP has one next hop per MUX; flows spread over every
//                   MUX; each flow at one MUX and at the backend Maglev chooses, the independent oracle's
//                   answer (scripts/oracle) from the config alone
//   mux-failure     (11 crash, 12 hang) how long until the router dropped the MUX; every long-lived
//                   connection completed on one backend, no reset; moved connections counted
//   mux-add-remove  zero failed requests while a MUX joins and another leaves gracefully; nothing reached
//                   the leaving MUX after it stopped forwarding; the new one carried flows
//   pool-move       (11, second half) what the flow table cannot do: a MUX fails after a backend was
//                   drained; the connections that move to another MUX and were on that backend are reset,
//                   and only those
// Usage: node verify.js ecmp-spread|mux-failure|mux-add-remove|pool-move --run RUNDIR ... (see each function)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SlbxConfig } from '../../../shared/config.js';
import { oracleRule } from '../../oracle/expected-backend.js';
import { readClientJson, readClientRecordsOf, type HoldRecord } from '../../lab/client.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields, type CapturedPacket } from './check.js';

const TCP_FIN = 0x01;
const TCP_RST = 0x04;
const TCP_SYN = 0x02;

/**
 * The backend Maglev chooses for a 5-tuple flow to an IPv4 or IPv6 VIP, every backend healthy: the
 * independent oracle's answer (scripts/oracle), computed from the config values alone, not with the
 * MUX's code (mux/tables.ts, shared/maglev.ts, shared/flow-hash.ts).
 */
export function expectedBackend(
  config: SlbxConfig,
  vip: string,
  proto: 6 | 17,
  port: number,
): (src: string | null, sport: number | null) => string | null {
  const rule = oracleRule(config, vip, proto, port);
  if (rule.mode !== 5) throw new Error('the scenario expects a 5-tuple rule');
  // a record without its source (the client never learnt it) has no expected backend: null, which no answer matches
  return (src, sport) => (src === null || sport === null ? null : rule.choose(src, sport));
}

export function readJson(path: string): any {
  return JSON.parse(readFileSync(path, 'utf8'));
}

export function ipOf(p: CapturedPacket): { src: string; dst: string } | undefined {
  return p.d.layers.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as { src: string; dst: string } | undefined;
}

/** Time of a daemon's first log event of a kind (ms since epoch), or null. */
function logEventMs(run: string, node: string, event: string, last = false): number | null {
  const f = join(run, 'logs', `${node}.log`);
  if (!existsSync(f)) return null;
  let found: number | null = null;
  for (const line of readFileSync(f, 'utf8').split('\n')) {
    if (!line.includes(`"event":"${event}"`)) continue;
    try {
      found = Date.parse(JSON.parse(line).ts);
    } catch {
      continue;
    }
    if (!last) return found;
  }
  return found;
}

/** BIRD log lines (`timeformat base iso long`: local time with ms) matching a pattern, with their time in ms. */
export function birdLog(run: string, pattern: RegExp): { ms: number; line: string }[] {
  const f = join(run, 'logs', 'bird.log');
  if (!existsSync(f)) return [];
  const out: { ms: number; line: string }[] = [];
  for (const line of readFileSync(f, 'utf8').split('\n')) {
    const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d{3})/.exec(line);
    if (m !== null && pattern.test(line)) out.push({ ms: new Date(`${m[1]}T${m[2]}`).getTime(), line });
  }
  return out;
}

/** Route polls: "EPOCH_US hop,hop,..." lines; EPOCH_US is when the read had ended (the route was so at or before it). */
export function readPolls(path: string): { us: number; hops: string[] }[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [t, h] = l.split(' ');
      return { us: Number(t), hops: (h ?? '').split(',').filter((x) => x !== '') };
    });
}

/** `ip -ts monitor route` output: the changes of one prefix, each with its time (ms) and next hops. */
function readMonitor(path: string, vip: string): { ms: number; hops: string[]; deleted: boolean }[] {
  if (!existsSync(path)) return [];
  const out: { ms: number; hops: string[]; deleted: boolean }[] = [];
  let cur: { ms: number; hops: string[]; deleted: boolean } | null = null;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)\] (Deleted )?(\S+)(.*)$/.exec(line);
    if (m !== null) {
      cur = null;
      if (m[3] !== vip && m[3] !== `${vip}/32` && m[3] !== `${vip}/128`) continue;
      const [sec, frac] = m[1]!.split('.');
      cur = { ms: new Date(sec!).getTime() + Number(`0.${frac}`) * 1000, hops: [], deleted: m[2] !== undefined };
      const via = /\bvia (\S+)/.exec(m[4]!);
      if (via !== null) cur.hops.push(via[1]!);
      out.push(cur);
    } else if (cur !== null) {
      const via = /^\s+nexthop via (\S+)/.exec(line);
      if (via !== null) cur.hops.push(via[1]!);
    }
  }
  return out;
}

/**
 * Every table a MUX applied from `sinceUs` on with a backend down (its policy_applied log events, each
 * with the health keys down): a probe that failed meanwhile. Such a change moves the Maglev table, so a
 * connection placed anew then (moved to another MUX) may reach another backend: the scenarios that keep
 * a pool stable on purpose fail on it, saying that the machine was too loaded for the probes.
 */
export function healthDownEvents(
  run: string,
  muxes: readonly string[],
  sinceUs: number,
): { mux: string; ms: number; generation: number; down: string[] }[] {
  const out: { mux: string; ms: number; generation: number; down: string[] }[] = [];
  for (const m of muxes) {
    const file = join(run, 'logs', `${m}.log`);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.includes('"event":"policy_applied"')) continue;
      let e: any;
      try {
        e = JSON.parse(line);
      } catch {
        continue;
      }
      const ms = Date.parse(e.ts);
      if (ms * 1000 >= sinceUs && Array.isArray(e.down) && e.down.length > 0)
        out.push({ mux: m, ms, generation: e.generation, down: e.down });
    }
  }
  return out.sort((a, b) => a.ms - b.ms);
}

/** The check: the pool's health held from `sinceUs` on (every MUX's log), or a FAIL naming the load. */
function checkHealthHeld(c: Checks, run: string, muxes: readonly string[], sinceUs: number, eventUs: number, what: string): void {
  const ev = healthDownEvents(run, muxes, sinceUs);
  c.check(
    ev.length === 0,
    `every backend stayed up in every MUX's tables from the start of the connections on (each MUX's policy_applied log events): ${what}`,
    ev.length === 0
      ? `${muxes.length} MUX logs`
      : `the machine was too loaded for the probes: ${ev
          .slice(0, 4)
          .map(
            (e) =>
              `${e.mux} generation ${e.generation} at ${((e.ms * 1000 - eventUs) / 1000).toFixed(0)} ms from the kill with ${e.down.join(', ')} down`,
          )
          .join(
            '; ',
          )}${ev.length > 4 ? `; ${ev.length - 4} more` : ''}; a health change moves the Maglev table, so the verdicts on moved connections cannot tell it from a fault`,
  );
}

/** BIRD `show route all PREFIX`: the protocols (muxes) with a path, their AS paths and next hops. */
export function birdPaths(text: string): { proto: string; asPath: string; nextHop: string }[] {
  const out: { proto: string; asPath: string; nextHop: string }[] = [];
  for (const m of text.matchAll(/unicast \[(\S+) [^\]]*\][^[\n]*\[(AS[^\]]*)\][\s\S]*?BGP\.next_hop: (\S+)/g))
    out.push({ proto: m[1]!, asPath: m[2]!, nextHop: m[3]! });
  return out;
}

export function birdEstablished(text: string): string[] {
  return [...text.matchAll(/^(\S+)\s+BGP\s+\S+\s+up\s+.*Established/gm)].map((m) => m[1]!);
}

// ---------------------------------------------------------------------------------------------
// 10-ecmp-spread
// --run R --vip A --port N --udp-json F --route-get F --bird-protocols F --bird-route F --fib-json F [--min-share 0.15]

export function verifyEcmpSpread(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const minShare = Number(f.get('min-share') ?? '0.15');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const muxes = config.muxes.map((m) => m.name);
  const muxByPa = new Map(config.muxes.map((m) => [m.address.text, m.name]));

  // BIRD: every mux's session up, one path per mux, AS path [65001] IGP, merged into one kernel route
  const protos = birdEstablished(readFileSync(need(f, 'bird-protocols'), 'utf8'));
  c.check(
    muxes.every((m) => protos.includes(m)),
    `BIRD: a BGP session Established with each of the ${muxes.length} MUXes`,
    protos.join(', '),
  );
  const paths = birdPaths(readFileSync(need(f, 'bird-route'), 'utf8'));
  c.check(
    paths.length === muxes.length && paths.every((p) => p.asPath === `AS${config.bgp!.asn}i` && muxByPa.get(p.nextHop) === p.proto),
    `BIRD: ${vip}/32 learned from every MUX, AS path [${config.bgp!.asn}] ORIGIN IGP, next hop the MUX itself`,
    paths.map((p) => `${p.proto} via ${p.nextHop} ${p.asPath}`).join('; '),
  );

  // the router's kernel FIB (ip -j route show VIP/32): one route, one next hop per MUX, equal weights
  const fib: any[] = readJson(need(f, 'fib-json'));
  const route = fib.filter((r) => r.dst === vip || r.dst === `${vip}/32`);
  const hops: { gateway?: string; weight?: number }[] =
    route.length === 1 ? (route[0].nexthops ?? (route[0].gateway === undefined ? [] : [route[0]])) : [];
  const gws = hops.map((h) => h.gateway ?? '?').sort();
  const pas = [...muxByPa.keys()].sort();
  const weights = new Set(hops.map((h) => h.weight ?? 1));
  c.check(
    route.length === 1 && gws.join() === pas.join() && weights.size === 1,
    `the router's kernel FIB: one route to ${vip}, with exactly one next hop per MUX (${muxes.length}), equal weights`,
    `${route.length} route(s); next hops ${hops.map((h) => `${h.gateway ?? '?'} (${muxByPa.get(h.gateway ?? '') ?? 'not a MUX'}) weight ${h.weight ?? 1}`).join(', ') || 'none'}`,
  );

  // the client's flows
  const recs = readClientRecordsOf(need(f, 'udp-json'), 'udp');
  const ok = recs.filter((r) => r.ok);
  c.check(recs.length > 0 && ok.length === recs.length, `every one of ${recs.length} UDP flows was echoed`, `${ok.length} ok`);
  const flowKey = (src: string | null, sport: number | null) => `${src}:${sport}`;

  // which MUX each flow reached (captures on every MUX, VIP traffic only)
  const muxOf = new Map<string, string[]>();
  const perMuxPackets = new Map<string, number>();
  for (const m of muxes) {
    let n = 0;
    for (const p of loadCapture(join(run, 'pcaps', `${m}.pcap`))) {
      const ip = ipOf(p);
      const u = p.d.first('udp');
      if (ip === undefined || u === undefined || ip.dst !== vip || u.dstPort !== port || p.d.first('vxlan') !== undefined) continue;
      n++;
      const k = flowKey(ip.src, u.srcPort);
      muxOf.set(k, [...(muxOf.get(k) ?? []), m]);
    }
    perMuxPackets.set(m, n);
  }
  const flows = ok.map((r) => flowKey(r.sourceAddress, r.sourcePort));
  // a 5-tuple two sockets used one after the other (the kernel reused the source port) is two flows
  const uses = countBy(flows, (k) => k);
  const arrivals = [...muxOf.values()].reduce((n, l) => n + l.length, 0);
  const exact = [...uses].every(([k, n]) => (muxOf.get(k)?.length ?? 0) === n);
  c.check(
    exact && arrivals === flows.length,
    "every flow's datagram reached a MUX exactly once",
    `${arrivals} arrivals for ${flows.length} flows`,
  );
  const reused = [...uses].filter(([, n]) => n > 1).map(([k]) => k);
  const share = countBy(flows, (k) => muxOf.get(k)?.[0] ?? 'none');
  const min = Math.min(...muxes.map((m) => share.get(m) ?? 0));
  c.check(
    min >= minShare * flows.length,
    `each MUX carried at least ${Math.round(minShare * 100)} % of the flows (the router's ECMP)`,
    `${muxes.map((m) => `${m} ${share.get(m) ?? 0} (${(((share.get(m) ?? 0) * 100) / flows.length).toFixed(1)} %)`).join(', ')}`,
  );

  // the router's FIB names the same MUX for each flow (ip route get ... sport N dport M)
  const fibGet = new Map<string, string>();
  for (const line of readFileSync(need(f, 'route-get'), 'utf8').split('\n')) {
    const m = /^(\S+) (\d+) .*\bvia (\S+)/.exec(line);
    if (m !== null) fibGet.set(flowKey(m[1]!, Number(m[2])), muxByPa.get(m[3]!) ?? m[3]!);
  }
  // The kernel's own answer for each 5-tuple is the independent oracle of the router's choice: the lab
  // router hashes the 5-tuple (fib_multipath_hash_policy=3, fields 0x37, scripts/lab/lib.sh), so every
  // flow must have reached the MUX `ip route get` names, and a 5-tuple two sockets used one MUX. With
  // policy 1 the kernel took the client socket's random hash instead (about 1 flow in 4 agreed with 4
  // MUXes, docs/bgp.md "A lab finding").
  const fibAgree = flows.filter((k) => fibGet.get(k) === muxOf.get(k)?.[0]);
  const fibOff = flows.filter((k) => fibGet.get(k) !== muxOf.get(k)?.[0]);
  c.check(
    flows.length > 0 && fibOff.length === 0,
    "every flow reached the MUX the router's FIB names for its 5-tuple (ip route get VIP from SRC iif br0 ipproto udp sport N dport M)",
    `${fibAgree.length} of ${flows.length} agree${
      fibOff.length > 0
        ? `; e.g. ${fibOff
            .slice(0, 3)
            .map((k) => `${k}: FIB ${fibGet.get(k) ?? 'none'}, capture ${muxOf.get(k)?.[0] ?? 'none'}`)
            .join('; ')}`
        : ''
    }`,
  );
  const split = reused.filter((k) => new Set(muxOf.get(k)).size > 1);
  c.check(
    split.length === 0,
    'a 5-tuple two sockets used one after the other reached one MUX both times',
    `${reused.length} such 5-tuples, ${split.length} split over two MUXes`,
  );

  // the backend: what the backends' captures show = what the oracle names = the echo
  const expect = expectedBackend(config, vip, 17, port);
  const rule = config.vips.find((v) => v.address.text === vip)!.rules.find((r) => r.frontendPort === port && r.protocols.includes(17))!;
  const pool = config.pools.find((p) => p.name === rule.pool)!;
  const backendOf = new Map<string, string[]>();
  for (const b of pool.backends) {
    const nic = config.nics.find((n) => n.name === b.nic)!;
    for (const p of loadCapture(join(run, 'pcaps', `${nic.name}.pcap`))) {
      const ip = ipOf(p);
      const u = p.d.first('udp');
      if (ip === undefined || u === undefined || ip.dst !== nic.address4?.text || u.dstPort !== rule.backendPort) continue;
      const k = flowKey(ip.src, u.srcPort);
      backendOf.set(k, [...(backendOf.get(k) ?? []), nic.name]);
    }
  }
  let wrongCapture = 0;
  let wrongEcho = 0;
  const perBackend = new Map<string, number>();
  for (const r of ok) {
    const k = flowKey(r.sourceAddress, r.sourcePort);
    const want = expect(r.sourceAddress, r.sourcePort);
    const seen = backendOf.get(k) ?? [];
    if (seen.length !== uses.get(k) || seen.some((b) => b !== want)) wrongCapture++;
    if (r.backend !== want) wrongEcho++;
    perBackend.set(want ?? 'none', (perBackend.get(want ?? 'none') ?? 0) + 1);
  }
  c.check(
    wrongCapture === 0,
    "every flow's datagram reached exactly the backend Maglev chooses (the independent oracle, scripts/oracle, from the config alone: no code of the daemons)",
    `${wrongCapture} differ; ${fmtCounts(perBackend)}`,
  );
  c.check(wrongEcho === 0, 'every echo came from that backend', `${wrongEcho} differ`);
  if (split.length > 0) {
    const same = split.filter((k) => new Set(backendOf.get(k)).size === 1).length;
    c.check(
      same === split.length,
      'a 5-tuple that reached two MUXes reached the same backend from both (same decision on every MUX)',
      `${same} of ${split.length}`,
    );
  }

  // tshark, independently: the datagrams to the VIP each MUX captured
  const ts: string[] = [];
  let haveTshark = true;
  for (const m of muxes) {
    const rows = tsharkFields(
      join(run, 'pcaps', `${m}.pcap`),
      ['ip.src', 'udp.srcport'],
      `ip.dst == ${vip} && udp.dstport == ${port} && !vxlan`,
    );
    if (rows === null) {
      haveTshark = false;
      break;
    }
    ts.push(`${m} ${rows.length}`);
    if (rows.length !== perMuxPackets.get(m)) haveTshark = false;
  }
  c.check(haveTshark, 'tshark counts the same datagrams at each MUX', ts.join(', '));
  return c;
}

// ---------------------------------------------------------------------------------------------
// 11-mux-crash, 12-mux-hang
// --run R --vip A --port N --victim muxN --event-us T (kill/stop time) --polls F --limit-ms N --hold-json F
//   [--rejoin-us T --rejoin-polls F --rejoin-limit-ms N] [--http-json F] [--kind crash|hang] [--bird-protocols F]
//   [--health-since-us T: every backend must have stayed up in the MUXes' tables from T on]

export function verifyMuxFailure(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const victim = need(f, 'victim');
  const kind = f.get('kind') ?? 'crash';
  const eventUs = Number(need(f, 'event-us'));
  const limitMs = Number(need(f, 'limit-ms'));
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const victimPa = config.muxes.find((m) => m.name === victim)!.address.text;
  const others = config.muxes
    .filter((m) => m.name !== victim)
    .map((m) => m.address.text)
    .sort();

  // 1. how long until the router dropped the MUX's next hop (route polled every ~10-20 ms)
  const polls = readPolls(need(f, 'polls'));
  const before = polls.filter((p) => p.us < eventUs);
  const after = polls.filter((p) => p.us >= eventUs);
  const drop = after.find((p) => !p.hops.includes(victimPa));
  const lastWith = [...after].reverse().find((p) => drop !== undefined && p.us < drop.us && p.hops.includes(victimPa));
  const gaps = before.filter((p) => !p.hops.includes(victimPa));
  // on a starved machine a MUX can miss its keepalives for the whole hold time: BIRD's log says so
  const lost =
    gaps.length === 0
      ? []
      : birdLog(run, new RegExp(`${victim}: (Error: Hold timer expired|Connection lost|BGP session closed)`)).filter(
          (x) => x.ms * 1000 < eventUs && x.ms * 1000 >= (before[0]?.us ?? 0) - 5_000_000,
        );
  c.check(
    before.length > 0 && gaps.length === 0,
    `before the ${kind}, the router routed ${vip} over ${victim}`,
    `${before.length} polls${gaps.length > 0 ? `, ${gaps.length} without ${victim} (the first ${((gaps[0]!.us - eventUs) / 1000).toFixed(0)} ms from the ${kind})` : ''}${
      lost.length > 0
        ? `; BIRD lost ${victim}'s session before the ${kind} (a MUX starved of CPU misses its keepalives for the hold time: the machine was too loaded): ${lost.map((x) => `${(x.ms - eventUs / 1000).toFixed(0)} ms ${x.line.replace(/^\S+ \S+ <\w+> /, '')}`).join('; ')}`
        : ''
    }`,
  );
  const ms = drop === undefined ? Infinity : (drop.us - eventUs) / 1000;
  const resolution = drop === undefined ? 0 : (drop.us - (lastWith?.us ?? eventUs)) / 1000;
  const what = kind === 'crash' ? 'kill -9' : 'SIGSTOP';
  const monitor = f.get('monitor');
  if (monitor === undefined) {
    c.check(
      ms <= limitMs,
      `the router dropped ${victim}'s next hop within ${limitMs} ms of the ${what}`,
      drop === undefined ? 'never' : `${ms.toFixed(1)} ms (poll resolution ${resolution.toFixed(1)} ms; ${after.length} polls)`,
    );
  } else {
    // The time is judged by the kernel's own timestamp of the change (ip -ts monitor route), to the
    // microsecond: a route poll is a process per read, and on a loaded machine its reads come hundreds of
    // ms apart (674 ms seen), so the poll only brackets the change. The polls must agree with the
    // kernel: the change lies after the read of the poll before the last one that still had the victim
    // (each poll stamps its time after its read), and at or before the first poll without it.
    const change = readMonitor(monitor, vip).find((x) => x.ms >= eventUs / 1000 && (x.deleted || !x.hops.includes(victimPa)));
    const cms = change === undefined ? Infinity : change.ms - eventUs / 1000;
    const iLast = lastWith === undefined ? -1 : polls.indexOf(lastWith);
    const floorUs = iLast > 0 ? polls[iLast - 1]!.us : eventUs;
    const agree = drop !== undefined && change !== undefined && change.ms * 1000 > floorUs - 1000 && change.ms * 1000 <= drop.us + 1000;
    c.check(
      cms <= limitMs,
      `the router dropped ${victim}'s next hop within ${limitMs} ms of the ${what}: the kernel's route change (ip -ts monitor route) came ${change === undefined ? 'never' : `${cms.toFixed(1)} ms`} after it`,
      change === undefined ? 'no change recorded' : `new next hops: ${change.hops.join(', ') || 'none'}`,
    );
    c.check(
      agree,
      `the route polls agree with the kernel's timestamp: ${victim} still there at the poll before, gone at the first poll after`,
      drop === undefined
        ? 'no poll without the victim'
        : `first poll without it at ${ms.toFixed(1)} ms, the last with it ${lastWith === undefined ? 'before the event' : `at ${((lastWith.us - eventUs) / 1000).toFixed(1)} ms`} (poll resolution ${resolution.toFixed(1)} ms; ${after.length} polls)`,
    );
  }
  c.check(
    drop !== undefined && drop.hops.slice().sort().join(',') === others.join(','),
    'and kept the other MUXes',
    drop?.hops.join(', ') ?? '-',
  );
  // BIRD's own account
  const birdDown = birdLog(
    run,
    new RegExp(`${victim}: (Error: Hold timer expired|Connection closed|Connection lost|BGP session closed|State changed to stop|Down)`),
  ).filter((x) => x.ms >= eventUs / 1000 - 5);
  if (birdDown.length > 0)
    c.note(
      `BIRD log: ${birdDown
        .slice(0, 4)
        .map((x) => `+${(x.ms - eventUs / 1000).toFixed(0)} ms ${x.line.replace(/^\S+ \S+ <\w+> /, '')}`)
        .join('; ')}`,
    );

  // BIRD's hold timer (12-mux-hang): the session is declared down within the hold time
  const holdLimit = f.get('hold-limit-ms');
  if (holdLimit !== undefined) {
    const exp = birdLog(run, new RegExp(`${victim}: (Error: Hold timer expired|BFD session down)`)).find((x) => x.ms >= eventUs / 1000);
    const hms = exp === undefined ? Infinity : exp.ms - eventUs / 1000;
    c.check(
      hms <= Number(holdLimit),
      `BIRD declared ${victim}'s session down within ${holdLimit} ms of the SIGSTOP`,
      exp === undefined ? 'never' : `${hms.toFixed(0)} ms: ${exp.line.replace(/^\S+ \S+ <\w+> /, '')}`,
    );
  }

  // 2. the long-lived connections
  const healthSince = f.get('health-since-us');
  if (healthSince !== undefined)
    checkHealthHeld(
      c,
      run,
      config.muxes.map((m) => m.name),
      Number(healthSince),
      eventUs,
      'the connections the kill moved must reach their backend',
    );
  const holdJson = f.get('hold-json');
  const hold = holdJson === undefined ? undefined : readClientJson(holdJson, 'hold');
  const recs: HoldRecord[] = hold?.records ?? [];
  if (hold !== undefined) {
    const failed = recs.filter((r) => !r.ok);
    c.check(
      recs.length > 0 && failed.length === 0,
      `all ${recs.length} long-lived connections completed`,
      `${recs.length - failed.length} ok; ${fmtCounts(countBy(failed, (r) => r.error ?? 'no answer'))}`,
    );
    const resets = recs.filter((r) => r.error === 'ECONNRESET').length;
    c.check(resets === 0, 'none was reset', `${resets} ECONNRESET`);
    const multi = recs.filter((r) => r.backends.length !== 1).length;
    c.check(multi === 0, 'each connection was answered by one backend all along', `${multi} saw another`);
    c.check(
      hold.summary.answered === hold.summary.requests,
      'every request on them was answered',
      `${hold.summary.answered} of ${hold.summary.requests}; longest wait ${hold.summary.maxGapMs} ms`,
    );

    // 3. captures: connections that moved from the victim to another MUX, and their backend
    const expect = expectedBackend(config, vip, 6, port);
    const seenAt = new Map<string, { mux: string; us: number }[]>();
    for (const m of config.muxes) {
      for (const p of loadCapture(join(run, 'pcaps', `${m.name}.pcap`))) {
        const ip = ipOf(p);
        const t = p.d.first('tcp');
        if (ip === undefined || t === undefined || ip.dst !== vip || t.dstPort !== port || p.d.first('vxlan') !== undefined) continue;
        const k = `${ip.src}:${t.srcPort}`;
        const list = seenAt.get(k) ?? [];
        list.push({ mux: m.name, us: p.tsUs });
        seenAt.set(k, list);
      }
    }
    const holdKeys = new Set(recs.map((r) => `${r.sourceAddress}:${r.sourcePort}`));
    let moved = 0;
    let movedOk = 0;
    let wrongBackend = 0;
    const movedTo = new Map<string, number>();
    for (const r of recs) {
      const k = `${r.sourceAddress}:${r.sourcePort}`;
      const seen = seenAt.get(k) ?? [];
      const onVictimBefore = seen.some((s) => s.mux === victim && s.us < eventUs);
      const elsewhereAfter = seen.filter((s) => s.mux !== victim && s.us >= eventUs);
      if (onVictimBefore && elsewhereAfter.length > 0) {
        moved++;
        if (r.ok) movedOk++;
        for (const m of new Set(elsewhereAfter.map((s) => s.mux))) movedTo.set(m, (movedTo.get(m) ?? 0) + 1);
      }
      const want = expect(r.sourceAddress, r.sourcePort);
      if (r.backends.length !== 1 || r.backends[0] !== want) wrongBackend++;
    }
    c.check(
      moved > 0 && movedOk === moved,
      `connections that were on ${victim} moved to the other MUXes (no flow-table entry there) and still completed`,
      `${moved} moved (${fmtCounts(movedTo)}), ${movedOk} completed`,
    );
    // hash-threshold multipath is not consistent: some connections move between the surviving MUXes too
    let shuffled = 0;
    for (const r of recs) {
      const seen = seenAt.get(`${r.sourceAddress}:${r.sourcePort}`) ?? [];
      const pre = new Set(seen.filter((s) => s.us < eventUs).map((s) => s.mux));
      const post = new Set(seen.filter((s) => s.us >= eventUs).map((s) => s.mux));
      if (!pre.has(victim) && pre.size > 0 && [...post].some((m) => !pre.has(m))) shuffled++;
    }
    c.note(
      `${shuffled} connections moved between the surviving MUXes as well (the kernel's multipath is hash-threshold, not consistent); all completed on their backend`,
    );
    c.check(
      wrongBackend === 0,
      'every connection was answered by the backend Maglev chooses (the independent oracle, from the config)',
      `${wrongBackend} differ`,
    );
    let rstFromBackends = 0;
    let rstAfterClose = 0;
    const rule = config.vips.find((v) => v.address.text === vip)!.rules.find((r) => r.frontendPort === port && r.protocols.includes(6))!;
    for (const b of config.pools.find((p) => p.name === rule.pool)!.backends) {
      const nic = config.nics.find((n) => n.name === b.nic)!;
      const file = join(run, 'pcaps', `${nic.name}.pcap`);
      if (!existsSync(file)) continue;
      // a RST once both sides have sent their FIN ends nothing: the backend answers a late duplicate of the
      // client's last ACK that way after its socket closed; only a RST before that aborts a connection
      const fins = new Map<string, number>();
      for (const p of loadCapture(file)) {
        const t = p.d.first('tcp');
        const ip = ipOf(p);
        if (t === undefined || ip === undefined) continue;
        const k = holdKeys.has(`${ip.dst}:${t.dstPort}`)
          ? `${ip.dst}:${t.dstPort}`
          : holdKeys.has(`${ip.src}:${t.srcPort}`)
            ? `${ip.src}:${t.srcPort}`
            : null;
        if (k === null) continue;
        if ((t.flags & TCP_FIN) !== 0) fins.set(k, (fins.get(k) ?? 0) | (k === `${ip.src}:${t.srcPort}` ? 1 : 2));
        if ((t.flags & TCP_RST) === 0) continue;
        if (fins.get(k) === 3) rstAfterClose++;
        else rstFromBackends++;
      }
    }
    c.check(
      rstFromBackends === 0,
      "the backends' captures hold no RST on those connections (before their FIN exchange)",
      `${rstFromBackends}; ${rstAfterClose} after both FINs (a late duplicate ACK answered by a closed socket)`,
    );
  }

  // 4. short connections during a hang: failures only for SYNs that went to the frozen MUX
  const httpJson = f.get('http-json');
  if (httpJson !== undefined) {
    const h = readClientJson(httpJson, 'http');
    const bad = h.records.filter((r) => !r.ok);
    const synAtVictim = new Set<string>();
    for (const p of loadCapture(join(run, 'pcaps', `${victim}.pcap`))) {
      const ip = ipOf(p);
      const t = p.d.first('tcp');
      if (ip !== undefined && t !== undefined && (t.flags & TCP_SYN) !== 0 && p.tsUs >= eventUs) synAtVictim.add(`${ip.src}:${t.srcPort}`);
    }
    const expectHttp = expectedBackend(config, vip, 6, port);
    const okRecs = h.records.filter((r) => r.ok);
    const wrong = okRecs.filter((r) => r.backend !== expectHttp(r.sourceAddress, r.sourcePort)).length;
    c.check(
      wrong === 0,
      'every answered request came from the backend Maglev chooses (the independent oracle)',
      `${wrong} of ${okRecs.length} differ`,
    );
    const explained = bad.filter((r) => synAtVictim.has(`${r.sourceAddress}:${r.sourcePort}`)).length;
    const slow = h.records.filter((r) => r.ok && r.latencyMs > 1000).length;
    c.check(
      explained === bad.length,
      `new connections during the ${kind}: failures only among those whose handshake went to the frozen ${victim}`,
      `${h.records.length} requests, ${bad.length} failed (${explained} of them mid-handshake on ${victim}), ${slow} slower than 1 s (retransmitted SYNs), ${synAtVictim.size} handshakes reached ${victim} after the SIGSTOP`,
    );
  }

  // 5. rejoin (after SIGCONT)
  const rejoinUs = f.get('rejoin-us');
  if (rejoinUs !== undefined) {
    const rp = readPolls(need(f, 'rejoin-polls')).filter((p) => p.us >= Number(rejoinUs));
    const back = rp.find((p) => p.hops.includes(victimPa));
    const rms = back === undefined ? Infinity : (back.us - Number(rejoinUs)) / 1000;
    const rlimit = Number(need(f, 'rejoin-limit-ms'));
    // as for the drop: the kernel's timestamp judges the time when there is one, the poll confirms it
    const monitor = f.get('monitor');
    const kback =
      monitor === undefined
        ? undefined
        : readMonitor(monitor, vip).find((x) => x.ms * 1000 >= Number(rejoinUs) && !x.deleted && x.hops.includes(victimPa));
    const kms = kback === undefined ? Infinity : kback.ms - Number(rejoinUs) / 1000;
    c.check(
      back !== undefined && (monitor === undefined ? rms : kms) <= rlimit,
      `after SIGCONT ${victim} rejoined the router's route within ${rlimit} ms`,
      back === undefined
        ? 'never (route polls)'
        : `route polls: ${rms.toFixed(0)} ms${monitor === undefined ? '' : `; the kernel's route change: ${kback === undefined ? 'none recorded' : `${kms.toFixed(0)} ms`}`}`,
    );
  }
  const bp = f.get('bird-protocols');
  if (bp !== undefined) {
    const up = birdEstablished(readFileSync(bp, 'utf8'));
    c.check(
      config.muxes.every((m) => up.includes(m.name)),
      'BIRD: every MUX Established at the end',
      up.join(', '),
    );
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// 13-mux-add-remove
// --run R --vip A --port N --added muxN --removed muxM --added-us T --removed-us T --http-json F --hold-json F
//   --bird-protocols F --counters-added F

export function verifyMuxAddRemove(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const added = need(f, 'added');
  const removed = need(f, 'removed');
  const addedUs = Number(need(f, 'added-us'));
  const removedUs = Number(need(f, 'removed-us'));
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();

  const http = readClientJson(need(f, 'http-json'), 'http');
  const bad = http.records.filter((r) => !r.ok);
  c.check(
    http.records.length >= 2000 && bad.length === 0,
    `zero failed requests out of ${http.records.length} while ${added} joined and ${removed} left`,
    `${bad.length} failed; ${fmtCounts(countBy(bad, (r) => r.error ?? '?'))}`,
  );
  const hold = readClientJson(need(f, 'hold-json'), 'hold');
  c.check(
    hold.summary.failed === 0 && hold.summary.movedBackend === 0,
    `all ${hold.summary.total} long-lived connections opened before completed, each on one backend`,
    `${hold.summary.ok} ok, longest wait ${hold.summary.maxGapMs} ms`,
  );

  // per MUX: first and last packet to the VIP
  const span = new Map<string, { first: number; last: number; n: number; syn: number }>();
  for (const m of config.muxes) {
    const file = join(run, 'pcaps', `${m.name}.pcap`);
    if (!existsSync(file)) continue;
    const s = { first: Infinity, last: -Infinity, n: 0, syn: 0 };
    for (const p of loadCapture(file)) {
      const ip = ipOf(p);
      const t = p.d.first('tcp');
      if (ip === undefined || t === undefined || ip.dst !== vip || t.dstPort !== port || p.d.first('vxlan') !== undefined) continue;
      s.first = Math.min(s.first, p.tsUs);
      s.last = Math.max(s.last, p.tsUs);
      s.n++;
      if ((t.flags & TCP_SYN) !== 0) s.syn++;
    }
    span.set(m.name, s);
  }
  const a = span.get(added);
  c.check(
    a !== undefined && a.n > 0 && a.first >= addedUs,
    `${added} carried traffic once it had joined (none before its start)`,
    a === undefined
      ? 'no capture'
      : `${a.n} packets, ${a.syn} new connections, first +${((a.first - addedUs) / 1000).toFixed(0)} ms after its start`,
  );
  const stoppedMs = logEventMs(run, removed, 'mux_stopped', true);
  const withdrawnMs = logEventMs(run, removed, 'bgp_shutdown', true);
  const r = span.get(removed);
  c.check(
    stoppedMs !== null && withdrawnMs !== null && withdrawnMs < stoppedMs,
    `${removed} withdrew (and sent Cease) before it stopped forwarding`,
    stoppedMs === null || withdrawnMs === null
      ? 'log events missing'
      : `withdrawn and closed at +${(withdrawnMs - removedUs / 1000).toFixed(0)} ms, stopped forwarding at +${(stoppedMs - removedUs / 1000).toFixed(0)} ms after the SIGTERM`,
  );
  c.check(
    r !== undefined && stoppedMs !== null && r.last / 1000 < stoppedMs,
    `no packet reached ${removed} after it stopped forwarding`,
    r === undefined || stoppedMs === null
      ? '-'
      : `last packet ${(stoppedMs - r.last / 1000).toFixed(0)} ms before it stopped (${r.n} packets in all)`,
  );
  const protos = birdEstablished(readFileSync(need(f, 'bird-protocols'), 'utf8'));
  c.check(protos.includes(added) && !protos.includes(removed), `BIRD: ${added} Established, ${removed} not`, protos.join(', '));
  const shut = birdLog(run, new RegExp(`${removed}: .*(Administrative shutdown|Received: Administrative)`));
  const birdAll = readFileSync(need(f, 'bird-protocols'), 'utf8');
  c.check(
    shut.length > 0 || /Received: Administrative shutdown/.test(birdAll),
    `BIRD received Cease / Administrative Shutdown from ${removed}`,
    shut[0]?.line.replace(/^\S+ \S+ /, '') ?? 'in show protocols all',
  );
  const counters = readJson(need(f, 'counters-added'));
  c.check(
    (counters.flow_new ?? 0) > 0,
    `${added}'s counters: it created flows`,
    `flow_new ${counters.flow_new ?? 0}, tx_packets ${counters.tx_packets ?? 0}`,
  );
  return c;
}

// ---------------------------------------------------------------------------------------------
// 11-mux-crash, second half: a pool change, then a MUX failure
// --run R --vip A --port N --victim muxN --event-us T (the kill) --drain-us T --drained-us T (the drain
//   command's start and return, every MUX acked) --drained NIC --hold-json F --connections N --client-exit N
//   --health-since-us T (the connections' start: every backend must have stayed up in the MUXes' tables since)
// A connection "moved" when, after the drain began, it reached a MUX it had not reached before: that MUX
// has no flow entry for it and places it by the table of the moment. The kill moves the dead MUX's
// connections (and, the kernel's multipath being hash-threshold, some between the survivors); a TCP
// retransmission timeout moves one too (Linux picks a new flow hash for the socket, the router another MUX).

export function verifyPoolMove(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const victim = need(f, 'victim');
  const eventUs = Number(need(f, 'event-us'));
  const drainUs = Number(need(f, 'drain-us'));
  const drainedUs = Number(need(f, 'drained-us'));
  const drained = need(f, 'drained');
  const connections = Number(need(f, 'connections'));
  const clientExit = Number(need(f, 'client-exit'));
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  // the drain is the only change to the pool this half reasons about: a probe failing meanwhile moves the table too
  checkHealthHeld(
    c,
    run,
    config.muxes.map((m) => m.name),
    Number(need(f, 'health-since-us')),
    eventUs,
    `the drain of ${drained} is the pool's only change`,
  );
  const recs = readClientRecordsOf(need(f, 'hold-json'), 'hold');
  // without the records of every connection the checks below would hold for nothing
  c.check(
    recs.length === connections && connections > 0,
    `the client recorded all ${connections} long-lived connections`,
    `${recs.length} records`,
  );
  const seenAt = new Map<string, { mux: string; us: number }[]>();
  for (const m of config.muxes) {
    const file = join(run, 'pcaps', `${m.name}.pcap`);
    if (!existsSync(file)) continue;
    for (const p of loadCapture(file)) {
      const ip = ipOf(p);
      const t = p.d.first('tcp');
      if (ip === undefined || t === undefined || ip.dst !== vip || t.dstPort !== port || p.d.first('vxlan') !== undefined) continue;
      const k = `${ip.src}:${t.srcPort}`;
      const list = seenAt.get(k) ?? [];
      list.push({ mux: m.name, us: p.tsUs });
      seenAt.set(k, list);
    }
  }
  /** When the connection first reached a MUX, after the drain began, that it had not reached before; null if never. */
  const movedAt = (r: HoldRecord): number | null => {
    const seen = seenAt.get(`${r.sourceAddress}:${r.sourcePort}`) ?? [];
    const home = new Set(seen.filter((s) => s.us < drainUs).map((s) => s.mux));
    const first = seen.filter((s) => s.us >= drainUs && !home.has(s.mux)).sort((a, b) => a.us - b.us)[0];
    return first === undefined ? null : first.us;
  };
  const moved = (r: HoldRecord) => movedAt(r) !== null;
  const onVictim = (r: HoldRecord) =>
    (seenAt.get(`${r.sourceAddress}:${r.sourcePort}`) ?? []).some((s) => s.mux === victim && s.us < eventUs);
  const onDrained = recs.filter((r) => r.backends[0] === drained);
  const failed = recs.filter((r) => !r.ok);
  const movedAll = recs.filter(moved);
  const byKill = movedAll.filter((r) => movedAt(r)! >= eventUs);
  const fromVictim = byKill.filter(onVictim).length;
  const byTimeout = movedAll.length - byKill.length;
  // moved once every MUX had the new table: placed away from the drained backend for sure
  const movedDrained = onDrained.filter((r) => moved(r) && movedAt(r)! >= drainedUs);
  const duringDrain = onDrained.filter((r) => moved(r) && movedAt(r)! < drainedUs).length;
  const explained = failed.filter((r) => r.backends[0] === drained && moved(r));
  c.check(
    fromVictim > 0,
    `connections that were on ${victim} moved to another MUX after the kill (MUX captures)`,
    `${movedAll.length} moved after the drain began: ${byKill.length} after the kill (${fromVictim} of them from ${victim}), ${byTimeout} before it (a retransmission timeout: a new flow hash)`,
  );
  c.check(
    movedDrained.length > 0,
    `some of them had been on the drained ${drained}: the case this half is about happened`,
    `${movedDrained.length} moved connections on ${drained}, of ${onDrained.length} on it${duringDrain > 0 ? `; ${duringDrain} more moved while the drain was being applied (either table)` : ''}`,
  );
  // a new backend answers an unknown connection with RST; rarely the old one's keep-alive timeout closes it first
  c.check(
    failed.every((r) => r.error === 'ECONNRESET' || r.error === 'closed by the server'),
    'the connections that broke were reset (or closed) by a backend, none timed out',
    fmtCounts(countBy(failed, (r) => r.error ?? '?')),
  );
  c.check(
    explained.length === failed.length,
    `every broken connection had been on the drained ${drained} and moved to another MUX (no flow-table entry there, and the new table no longer names ${drained})`,
    `${failed.length} broke: ${explained.length} of them on ${drained} and moved`,
  );
  const movedDrainedBroke = movedDrained.filter((r) => !r.ok).length;
  c.check(
    movedDrainedBroke === movedDrained.length,
    `and each of the ${movedDrained.length} moved connections on ${drained} broke (the other MUX placed it on another backend)`,
    `${movedDrainedBroke} of ${movedDrained.length} broke`,
  );
  c.check(
    recs.filter((r) => r.backends[0] !== drained).every((r) => r.ok),
    `every connection on another backend completed, moved or not`,
    `${recs.filter((r) => r.backends[0] !== drained && r.ok).length} of ${recs.filter((r) => r.backends[0] !== drained).length}`,
  );
  // the lab client exits 1 when a connection failed or saw two backends, 0 when all completed on one
  const wantExit = failed.length > 0 || recs.some((r) => r.backends.length > 1) ? 1 : 0;
  c.check(
    clientExit === wantExit,
    `the client's exit status (${clientExit}) is the one its records call for (${wantExit}: ${failed.length} failed)`,
    `exit ${clientExit}`,
  );
  c.note(
    `measured: of ${recs.length} connections, ${movedAll.length} moved to another MUX after the drain began (${byKill.length} after the kill, ${fromVictim} of them from ${victim}; ${byTimeout} before it) and ${onDrained.length} were on ${drained}; ${failed.length} broke (${((failed.length * 100) / Math.max(1, recs.length)).toFixed(1)} %), ${explained.length} of them on ${drained} and moved; the connections on ${drained} that stayed on their MUX kept it (its flow table)`,
  );
  return c;
}
