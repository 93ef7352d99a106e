#!/usr/bin/env node
// Verifier of the health scenarios (05-08): a run is cut into phases (time windows, each with the lab
// client's records), and each phase's new flows are followed from the captures, with slbx's codecs and
// with tshark:
//   * on the MUXes' fabric side: the flow's first packet (TCP SYN, or the UDP datagram) inside VXLAN,
//     whose inner destination MAC names the backend the MUX chose;
//   * on each backend's eth0: the same flow arriving at DIP:backend-port (health probes, which come
//     from the network's gateway address, are left out);
//   * the client's record: which backend answered, and whether it succeeded.
// Each record must agree with both captures, and each phase's expectations must hold.
//
//   phases.js --run RUN --vip ADDR --port N [--protocol tcp|udp]
//             [--long SRC,SPORT,NIC,CHANGE_US]...          a long flow that must stay on NIC across a change
//             [--maglev PHASE,BEFORE.yaml,AFTER.yaml,NIC]  new flows of PHASE after NIC joined the pool
//
// RUN/phases.txt, one phase per line (scripts/scenarios/lib/health.sh hc_phase):
//   NAME START_US END_US CLIENT_JSON [EXPECT...]
// EXPECT tokens: allok (every request succeeded) | count=N (records) | only=A,B (new flows reach only
//   these backends, and each of them some) | none=A,B (these get no new flow) |
//   split=A:30,B:70,tol:2 (each backend's share of the new flows, in percent, within tol points)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMain } from '../../../runtime/command.js';
import { parseIpAddr, type IpAddr } from '../../../shared/addr.js';
import type { SlbxConfig } from '../../../shared/config.js';
import { oracleRule } from '../../oracle/expected-backend.js';
import { readClientRecordsOf, type HttpRecord, type UdpRecord } from '../../lab/client.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields, type CapturedPacket } from './check.js';
import { binomialBounds, fmtBinomial, withinBinomial } from './stats.js';

interface Phase {
  name: string;
  startUs: number;
  endUs: number;
  clientJson: string;
  expect: string[];
}
interface ClientRecord {
  src: string;
  sport: number;
  ok: boolean;
  backend: string | null;
  error: string | null;
}
interface FlowSeen {
  key: string;
  src: string;
  sport: number;
  nic: string;
  tsUs: number;
  id: string;
}

function readPhases(run: string): Phase[] {
  const file = join(run, 'phases.txt');
  if (!existsSync(file)) throw new Error(`${file} is missing`);
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [name, s, e, json, ...expect] = l.trim().split(/\s+/);
      return { name: name!, startUs: Number(s), endUs: Number(e), clientJson: json!, expect };
    });
}

/** A phase's records: client.js http (TCP) or udp (UDP) --json FILE. */
function readRecords(path: string, proto: 'tcp' | 'udp'): ClientRecord[] {
  const records: (HttpRecord | UdpRecord)[] = readClientRecordsOf(path, proto === 'tcp' ? 'http' : 'udp');
  return records.map((r) => ({
    src: unmap(r.sourceAddress ?? '?'),
    sport: r.sourcePort ?? -1,
    ok: r.ok,
    backend: r.backend,
    error: r.error,
  }));
}

function unmap(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

const keyOf = (src: string, sport: number) => `${src}|${sport}`;

/** The layers after the VXLAN header (inner Ethernet, IP, L4), or null when not VXLAN. */
function innerOf(p: CapturedPacket) {
  const i = p.d.layers.findIndex((l) => l.layer === 'vxlan');
  if (i < 0) return null;
  const rest = p.d.layers.slice(i + 1);
  const eth = rest.find((l) => l.layer === 'eth') as { dst: string } | undefined;
  const ip = rest.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as { src: string; dst: string } | undefined;
  const tcp = rest.find((l) => l.layer === 'tcp') as { srcPort: number; dstPort: number; flags: number; seq: number } | undefined;
  const udp = rest.find((l) => l.layer === 'udp') as { srcPort: number; dstPort: number } | undefined;
  return eth && ip ? { eth, ip, tcp, udp } : null;
}

function outerOf(p: CapturedPacket) {
  const ip = p.d.layers.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as { src: string; dst: string } | undefined;
  const tcp = p.d.layers.find((l) => l.layer === 'tcp') as
    { srcPort: number; dstPort: number; flags: number; payloadLen: number; seq: number } | undefined;
  const udp = p.d.layers.find((l) => l.layer === 'udp') as { srcPort: number; dstPort: number } | undefined;
  return { ip, tcp, udp };
}

const SYN = 0x02;
const ACK = 0x10;

export interface PhasesContext {
  config: SlbxConfig;
  vip: IpAddr;
  port: number;
  proto: 'tcp' | 'udp';
  backendPort: number;
  pool: string;
  probe: string | null;
  gateways: Set<string>;
  nicByMac: Map<string, string>;
  dipOf: Map<string, string>;
  mux: { name: string; packets: CapturedPacket[] }[];
  nics: { name: string; packets: CapturedPacket[] }[];
}

/** First packet of every client flow to VIP:port inside VXLAN on the MUXes, by flow. */
function muxFlows(x: PhasesContext): FlowSeen[] {
  const out: FlowSeen[] = [];
  const seen = new Set<string>();
  for (const m of x.mux) {
    for (const p of m.packets) {
      const inner = innerOf(p);
      if (inner === null || inner.ip.dst !== x.vip.text) continue;
      const l4 = x.proto === 'tcp' ? inner.tcp : inner.udp;
      if (l4 === undefined || l4.dstPort !== x.port) continue;
      if (x.proto === 'tcp' && ((inner.tcp!.flags & SYN) === 0 || (inner.tcp!.flags & ACK) !== 0)) continue;
      const key = keyOf(inner.ip.src, l4.srcPort);
      const nic = x.nicByMac.get(inner.eth.dst) ?? `?${inner.eth.dst}`;
      // one connection: a retransmitted SYN has the same initial sequence number (a source port is
      // reused by later connections, with other ones); every UDP datagram of the client is a flow
      const id = x.proto === 'tcp' ? `${key}|${(inner.tcp as { seq?: number }).seq}` : `${key}|${p.tsUs}|${m.name}`;
      if (seen.has(id)) continue;
      seen.add(id);
      out.push({ key, src: inner.ip.src, sport: l4.srcPort, nic, tsUs: p.tsUs, id });
    }
  }
  return out.sort((a, b) => a.tsUs - b.tsUs);
}

/** First packet of every client flow arriving at a backend's DIP:backend-port, by flow. */
function nicFlows(x: PhasesContext): FlowSeen[] {
  const out: FlowSeen[] = [];
  for (const n of x.nics) {
    const dip = x.dipOf.get(n.name);
    const seen = new Set<string>();
    for (const p of n.packets) {
      const o = outerOf(p);
      if (o.ip === undefined || o.ip.dst !== dip || x.gateways.has(o.ip.src)) continue;
      const l4 = x.proto === 'tcp' ? o.tcp : o.udp;
      if (l4 === undefined || l4.dstPort !== x.backendPort) continue;
      if (x.proto === 'tcp' && ((o.tcp!.flags & SYN) === 0 || (o.tcp!.flags & ACK) !== 0)) continue;
      const key = keyOf(o.ip.src, l4.srcPort);
      const id = x.proto === 'tcp' ? `${key}|${(o.tcp as { seq?: number }).seq}` : `${key}|${p.tsUs}`;
      if (seen.has(id)) continue;
      seen.add(id);
      out.push({ key, src: o.ip.src, sport: l4.srcPort, nic: n.name, tsUs: p.tsUs, id });
    }
  }
  return out.sort((a, b) => a.tsUs - b.tsUs);
}

/** tshark's count of client flows per backend in a window (first packets, deduplicated by source). */
function tsharkNicFlows(run: string, x: PhasesContext, ph: Phase): Map<string, number> | null {
  const m = new Map<string, number>();
  const v6 = x.vip.family === 6;
  const a = v6 ? 'ipv6' : 'ip';
  for (const n of x.nics) {
    const dip = x.dipOf.get(n.name)!;
    const gw = [...x.gateways].filter((g) => g.includes(':') === v6);
    const l4 =
      x.proto === 'tcp' ? `tcp.dstport == ${x.backendPort} && tcp.flags.syn == 1 && tcp.flags.ack == 0` : `udp.dstport == ${x.backendPort}`;
    const filter =
      `${a}.dst == ${dip} && ${gw.map((g) => `!(${a}.src == ${g})`).join(' && ') || 'frame'} && ${l4}` +
      ` && frame.time_epoch >= ${(ph.startUs / 1e6).toFixed(6)} && frame.time_epoch <= ${(ph.endUs / 1e6).toFixed(6)}`;
    const rows = tsharkFields(
      join(run, 'pcaps', `${n.name}.pcap`),
      [`${a}.src`, x.proto === 'tcp' ? 'tcp.srcport' : 'udp.srcport', x.proto === 'tcp' ? 'tcp.seq_raw' : 'frame.number'],
      filter,
      [],
    );
    if (rows === null) return null;
    m.set(n.name, new Set(rows.map((r) => r.join('|'))).size);
  }
  return m;
}

function parseExpect(tokens: readonly string[]) {
  const e = {
    allok: false,
    count: -1,
    only: null as string[] | null,
    none: [] as string[],
    split: null as Map<string, number> | null,
    tol: 2,
  };
  for (const t of tokens) {
    if (t === 'allok') e.allok = true;
    else if (t.startsWith('count=')) e.count = Number(t.slice(6));
    else if (t.startsWith('only=')) e.only = t.slice(5).split(',');
    else if (t.startsWith('none=')) e.none = t.slice(5).split(',');
    else if (t.startsWith('split=')) {
      e.split = new Map();
      for (const part of t.slice(6).split(',')) {
        const [k, v] = part.split(':');
        if (k === 'tol') e.tol = Number(v);
        else e.split.set(k!, Number(v));
      }
    } else throw new Error(`unknown expectation ${t}`);
  }
  return e;
}

export function verifyPhases(argv: readonly string[]): Checks {
  const f = flagsOf(argv.filter((a, i) => !(a === '--long' || a === '--maglev' || argv[i - 1] === '--long' || argv[i - 1] === '--maglev')));
  const longs: string[] = [];
  const maglevs: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--long') longs.push(argv[++i]!);
    else if (argv[i] === '--maglev') maglevs.push(argv[++i]!);
  }
  const run = need(f, 'run');
  const config = loadConfig(join(run, 'config.yaml'));
  const vip = parseIpAddr(need(f, 'vip'))!;
  const port = Number(need(f, 'port'));
  const proto = (f.get('protocol') ?? 'tcp') as 'tcp' | 'udp';
  const vipCfg = config.vips.find((v) => v.address.text === vip.text);
  if (vipCfg === undefined) throw new Error(`no VIP ${vip.text} in ${run}/config.yaml`);
  const rule = vipCfg.rules.find((r) => r.frontendPort === port && r.protocols.includes(proto === 'tcp' ? 6 : 17));
  if (rule === undefined) throw new Error(`no ${proto} rule for ${vip.text}:${port}`);
  const pool = config.pools.find((p) => p.name === rule.pool)!;
  const network = config.networks.find((n) => n.name === pool.network)!;
  const poolNics = config.nics.filter((n) => n.network === network.name);
  const x: PhasesContext = {
    config,
    vip,
    port,
    proto,
    backendPort: rule.backendPort,
    pool: pool.name,
    probe: rule.probe,
    gateways: new Set([network.gateway?.text, network.gateway6?.text].filter((g): g is string => g != null)),
    nicByMac: new Map(poolNics.map((n) => [[...n.mac].map((b) => b.toString(16).padStart(2, '0')).join(':'), n.name])),
    dipOf: new Map(poolNics.map((n) => [n.name, (vip.family === 4 ? n.address4 : n.address6)?.text ?? '?'])),
    mux: config.muxes.map((m) => ({ name: m.name, packets: loadCapture(join(run, 'pcaps', `${m.name}.pcap`)) })),
    nics: poolNics
      .filter((n) => existsSync(join(run, 'pcaps', `${n.name}.pcap`)))
      .map((n) => ({ name: n.name, packets: loadCapture(join(run, 'pcaps', `${n.name}.pcap`)) })),
  };
  const c = new Checks();
  const allMux = muxFlows(x);
  const allNic = nicFlows(x);
  const phases = readPhases(run);
  const flowsByPhase = new Map<string, FlowSeen[]>();
  for (const ph of phases) {
    const e = parseExpect(ph.expect);
    const inWin = (fl: FlowSeen) => fl.tsUs >= ph.startUs && fl.tsUs <= ph.endUs;
    const mux = allMux.filter(inWin);
    const nic = allNic.filter(inWin);
    flowsByPhase.set(ph.name, mux);
    const records = readRecords(ph.clientJson, proto);
    const ok = records.filter((r) => r.ok);
    const failed = records.filter((r) => !r.ok);
    const byBackend = countBy(ok, (r) => r.backend ?? '?');
    c.note(
      `phase ${ph.name}: ${records.length} ${proto === 'tcp' ? 'requests' : 'flows'}, ${ok.length} ok; answered by ${fmtCounts(byBackend)}`,
    );
    if (e.count >= 0)
      c.check(
        records.length === e.count,
        `${ph.name}: the client made ${e.count} ${proto === 'tcp' ? 'requests' : 'flows'}`,
        `${records.length}`,
      );
    if (e.allok)
      c.check(
        failed.length === 0 && records.length > 0,
        `${ph.name}: every one succeeded`,
        failed.length === 0 ? `${ok.length} ok` : `${failed.length} failed: ${fmtCounts(countBy(failed, (r) => r.error ?? '?'))}`,
      );

    // each answered request: the MUX chose its backend, and the backend saw the flow
    // a source port may serve several connections of a phase: the backend must be among their choices
    const byKey = (fl: FlowSeen[]) => {
      const m = new Map<string, Set<string>>();
      for (const f of fl) {
        const s = m.get(f.key) ?? new Set();
        s.add(f.nic);
        m.set(f.key, s);
      }
      return m;
    };
    const muxByKey = byKey(mux);
    const nicByKey = byKey(nic);
    const muxDisagree = ok.filter((r) => !(muxByKey.get(keyOf(r.src, r.sport))?.has(r.backend ?? '') ?? false));
    const nicDisagree = ok.filter((r) => !(nicByKey.get(keyOf(r.src, r.sport))?.has(r.backend ?? '') ?? false));
    c.check(
      muxDisagree.length === 0,
      `${ph.name}: every answer came from the backend the MUX chose for its flow (VXLAN inner MAC)`,
      muxDisagree.length === 0
        ? `${ok.length} flows`
        : `${muxDisagree.length} disagree, e.g. ${JSON.stringify(muxDisagree[0])} -> mux ${[...(muxByKey.get(keyOf(muxDisagree[0]!.src, muxDisagree[0]!.sport)) ?? [])].join(',') || 'none'}`,
    );
    c.check(
      nicDisagree.length === 0,
      `${ph.name}: and that backend received the flow at DIP:${x.backendPort}`,
      nicDisagree.length === 0 ? `${ok.length} flows` : `${nicDisagree.length} disagree`,
    );

    const muxCounts = countBy(mux, (m) => m.nic);
    const nicCounts = countBy(nic, (m) => m.nic);
    c.note(`phase ${ph.name}: new flows at the MUXes by backend: ${fmtCounts(muxCounts)}; at the backends: ${fmtCounts(nicCounts)}`);
    const excluded = new Set([...e.none, ...(e.only === null ? [] : [...x.dipOf.keys()].filter((n) => !e.only!.includes(n)))]);
    if (excluded.size > 0) {
      const bad = [...excluded].filter((n) => (muxCounts.get(n) ?? 0) > 0 || (nicCounts.get(n) ?? 0) > 0);
      c.check(
        bad.length === 0,
        `${ph.name}: no new flow reached ${[...excluded].sort().join(', ')}`,
        bad.length === 0
          ? 'none in the MUX or backend captures'
          : bad.map((n) => `${n}: ${muxCounts.get(n) ?? 0} at MUXes, ${nicCounts.get(n) ?? 0} at the backend`).join('; '),
      );
    }
    if (e.only !== null) {
      const missing = e.only.filter((n) => (byBackend.get(n) ?? 0) === 0);
      c.check(
        missing.length === 0,
        `${ph.name}: each of ${e.only.join(', ')} got new flows`,
        missing.length === 0 ? fmtCounts(byBackend) : `none for ${missing.join(', ')}`,
      );
    }
    if (e.split !== null) {
      const total = ok.length;
      const parts = [...e.split].map(([n, want]) => ({
        n,
        want,
        got: total === 0 ? 0 : (100 * (byBackend.get(n) ?? 0)) / total,
        mux: total === 0 ? 0 : (100 * (muxCounts.get(n) ?? 0)) / mux.length,
      }));
      const within = parts.every((p) => Math.abs(p.got - p.want) <= e.tol && Math.abs(p.mux - p.want) <= e.tol);
      c.check(
        within,
        `${ph.name}: the split of ${total} new flows is within ${e.tol} points of ${parts.map((p) => `${p.n} ${p.want} %`).join(' / ')}`,
        parts.map((p) => `${p.n} ${p.got.toFixed(2)} % (MUX captures ${p.mux.toFixed(2)} %)`).join(', '),
      );
    }
    // tshark, independently: client flows arriving at each backend in the window
    const ts = tsharkNicFlows(run, x, ph);
    if (ts === null)
      c.check(false, `${ph.name}: tshark finds the same new flows at each backend`, 'tshark could not be run: no cross-check');
    else {
      const same = [...x.dipOf.keys()]
        .filter((n) => x.nics.some((y) => y.name === n))
        .every((n) => (ts.get(n) ?? 0) === (nicCounts.get(n) ?? 0));
      c.check(
        same,
        `${ph.name}: tshark finds the same new flows at each backend`,
        `tshark ${fmtCounts(new Map([...ts].filter(([, v]) => v > 0)))}`,
      );
    }
  }

  for (const spec of longs) {
    const [src = '', sport = '', nicName = '', changeUs = ''] = spec.split(',');
    const key = keyOf(src, Number(sport));
    const change = Number(changeUs);
    let before = 0;
    let after = 0;
    const elsewhere = new Map<string, number>();
    for (const m of x.mux) {
      for (const p of m.packets) {
        const inner = innerOf(p);
        if (inner === null || inner.tcp === undefined || inner.ip.dst !== vip.text || inner.tcp.dstPort !== port) continue;
        if (keyOf(inner.ip.src, inner.tcp.srcPort) !== key) continue;
        const n = x.nicByMac.get(inner.eth.dst) ?? '?';
        if (n !== nicName) elsewhere.set(n, (elsewhere.get(n) ?? 0) + 1);
        else if (p.tsUs < change) before++;
        else after++;
      }
    }
    c.check(
      before > 0 && after > 0 && elsewhere.size === 0,
      `the long flow ${src}:${sport} kept going to ${nicName} across the change (MUX captures)`,
      `${before} packets before, ${after} after; elsewhere: ${elsewhere.size === 0 ? 'none' : fmtCounts(elsewhere)}`,
    );
    const nicCap = x.nics.find((n) => n.name === nicName);
    if (nicCap !== undefined) {
      const dip = x.dipOf.get(nicName);
      let sentAfter = 0;
      for (const p of nicCap.packets) {
        const o = outerOf(p);
        if (
          o.ip !== undefined &&
          o.tcp !== undefined &&
          o.ip.src === dip &&
          o.tcp.srcPort === x.backendPort &&
          o.tcp.dstPort === Number(sport) &&
          o.ip.dst === src &&
          o.tcp.payloadLen > 0 &&
          p.tsUs >= change
        )
          sentAfter++;
      }
      c.check(sentAfter > 0, `${nicName} kept sending the long flow's data after the change`, `${sentAfter} data segments after it`);
    }
  }

  for (const spec of maglevs) {
    const [phaseName, beforePath, afterPath, added] = spec.split(',');
    const flows = flowsByPhase.get(phaseName!) ?? [];
    const before = loadConfig(beforePath!);
    const after = loadConfig(afterPath!);
    // the tables before and after, and each flow's choice: the independent oracle's (scripts/oracle), from
    // the config files alone, not the MUX's code
    const protoNum = proto === 'tcp' ? 6 : 17;
    const tb = oracleRule(before, vip.text, protoNum, port);
    const ta = oracleRule(after, vip.text, protoNum, port);
    let movedSlots = 0;
    let movedToAdded = 0;
    for (let i = 0; i < tb.size; i++) {
      const a = tb.table[i] ?? '-';
      const b = ta.table[i] ?? '-';
      if (a !== b) {
        movedSlots++;
        if (b === added) movedToAdded++;
      }
    }
    c.note(
      `Maglev (table size ${tb.size}, the oracle's tables): adding ${added} moved ${movedSlots} slots (${((100 * movedSlots) / tb.size).toFixed(2)} %), ${movedToAdded} of them to ${added}`,
    );
    const choose = (t: typeof tb, fl: FlowSeen) => t.choose(fl.src, fl.sport) ?? '-';
    // a connection that reuses the 5-tuple of an earlier one may follow that one's flow entry: only
    // 5-tuples new to the whole run show the table's choice
    const firstSeen = new Map<string, number>();
    for (const fl of allMux) if (!firstSeen.has(fl.key)) firstSeen.set(fl.key, fl.tsUs);
    const fresh = flows.filter((fl) => firstSeen.get(fl.key) === fl.tsUs);
    if (fresh.length < flows.length)
      c.note(
        `${phaseName}: ${flows.length - fresh.length} of ${flows.length} new flows reuse an earlier 5-tuple and are left out of the Maglev checks`,
      );
    const matchAfter = fresh.filter((fl) => choose(ta, fl) === fl.nic).length;
    const moved = fresh.filter((fl) => choose(tb, fl) !== fl.nic);
    const movedTo = countBy(moved, (fl) => fl.nic);
    c.check(
      fresh.length > 0 && matchAfter === fresh.length,
      `${phaseName}: every new flow went where the new Maglev table says (the independent oracle's choice)`,
      `${matchAfter} of ${fresh.length}`,
    );
    const share = fresh.length === 0 ? 0 : moved.length / fresh.length;
    const members = ta.members.filter((m) => m.available).length;
    // binomial counts over the flows (each 5-tuple hash an independent draw), within 6 standard
    // deviations: the moved ones at the share of slots the tables moved (about 1/members), and those
    // moved to another backend than the added one at the share of slots Maglev moved between the old
    // backends (0 if it moved none: then "all of them to the new backend" exactly)
    const movedB = binomialBounds(fresh.length, movedSlots / tb.size);
    const elsewhere = moved.length - (movedTo.get(added!) ?? 0);
    const elsewhereB = binomialBounds(fresh.length, (movedSlots - movedToAdded) / tb.size);
    c.check(
      fresh.length > 0 &&
        Math.abs(movedSlots / tb.size - 1 / members) <= 0.01 &&
        withinBinomial(moved.length, movedB) &&
        withinBinomial(elsewhere, elsewhereB),
      `${phaseName}: about 1/${members} of the new flows moved from where the old table would have put them (the tables moved ${((100 * movedSlots) / tb.size).toFixed(1)} % of their slots), to ${added} but for the slots Maglev moved between the old backends`,
      `${moved.length} of ${fresh.length} (${(100 * share).toFixed(1)} %) moved: ${fmtCounts(movedTo)}; moved ${fmtBinomial(moved.length, movedB)}; elsewhere than ${added} ${fmtBinomial(elsewhere, elsewhereB)}`,
    );
  }
  return c;
}

if (isMain(import.meta.url)) {
  try {
    verifyPhases(process.argv.slice(2)).exit();
  } catch (e) {
    process.stderr.write(`phases: ${(e as Error).message}\n`);
    process.exit(2);
  }
}
