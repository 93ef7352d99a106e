// Scenario 17 (SYN flood): the flood's trafgen config, and the verifier.
//
//   verify.js gen-syn-flood --out FILE --src-mac M --dst-mac M --vip A --port N --spoof A.B.0.0/16
//     writes a trafgen config of one TCP SYN to VIP:port, built with the project's packet builder, whose
//     source address (the last two bytes), source port, sequence number and IP id trafgen draws at random
//     per packet (drnd()), with the IPv4 and TCP checksums computed per packet (csumip, csumtcp): a
//     spoofed-source SYN flood from 65,536 addresses x 65,536 ports.
//   verify.js syn-flood --run RUN --vip A --port N --spoof A.B.0.0/16 --hold-json F --http-json F --http-status N
//     checks scenario 17 from what the run recorded: snapshots before and after the flood and the
//     generator's-ceiling phase (RUN/snap/NAME/: counters of the MUX and the host agents, nstat of the
//     router, the MUX and the backends, interface counters, the MUX's tables generation), the flood's
//     steps (RUN/ramp.txt, RUN/flood-times.txt, trafgen's logs), the MUX's flow table after the flood
//     (RUN/flows-after-flood.json), its memory every 0.1 s (RUN/rss.txt), the daemons' logs, the lab
//     client's records and the captures (RUN/pcaps/: router-client1 and mux1 with the flood slice and,
//     at the MUX, the good traffic; router-fab0 with the slice's SYN-ACKs and the router's ICMP;
//     router-br0 and client1 with anything addressed to the spoofed range), decoded with slbx's codecs
//     and recounted with tshark.
//
// The captures hold a deterministic slice of the flood, the SYNs whose source port's high byte is
// SLICE_PORT_HIGH_BYTE (ports 1024-1279, 1/256 of the flood), so that tcpdump keeps up and drops nothing.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseIpAddr } from '../../../shared/addr.js';
import { pkt } from '../../../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../../../shared/tcp.js';
import { ICMP_DEST_UNREACH } from '../../../shared/icmp.js';
import { FlowTable } from '../../../mux/flow-table.js';
import { DEFAULT_CAPTURE_BUFFER_BYTES } from '../../../runtime/pcap-port.js';
import { expectedBackend, readJson } from './bgp.js';
import { readClientJson } from '../../lab/client.js';
import {
  Checks,
  countBy,
  flagsOf,
  fmtCounts,
  innerIpPacket,
  loadCapture,
  loadConfig,
  need,
  outerIpPacket,
  tsharkFields,
  tsharkUnavailable,
  hex,
  type CapturedPacket,
} from './check.js';

/** The flood slice the captures keep: source ports whose high byte is this (1024-1279). */
export const SLICE_PORT_HIGH_BYTE = 4;
/**
 * The JavaScript heap's allowance in the memory bound: V8's young generation at its largest, two
 * semi-spaces of 16 MiB (the default of a 64-bit Node without --max-semi-space-size). Under a flood it
 * grows from 1 MiB semi-spaces towards that; the old generation holds the daemon's long-lived objects.
 */
const V8_YOUNG_GENERATION_MAX_BYTES = 2 * 16 * 1048576;
/** TCP window of the flood's SYNs (a Linux client's). */
const FLOOD_WINDOW = 64240;
/** RFC 792: destination unreachable, code 0 (net unreachable), what a router sends for a packet it has no route for. */
const ICMP_CODE_NET_UNREACH = 0;

// ---------------------------------------------------------------------------------------------
// the flood's trafgen config

/** trafgen's byte syntax for `frame`: `cells` replaces the byte at an offset (a 2-byte function skips the next). */
function toTrafgenCells(frame: Uint8Array, cells: ReadonlyMap<number, { text: string; width: 1 | 2 }>, comment: string): string {
  const out: string[] = [];
  for (let i = 0; i < frame.length; i++) {
    const c = cells.get(i);
    if (c !== undefined) {
      out.push(c.text);
      i += c.width - 1;
      continue;
    }
    out.push(`0x${frame[i]!.toString(16).padStart(2, '0')}`);
  }
  const rows: string[] = [];
  for (let i = 0; i < out.length; i += 12) rows.push(`  ${out.slice(i, i + 12).join(', ')},`);
  return `/* ${comment} */\n{\n${rows.join('\n')}\n}\n`;
}

export function generateSynFlood(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const spoof = need(f, 'spoof');
  const m = /^(\d+\.\d+)\.0\.0\/16$/.exec(spoof);
  if (m === null || parseIpAddr(`${m[1]}.0.0`) === null) throw new Error(`--spoof must be an IPv4 /16 (A.B.0.0/16), got ${spoof}`);
  const base = `${m[1]}.0.0`;
  const port = Number(need(f, 'port'));
  const frame = pkt()
    .eth({ src: need(f, 'src-mac'), dst: need(f, 'dst-mac') })
    .ipv4({ src: base, dst: need(f, 'vip'), ttl: 64, id: 0 })
    .tcp({ sport: 1024, dport: port, seq: 0, flags: TCP_SYN, window: FLOOD_WINDOW })
    .build();
  const ip = 14;
  const tcp = ip + 20;
  if (frame.length !== tcp + 20) throw new Error(`unexpected SYN frame length ${frame.length}`);
  const cells = new Map<number, { text: string; width: 1 | 2 }>();
  const rnd = (off: number) => cells.set(off, { text: 'drnd()', width: 1 });
  rnd(ip + 4);
  rnd(ip + 5); // IP id
  rnd(ip + 14);
  rnd(ip + 15); // the last two bytes of the source address
  rnd(tcp);
  rnd(tcp + 1); // source port
  for (let i = 4; i < 8; i++) rnd(tcp + i); // sequence number
  cells.set(ip + 10, { text: `csumip(${ip}, ${tcp - 1})`, width: 2 });
  cells.set(tcp + 16, { text: `csumtcp(${ip}, ${tcp})`, width: 2 });
  writeFileSync(
    need(f, 'out'),
    toTrafgenCells(
      frame,
      cells,
      `${frame.length}-byte TCP SYN ${spoof}:random -> ${need(f, 'vip')}:${port}, random source address, port, sequence and IP id; checksums per packet`,
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// snapshots written by the scenario (scripts/scenarios/17-syn-flood.sh sc17_snap)

interface Snap {
  us: number;
  mux: Record<string, number>;
  hosts: Map<string, Record<string, number>>;
  nstat: Map<string, Map<string, number>>;
  ifaces: Map<string, { rx: number; tx: number }>;
  generation: number;
}

function readNstat(path: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const p = line.trim().split(/\s+/);
    if (p.length >= 2 && /^[A-Za-z]/.test(p[0]!) && /^\d+$/.test(p[1]!)) m.set(p[0]!, Number(p[1]));
  }
  return m;
}

function readSnap(run: string, name: string): Snap {
  const dir = join(run, 'snap', name);
  if (!existsSync(dir)) throw new Error(`snapshot ${dir} is missing`);
  const hosts = new Map<string, Record<string, number>>();
  const nstat = new Map<string, Map<string, number>>();
  for (const file of readdirSync(dir)) {
    const h = /^host-(.+)\.json$/.exec(file);
    if (h !== null) hosts.set(h[1]!, readJson(join(dir, file)));
    const n = /^nstat-(.+)\.txt$/.exec(file);
    if (n !== null) nstat.set(n[1]!, readNstat(join(dir, file)));
  }
  const ifaces = new Map<string, { rx: number; tx: number }>();
  for (const line of readFileSync(join(dir, 'ifaces.txt'), 'utf8').split('\n')) {
    const [node, iface, rx, tx] = line.trim().split(/\s+/);
    if (node !== undefined && iface !== undefined && rx !== undefined) ifaces.set(`${node}/${iface}`, { rx: Number(rx), tx: Number(tx) });
  }
  return {
    us: Number(readFileSync(join(dir, 'us'), 'utf8').trim()),
    mux: readJson(join(dir, 'mux.json')),
    hosts,
    nstat,
    ifaces,
    generation: Number(readFileSync(join(dir, 'generation'), 'utf8').trim()),
  };
}

/** Deltas of a counter object between two snapshots (every key of the later one). */
function delta(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const d: Record<string, number> = {};
  for (const [k, v] of Object.entries(b)) if (typeof v === 'number') d[k] = v - (a[k] ?? 0);
  return d;
}

const nz = (d: Record<string, number>, prefix = '') => Object.entries(d).filter(([k, v]) => v !== 0 && k.startsWith(prefix));
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const mb = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;

function ifaceDelta(a: Snap, b: Snap, key: string, dir: 'rx' | 'tx'): number {
  const x = a.ifaces.get(key);
  const y = b.ifaces.get(key);
  if (x === undefined || y === undefined) throw new Error(`interface counters of ${key} are missing from a snapshot`);
  return y[dir] - x[dir];
}

function nstatDelta(a: Snap, b: Snap, node: string, name: string): number {
  return (b.nstat.get(node)?.get(name) ?? 0) - (a.nstat.get(node)?.get(name) ?? 0);
}

/** Memory samples "EPOCH_US VmRSS_KB RssAnon_KB RssFile_KB", in bytes. */
function readRss(path: string): { us: number; rss: number; anon: number; file: number }[] {
  const out: { us: number; rss: number; anon: number; file: number }[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const [t, rss, anon, file] = line.trim().split(/\s+/).map(Number);
    if (t === undefined || rss === undefined || anon === undefined || file === undefined || Number.isNaN(file)) continue;
    out.push({ us: t, rss: rss * 1024, anon: anon * 1024, file: file * 1024 });
  }
  return out;
}

/** Bytes of a MUX flow table of one family filled to `entries` (the product's own table: capacity doubles at load 0.75). */
function tableBytesAt(keyWords: 4 | 10, entries: number): number {
  const t = new FlowTable(keyWords, { max: entries, count: 0 });
  const k = t.key;
  for (let i = 0; i < entries; i++) {
    k.fill(0);
    k[0] = i;
    k[k.length - 1] = (i * 2654435761) >>> 0;
    t.insert(Math.imul(i, 0x9e3779b1) >>> 0, 0, 100);
  }
  return t.bytes;
}

/** tshark's fields per packet with IPv4 and TCP checksum verification on (status 1: good); null without tshark (a FAIL at exit()). */
function tsharkChecked(path: string, fields: string[]): string[][] | null {
  const args = ['-r', path, '-o', 'ip.check_checksum:TRUE', '-o', 'tcp.check_checksum:TRUE', '-T', 'fields', '-E', 'separator=/t'];
  for (const x of fields) args.push('-e', x);
  const r = spawnSync('tshark', args, { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.error) {
    tsharkUnavailable(path, r.error);
    return null;
  } // the verifier fails at exit()
  if (r.status !== 0) throw new Error(`tshark failed on ${path}: ${r.stderr}`);
  const text = r.stdout.trimEnd();
  return text === '' ? [] : text.split('\n').map((l) => l.split('\t'));
}

/** Times (epoch us) of a daemon's log events of a kind. */
function muxLogTimes(path: string, event: string): number[] {
  if (!existsSync(path)) return [];
  const out: number[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.includes(`"event":"${event}"`)) continue;
    try {
      out.push(Date.parse(JSON.parse(line).ts) * 1000);
    } catch {
      /* not a log line */
    }
  }
  return out;
}

/** The controller's reasons for new generations between two times. */
function controllerCauses(path: string, fromUs: number, toUs: number): string[] {
  if (!existsSync(path)) return [];
  const out: string[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.includes('"event":"generation"')) continue;
    try {
      const j = JSON.parse(line);
      const us = Date.parse(j.ts) * 1000;
      if (us >= fromUs && us <= toUs) out.push(String(j.cause));
    } catch {
      /* not a log line */
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// the verifier

interface Seen {
  src: string;
  sport: number;
  nic: string | null;
  tsUs: number;
  ip: Uint8Array;
  syn: boolean;
  hasData: boolean;
}

function tcpOf(p: CapturedPacket) {
  return p.d.first('tcp');
}

function ipv4Of(p: CapturedPacket) {
  return p.d.first('ipv4');
}

/** For a VXLAN frame: the inner layers (after the VXLAN header). */
function innerLayers(p: CapturedPacket) {
  const i = p.d.layers.findIndex((l) => l.layer === 'vxlan');
  if (i < 0) return null;
  const rest = p.d.layers.slice(i + 1);
  const eth = rest.find((l) => l.layer === 'eth') as Extract<CapturedPacket['d']['layers'][number], { layer: 'eth' }> | undefined;
  const ip = rest.find((l) => l.layer === 'ipv4') as Extract<CapturedPacket['d']['layers'][number], { layer: 'ipv4' }> | undefined;
  const tcp = rest.find((l) => l.layer === 'tcp') as Extract<CapturedPacket['d']['layers'][number], { layer: 'tcp' }> | undefined;
  const vx = p.d.layers[i] as Extract<CapturedPacket['d']['layers'][number], { layer: 'vxlan' }>;
  return eth && ip && tcp ? { eth, ip, tcp, vni: vx.vni } : null;
}

export function verifySynFlood(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const spoof = need(f, 'spoof');
  const spoofPrefix = spoof.replace(/\.0\.0\/16$/, '.');
  const config = loadConfig(join(run, 'config.yaml'));
  const ft = config.flowTable;
  const c = new Checks();
  const pre = readSnap(run, 'pre');
  const post = readSnap(run, 'flood');
  const p2pre = readSnap(run, 'p2pre');
  const p2post = readSnap(run, 'p2post');
  const inSpoof = (a: string) => a.startsWith(spoofPrefix);
  const nicMac = new Map(config.nics.map((n) => [Array.from(n.mac, (b) => b.toString(16).padStart(2, '0')).join(':'), n.name]));
  const nicHost = new Map(config.nics.map((n) => [n.name, config.hosts.find((h) => h.name === n.host)!.address.text]));
  const pool = config.pools.find(
    (p) => p.name === config.vips.find((v) => v.address.text === vip)!.rules.find((r) => r.frontendPort === port)!.pool,
  )!;
  const poolNics = new Set(pool.backends.map((b) => b.nic));
  const vni = config.networks.find((n) => n.name === config.nics.find((x) => x.name === pool.backends[0]!.nic)!.network)!.vni;

  const times = new Map(
    readFileSync(join(run, 'flood-times.txt'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const [n, a, b] = l.trim().split(/\s+/);
        return [n!, { startUs: Number(a), endUs: Number(b) }] as const;
      }),
  );
  const t1 = times.get('flood');
  const t2 = times.get('ceiling');
  if (t1 === undefined || t2 === undefined) throw new Error('flood-times.txt lacks the flood or the ceiling phase');

  // ---- 1. the flood: 1 s steps of paced trafgen, the rate following what the lab carries
  const steps = readFileSync(join(run, 'ramp.txt'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [i, a, b, rate, sent, arrived, read, muxTx, hostIn, shareMux, shareHost] = l.trim().split(/\s+/).map(Number);
      return {
        i: i!,
        startUs: a!,
        endUs: b!,
        rate: rate!,
        sent: sent!,
        read: read!,
        arrived: arrived!,
        hostIn: hostIn!,
        muxTx: muxTx!,
        share: Math.min(shareMux!, shareHost!) / 1000,
      };
    });
  const floodSec = (t1.endUs - t1.startUs) / 1e6;
  const sent = ifaceDelta(pre, post, 'client1/eth0', 'tx');
  const pps = sent / floodSec;
  const stepPps = (x: (typeof steps)[number]) => x.sent / ((x.endUs - x.startUs) / 1e6);
  c.note(
    `the flood's steps (requested rate -> sent packets/s, share the lab carried: MUX and host agents): ${steps.map((x) => `${fmt(x.rate / 1000)}k -> ${fmt(stepPps(x) / 1000)}k ${(100 * x.share).toFixed(0)}%`).join(', ')}`,
  );
  const carried = steps.filter((x) => x.share >= 0.97);
  const best = carried.length > 0 ? Math.max(...carried.map(stepPps)) : 0;
  // which limit the flood met depends on the machine (its speed, its other load): measured, not judged
  const labLimited = steps.filter((x) => x.share < 0.97).length;
  const genLimited = steps.filter((x) => stepPps(x) < 0.9 * x.rate).length;
  c.note(
    `the flood met the lab's limit in ${labLimited} of ${steps.length} steps (the MUX or the host agents read less than 97 % of it) and the generator's in ${genLimited} (it sent less than 90 % of the requested rate): measured, not asserted`,
  );
  c.check(
    sent >= 3 * ft.untrustedMaxFlows,
    `the flood: ${fmt(sent)} spoofed SYNs from ${spoof} (random address and port) to ${vip}:${port} in ${floodSec.toFixed(1)} s, at least 3 times the untrusted table (${fmt(ft.untrustedMaxFlows)} entries)`,
    `${fmt(pps)} packets/s on average; the highest step carried in full ${fmt(best)} packets/s; ${fmt(sent / ft.untrustedMaxFlows)}x the untrusted table`,
  );
  const tgLog = existsSync(join(run, 'trafgen-flood.log')) ? readFileSync(join(run, 'trafgen-flood.log'), 'utf8') : '';
  const tgSent = [...tgLog.matchAll(/(\d+) packets outgoing/g)].reduce((n, m) => n + Number(m[1]), 0);
  c.check(tgSent === sent, "trafgen's own count agrees with client1's interface", `${fmt(tgSent)} packets`);

  // the slice on the wire at client1: SYNs from the spoofed range, checksums right, sources spread
  const clientCap = loadCapture(join(run, 'pcaps', 'router-client1.pcap'));
  const sliceSent = clientCap.filter((p) => {
    const ip = ipv4Of(p);
    const t = tcpOf(p);
    return ip !== undefined && t !== undefined && inSpoof(ip.src);
  });
  const bad = sliceSent.filter((p) => {
    const ip = ipv4Of(p)!;
    const t = tcpOf(p)!;
    return (
      ip.dst !== vip ||
      t.dstPort !== port ||
      t.flags !== TCP_SYN ||
      t.srcPort >> 8 !== SLICE_PORT_HIGH_BYTE ||
      ip.checksumOk !== true ||
      t.checksumOk !== true ||
      t.window !== FLOOD_WINDOW
    );
  }).length;
  const srcs = new Set(sliceSent.map((p) => ipv4Of(p)!.src));
  const expectSlice = sent / 256;
  c.check(
    sliceSent.length > 0 && bad === 0,
    `the flood slice as the router received it from client1 (source ports ${SLICE_PORT_HIGH_BYTE * 256}-${SLICE_PORT_HIGH_BYTE * 256 + 255}): every one a SYN to ${vip}:${port} with correct IPv4 and TCP checksums (slbx's codecs)`,
    `${fmt(sliceSent.length)} SYNs from ${fmt(srcs.size)} distinct addresses; ${bad} otherwise`,
  );
  c.check(
    Math.abs(sliceSent.length - expectSlice) <= 0.15 * expectSlice + 30,
    'the slice is 1/256 of what left client1 (the ports are uniformly random)',
    `${fmt(sliceSent.length)} captured, ${fmt(expectSlice)} expected`,
  );
  const others = loadCapture(join(run, 'pcaps', 'client1.pcap')).length;
  c.check(others === 0, `nothing addressed to ${spoof} ever reached client1 (its capture of eth0)`, `${others} packets`);
  const ts = tsharkChecked(join(run, 'pcaps', 'router-client1.pcap'), ['tcp.flags', 'ip.checksum.status', 'tcp.checksum.status']);
  if (ts !== null) {
    const tsBad = ts.filter((r) => r[0] !== '0x0002' || r[1] !== '1' || r[2] !== '1').length;
    c.check(
      ts.length === sliceSent.length && tsBad === 0,
      'tshark recounts the slice and finds every IPv4 and TCP checksum good',
      `${ts.length} frames, ${tsBad} not a SYN or with a checksum not good`,
    );
  }

  // ---- 2. the MUX's counters over the flood
  const md = delta(pre.mux, post.mux);
  const goodSent = ifaceDelta(pre, post, 'client2/eth0', 'tx');
  const read = md.rx_packets! - (md.control_arp ?? 0) - (md.control_nd ?? 0);
  const floodRead = read - goodSent; // a lower bound: every good packet counted as read
  const vipArrived = nstatDelta(pre, post, 'mux1', 'IpInAddrErrors'); // VIP packets the MUX namespace's kernel saw (not local, no forwarding)
  c.note(
    `MUX counters over the flood: ${nz(md)
      .filter(([k]) => !k.includes('bytes'))
      .map(([k, v]) => `${k} +${fmt(v)}`)
      .join(', ')}`,
  );
  c.note(
    `of ${fmt(vipArrived)} VIP packets that reached the MUX's namespace the MUX read ${fmt(read)} (${((100 * read) / Math.max(1, vipArrived)).toFixed(1)} %) by the end of the flood; the other ${fmt(Math.max(0, vipArrived - read))} the kernel dropped when the MUX's capture ring was full, while the MUX waited for CPU (or they were still in the ring): before any slbx code`,
  );
  const untrustedPath = (md.flow_new ?? 0) + (md.flow_untrusted_full ?? 0) + (md.flow_replaced ?? 0);
  c.check(
    untrustedPath >= floodRead && (md.flow_untrusted_full ?? 0) > 0,
    'every flood SYN the MUX read took the untrusted path: recorded as untrusted (flow_new) or, the table full, placed statelessly (flow_untrusted_full)',
    `flow_new +${fmt(md.flow_new ?? 0)}, flow_untrusted_full +${fmt(md.flow_untrusted_full ?? 0)}, flow_replaced +${fmt(md.flow_replaced ?? 0)} >= ${fmt(floodRead)} flood SYNs read (read ${fmt(read)} - ${fmt(goodSent)} sent by the good client)`,
  );
  const turnover = ft.untrustedMaxFlows * (1 + floodSec / Math.max(1, ft.untrustedTimeoutS - 1)) + (md.flow_promoted ?? 0);
  c.check(
    (md.flow_new ?? 0) <= turnover,
    `the untrusted table stayed within its ${fmt(ft.untrustedMaxFlows)} entries: it took no more new flows than its limit refilled once per expiry (${ft.untrustedTimeoutS} s, entries live at least ${ft.untrustedTimeoutS - 1} s on the 1 s clock) plus the flows promoted out of it`,
    `flow_new +${fmt(md.flow_new ?? 0)} <= ${fmt(turnover)}`,
  );
  const drops = nz(md, 'drop_');
  c.check(
    drops.length === 0,
    'the MUX refused nothing it read: no drop counter moved (a full table is not a drop: the Maglev choice still holds)',
    drops.length === 0 ? 'all drop_* +0' : drops.map(([k, v]) => `${k} +${v}`).join(', '),
  );
  c.check(md.tx_packets! >= read, 'it forwarded every packet it read, in VXLAN', `tx_packets +${fmt(md.tx_packets!)}, read ${fmt(read)}`);
  c.check(
    (md.flow_table_full ?? 0) === 0,
    'the main (trusted) table was never full: flow_table_full +0',
    `flow_hit +${fmt(md.flow_hit ?? 0)} (established flows found in it), flow_promoted +${fmt(md.flow_promoted ?? 0)}`,
  );

  // ---- 3. the established connections
  const hold = readClientJson(need(f, 'hold-json'), 'hold');
  const recs = hold.records;
  const failed = recs.filter((r) => !r.ok);
  c.check(
    recs.length === 200 && failed.length === 0,
    `all ${recs.length} established keep-alive connections lived through the flood`,
    `${recs.length - failed.length} ok; ${fmtCounts(countBy(failed, (r) => r.error ?? 'no answer'))}`,
  );
  c.check(
    recs.every((r) => r.error !== 'ECONNRESET'),
    'none was reset',
    `${recs.filter((r) => r.error === 'ECONNRESET').length} ECONNRESET`,
  );
  c.check(
    hold.summary.answered === hold.summary.requests,
    'every request on them was answered',
    `${fmt(hold.summary.answered)} of ${fmt(hold.summary.requests)}; longest wait ${hold.summary.maxGapMs} ms`,
  );
  const expect = expectedBackend(config, vip, 6, port);
  const wrong = recs.filter((r) => r.backends.length !== 1 || r.backends[0] !== expect(r.sourceAddress, r.sourcePort)).length;
  c.check(
    wrong === 0,
    'each was answered by one backend all along, the one the Maglev table names (computed from the config)',
    `${wrong} differ`,
  );
  const flows: { src: string; dst: string; protocol: string; nic: string }[] = readJson(join(run, 'flows-after-flood.json'));
  const inTable = new Map(flows.map((x) => [`${x.src}>${x.dst}/${x.protocol}`, x.nic]));
  const missing = recs.filter((r) => inTable.get(`${r.sourceAddress}:${r.sourcePort}>${vip}:${port}/tcp`) !== r.backends[0]).length;
  c.check(
    missing === 0,
    "right after the flood every one of them was still in the MUX's main flow table (GET /flows), with the backend that answered it",
    `${recs.length - missing} of ${recs.length}; ${flows.length} flows in the table`,
  );

  // ---- 4. the MUX's tables during the flood (a health probe that timed out changes them) and the wire
  const tableChanges = muxLogTimes(join(run, 'logs', 'mux1.log'), 'tables_installed').filter(
    (us) => us >= t1.startUs && us <= t1.endUs + 3_000_000,
  );
  const causes = controllerCauses(join(run, 'logs', 'controller.log'), t1.startUs, t1.endUs + 3_000_000);
  if (tableChanges.length === 0) c.note("the MUX's tables did not change during the flood (every health probe answered)");
  else
    c.note(
      `the MUX's tables changed ${tableChanges.length} time(s) during the flood, because the controller pushed health: ${causes.join('; ') || '?'} (a probe timed out: the host agents' captures were full too)`,
    );
  const muxCap = loadCapture(join(run, 'pcaps', 'mux1.pcap'));
  const arrived: Seen[] = [];
  const forwarded: Seen[] = [];
  for (const p of muxCap) {
    const inner = innerLayers(p);
    if (inner !== null) {
      forwarded.push({
        src: inner.ip.src,
        sport: inner.tcp.srcPort,
        nic: nicMac.get(inner.eth.dst) ?? `?${inner.eth.dst}`,
        tsUs: p.tsUs,
        ip: innerIpPacket(p) ?? new Uint8Array(0),
        syn: (inner.tcp.flags & (TCP_SYN | TCP_ACK)) === TCP_SYN,
        hasData: inner.tcp.payloadLen > 0,
      });
      continue;
    }
    const ip = ipv4Of(p);
    const t = tcpOf(p);
    if (ip === undefined || t === undefined || ip.dst !== vip) continue;
    arrived.push({
      src: ip.src,
      sport: t.srcPort,
      nic: null,
      tsUs: p.tsUs,
      ip: outerIpPacket(p)!,
      syn: (t.flags & (TCP_SYN | TCP_ACK)) === TCP_SYN,
      hasData: t.payloadLen > 0,
    });
  }
  // per good connection: the backends its non-SYN packets went to, its SYNs' backends, its time span at the MUX
  interface ConnAtMux {
    nics: Set<string>;
    synNics: Set<string>;
    firstUs: number;
    lastUs: number;
  }
  const conns = new Map<string, ConnAtMux>();
  for (const x of [...forwarded, ...arrived]) {
    if (inSpoof(x.src)) continue;
    const k = `${x.src}:${x.sport}`;
    let e = conns.get(k);
    if (e === undefined) {
      e = { nics: new Set(), synNics: new Set(), firstUs: x.tsUs, lastUs: x.tsUs };
      conns.set(k, e);
    }
    e.firstUs = Math.min(e.firstUs, x.tsUs);
    e.lastUs = Math.max(e.lastUs, x.tsUs);
    if (x.nic !== null) (x.syn ? e.synNics : e.nics).add(x.nic);
  }
  // per good connection: the backends its segments with data (the request and its retransmissions) went to
  const requestNics = new Map<string, Set<string>>();
  for (const x of forwarded) {
    if (inSpoof(x.src) || !x.hasData) continue;
    const k = `${x.src}:${x.sport}`;
    let set = requestNics.get(k);
    if (set === undefined) {
      set = new Set();
      requestNics.set(k, set);
    }
    set.add(x.nic!);
  }
  const changedDuring = (e: ConnAtMux | undefined) =>
    e !== undefined && tableChanges.some((us) => us >= e.firstUs - 100_000 && us <= e.lastUs + 100_000);

  // ---- 5. the new connections
  const http = readClientJson(need(f, 'http-json'), 'http');
  const hs = http.summary;
  const hrecs = http.records;
  const hf = hrecs.filter((r) => !r.ok);
  const explained = hf.filter((r) => changedDuring(conns.get(`${r.sourceAddress}:${r.sourcePort}`)));
  c.check(
    hs.total > 0 && explained.length === hf.length,
    "a stream of new connections, one request each, all through the flood: every one answered, but those in flight when the MUX's tables changed (a connection that starts while the untrusted table is full is placed statelessly until it gets a slot: a new table can move it)",
    `${fmt(hs.total)} in ${(hs.elapsedMs / 1000).toFixed(1)} s (${fmt(hs.total / (hs.elapsedMs / 1000))}/s), ${hf.length} failed${hf.length > 0 ? ` (${fmtCounts(countBy(hf, (r) => r.error ?? '?'))}), ${explained.length} of them in flight at a table change` : ''}; latency ms p50 ${hs.latencyMs.p50}, p99 ${hs.latencyMs.p99}, max ${hs.latencyMs.max}`,
  );
  const httpStatus = need(f, 'http-status');
  const wantStatus = hf.length > 0 ? '1' : '0';
  c.check(
    httpStatus === wantStatus && hrecs.length === hs.total,
    "the new connections' client ended as its records say (exit 1 only when a request failed; a record per request)",
    `exit ${httpStatus}, ${hf.length} failed of ${hrecs.length} records, summary total ${hs.total}`,
  );
  const okHttp = hrecs.filter((r) => r.ok);
  const wrongHttp = okHttp.filter((r) => r.backend !== expect(r.sourceAddress, r.sourcePort)).length;
  if (tableChanges.length === 0)
    c.check(
      wrongHttp === 0,
      'each new connection was answered by the backend the Maglev table names: a full untrusted table changes nothing in the choice',
      `${wrongHttp} differ`,
    );
  else
    c.note(
      `${wrongHttp} of ${okHttp.length} new connections were answered by another backend than the all-healthy Maglev table names (the tables changed)`,
    );

  // ---- 6. on the wire at the MUX
  let holdSeen = 0;
  let holdDuring = 0;
  let holdWrong = 0;
  for (const r of recs) {
    const e = conns.get(`${r.sourceAddress}:${r.sourcePort}`);
    if (e !== undefined) holdSeen++;
    if (e === undefined || e.nics.size !== 1 || !e.nics.has(r.backends[0]!) || [...e.synNics].some((n) => n !== r.backends[0])) holdWrong++;
    if (forwarded.some((x) => x.src === r.sourceAddress && x.sport === r.sourcePort && x.tsUs > t1.startUs && x.tsUs < t1.endUs))
      holdDuring++;
  }
  c.check(
    holdWrong === 0 && holdDuring === recs.length,
    "in the MUX's capture every packet of each established connection left in VXLAN to one backend, the one that answered, before, during and after the flood",
    `${holdSeen} connections seen, ${holdDuring} with packets during the flood, ${holdWrong} otherwise`,
  );
  if (tableChanges.length === 0) {
    const newWrong = okHttp.filter((r) => {
      const e = conns.get(`${r.sourceAddress}:${r.sourcePort}`);
      return e === undefined || e.nics.size !== 1 || !e.nics.has(r.backend!) || [...e.synNics].some((n) => n !== r.backend);
    }).length;
    c.check(
      newWrong === 0,
      'and every packet of each answered new connection to the backend that answered it',
      `${newWrong} of ${okHttp.length} otherwise`,
    );
  } else {
    // the request must have reached the backend that answered. A connection that the full untrusted
    // table could not record follows the Maglev table of the moment, packet by packet: across a table
    // change (and back) its SYN, a copy of its request (a retransmission) or its last ACK and FIN may
    // have gone to another backend, which answers with a reset that can be lost in the flood. So any
    // packet elsewhere must fall within a table change during the connection's life
    const reqMissing = okHttp.filter((r) => !(requestNics.get(`${r.sourceAddress}:${r.sourcePort}`)?.has(r.backend!) ?? false)).length;
    const moved = okHttp.filter((r) => {
      const k = `${r.sourceAddress}:${r.sourcePort}`;
      const e = conns.get(k);
      return e !== undefined && (e.nics.size > 1 || [...e.synNics].some((n) => n !== r.backend) || (requestNics.get(k)?.size ?? 0) > 1);
    });
    const movedUnexplained = moved.filter((r) => !changedDuring(conns.get(`${r.sourceAddress}:${r.sourcePort}`))).length;
    c.check(
      reqMissing === 0 && movedUnexplained === 0,
      "each answered new connection's request reached the backend that answered it; packets of such a connection (its SYN, a copy of its request, its last ACK or FIN) went elsewhere only across a table change during its life",
      `${reqMissing} requests that never reached the backend that answered; ${moved.length} connections had packets elsewhere across a table change, ${movedUnexplained} without one`,
    );
  }
  const sliceIn = arrived.filter((x) => inSpoof(x.src));
  const sliceOut = forwarded.filter((x) => inSpoof(x.src));
  const inBytes = new Set(sliceIn.map((x) => hex(x.ip)));
  const outOk = sliceOut.filter((x) => inBytes.has(hex(x.ip)) && x.nic !== null && poolNics.has(x.nic)).length;
  const hostOk = muxCap.filter((p) => {
    const inner = innerLayers(p);
    if (inner === null || !inSpoof(inner.ip.src)) return false;
    const nic = nicMac.get(inner.eth.dst);
    return nic !== undefined && ipv4Of(p)!.dst === nicHost.get(nic) && inner.vni === vni;
  }).length;
  c.check(
    sliceIn.length > 0 && outOk === sliceOut.length && hostOk === sliceOut.length,
    `the flood slice at the MUX: ${fmt(sliceIn.length)} SYNs arrived, ${fmt(sliceOut.length)} left in VXLAN (VNI ${vni}) to the host of a backend of the pool, each byte for byte a SYN that arrived`,
    `${((100 * sliceOut.length) / Math.max(1, sliceIn.length)).toFixed(1)} % forwarded: the rest is what the MUX did not read in time (see above)`,
  );
  const sliceMaglev = sliceOut.filter((x) => x.nic === expect(x.src, x.sport)).length;
  if (tableChanges.length === 0)
    c.check(
      sliceMaglev === sliceOut.length,
      'each forwarded flood SYN went to the backend the Maglev table names: the stateless choice',
      `${sliceMaglev} of ${sliceOut.length}`,
    );
  else
    c.note(
      `${sliceMaglev} of ${sliceOut.length} forwarded flood SYNs went to the backend of the all-healthy Maglev table (the tables changed during the flood)`,
    );
  const tsMux = tsharkFields(
    join(run, 'pcaps', 'mux1.pcap'),
    ['vxlan.vni', 'ip.src'],
    `ip.src == ${spoof} || (vxlan && ip.src == ${spoof})`,
  );
  if (tsMux !== null) {
    const tsIn = tsMux.filter((r) => r[0] === '').length;
    const tsOut = tsMux.filter((r) => r[0] !== '').length;
    c.check(
      tsIn === sliceIn.length && tsOut === sliceOut.length,
      'tshark recounts the slice at the MUX',
      `${tsIn} arrived, ${tsOut} in VXLAN`,
    );
  }

  // ---- 6. the backends' SYN-ACKs to the spoofed addresses
  let dsr = 0;
  for (const [h, after] of post.hosts) dsr += (after.out_dsr ?? 0) - (pre.hosts.get(h)?.out_dsr ?? 0);
  const goodBack = ifaceDelta(pre, post, 'client2/eth0', 'rx');
  const noRoute = nstatDelta(pre, post, 'router', 'IpExtInNoRoutes');
  const icmpOut = nstatDelta(pre, post, 'router', 'IcmpOutDestUnreachs');
  const synAcks = dsr - goodBack;
  // the two sides are read a moment apart while the good traffic runs (and a busy machine drops some
  // packets between them): their difference is measured, not judged; that none got past the router is
  // checked on its client bridge below
  c.check(
    synAcks > 0 && noRoute > 0,
    `the backends answered the flood SYNs they got with SYN-ACKs to the spoofed addresses (the host agents' direct server return); the router has no route to ${spoof} and dropped them`,
    `${fmt(dsr)} replies sent by DSR - ${fmt(goodBack)} that reached the good client = ${fmt(synAcks)}; the router's IpExtInNoRoutes +${fmt(noRoute)} (${((100 * noRoute) / Math.max(1, synAcks)).toFixed(1)} % of them; measured, not asserted)`,
  );
  const hostDrops: string[] = [];
  for (const [h, after] of post.hosts)
    for (const [k, v] of nz(delta(pre.hosts.get(h) ?? {}, after), 'drop_')) hostDrops.push(`${h} ${k} +${fmt(v)}`);
  c.note(`the host agents' drop counters over the flood: ${hostDrops.length === 0 ? 'none moved' : hostDrops.join(', ')}`);
  const cookies = [...pre.nstat.keys()]
    .filter((n) => poolNics.has(n))
    .map((n) => `${n} ${fmt(nstatDelta(pre, post, n, 'TcpExtSyncookiesSent'))}`);
  c.note(`SYN cookies sent by the backends (their SYN queues overflowed; nothing to keep per spoofed SYN): ${cookies.join(', ')}`);
  const burst = 5; // ip_rt_error_burst / ip_rt_error_cost: 5 at once, then 1 per second per source
  c.check(
    icmpOut <= burst + Math.ceil(floodSec) + 2,
    'it answered at most once a second (its per-source ICMP rate limit) with ICMP net unreachable, to the VIP',
    `IcmpOutDestUnreachs +${icmpOut}; the MUX forwarded ${md.icmp_errors_forwarded ?? 0} ICMP errors to the backend of the quoted flow`,
  );
  const routerCap = loadCapture(join(run, 'pcaps', 'router-fab0.pcap'));
  const sliceKeys = new Set(sliceSent.map((p) => `${ipv4Of(p)!.src}:${tcpOf(p)!.srcPort}:${(tcpOf(p)!.seq + 1) >>> 0}`));
  let synAckSeen = 0;
  let synAckMatched = 0;
  let icmpSeen = 0;
  let icmpOk = 0;
  for (const p of routerCap) {
    const ip = ipv4Of(p);
    const t = tcpOf(p);
    const ic = p.d.first('icmp');
    if (ic !== undefined && ip !== undefined) {
      icmpSeen++;
      const q = p.d.all('ipv4')[1];
      if (
        ic.type === ICMP_DEST_UNREACH &&
        ic.code === ICMP_CODE_NET_UNREACH &&
        ip.dst === vip &&
        q !== undefined &&
        q.src === vip &&
        inSpoof(q.dst)
      )
        icmpOk++;
      continue;
    }
    if (ip === undefined || t === undefined || ip.src !== vip || !inSpoof(ip.dst)) continue;
    synAckSeen++;
    if (t.flags === (TCP_SYN | TCP_ACK) && t.srcPort === port && sliceKeys.has(`${ip.dst}:${t.dstPort}:${t.ack}`) && t.checksumOk === true)
      synAckMatched++;
  }
  c.check(
    synAckSeen > 0 && synAckMatched === synAckSeen,
    `the router's fabric capture: ${fmt(synAckSeen)} SYN-ACKs for the slice arrived from ${vip}:${port} (DSR), each acknowledging a SYN client1 sent`,
    `${synAckMatched} matched; ${icmpOk} of ${icmpSeen} ICMP messages the router sent are net unreachable to the VIP quoting such a SYN-ACK`,
  );
  const br = loadCapture(join(run, 'pcaps', 'router-br0.pcap')).length;
  c.check(
    br === 0,
    `nothing addressed to ${spoof} left the router toward the clients (its client bridge), nor anywhere else: the lab has no route out`,
    `${br} packets`,
  );

  // ---- 7. memory: VmRSS, and its anonymous part (the heap and the flow tables). VmRSS also holds the
  // node binary and the capture ring (RssFile), both resident before the flood: the kernel maps every
  // page of a packet ring when the MUX opens it (PACKET_MMAP), so the ring is in the baseline, not the bound
  const rss = readRss(join(run, 'rss.txt'));
  const at = (fromUs: number, toUs: number) => rss.filter((x) => x.us >= fromUs && x.us <= toUs);
  const baseline = at(t1.startUs - 1_500_000, t1.startUs);
  const during1 = at(t1.startUs, t1.endUs + 1_000_000);
  const during2 = at(t2.startUs, t2.endUs + 1_000_000);
  const trusted = tableBytesAt(4, ft.maxFlows) + tableBytesAt(10, ft.maxFlows);
  const untrusted = tableBytesAt(4, ft.untrustedMaxFlows) + tableBytesAt(10, ft.untrustedMaxFlows);
  const tables = Math.ceil(1.5 * (trusted + untrusted)); // a doubling holds the old arrays until the rehash ends
  const heap = V8_YOUNG_GENERATION_MAX_BYTES;
  const base = Math.max(...baseline.map((x) => x.rss));
  const baseAnon = Math.max(...baseline.map((x) => x.anon));
  const bound = base + tables + heap;
  const boundAnon = baseAnon + tables + heap;
  const peak1 = Math.max(...during1.map((x) => x.rss));
  const peakAnon1 = Math.max(...during1.map((x) => x.anon));
  c.check(
    baseline.length > 0 && during1.length >= 5 * floodSec && peak1 <= bound,
    `the MUX's resident memory (VmRSS, sampled every 0.1 s) stayed bounded through the flood: peak ${mb(peak1)}, from ${mb(base)} before it`,
    `bound ${mb(bound)} = ${mb(base)} (the capture ring of ${mb(DEFAULT_CAPTURE_BUFFER_BYTES)} included: mapped whole at start) + its four flow tables at their limits (${fmt(ft.maxFlows)} trusted, ${fmt(ft.untrustedMaxFlows)} untrusted, IPv4 and IPv6, x1.5 while doubling: ${mb(tables)}) + ${mb(heap)} for the JavaScript heap (V8's young generation at its largest); ${during1.length} samples`,
  );
  c.check(
    peakAnon1 <= boundAnon,
    `its anonymous memory (RssAnon: heap and flow tables) too: peak ${mb(peakAnon1)}, from ${mb(baseAnon)}`,
    `bound ${mb(boundAnon)} = ${mb(baseAnon)} + ${mb(tables)} + ${mb(heap)}`,
  );
  const floodFlows = untrustedPath;
  const keptCost = tableBytesAt(4, floodFlows);
  c.note(
    `it grew by ${mb(peak1 - base)} (${mb(peakAnon1 - baseAnon)} of it anonymous), against a bound of +${mb(bound - base)}; had the MUX kept every flood SYN it read, their ${fmt(floodFlows)} flows would have needed ${mb(keptCost)} in an IPv4 table alone (${keptCost > bound - base ? 'more than the bound: the check tells the two apart' : 'less than the bound: this flood was too short for the check to tell the two apart; a longer one would be'}), and more the longer the flood`,
  );

  // ---- 8. the generator's ceiling (phase 2: trafgen at normal priority on one CPU, no good traffic)
  const p2Sec = (t2.endUs - t2.startUs) / 1e6;
  const sent2 = ifaceDelta(p2pre, p2post, 'client1/eth0', 'tx');
  const md2 = delta(p2pre.mux, p2post.mux);
  const read2 = md2.rx_packets! - (md2.control_arp ?? 0) - (md2.control_nd ?? 0);
  const arrived2 = nstatDelta(p2pre, p2post, 'mux1', 'IpInAddrErrors');
  c.note(
    `phase 2, the generator's ceiling: trafgen at normal priority on CPU 0 sent ${fmt(sent2)} SYNs in ${p2Sec.toFixed(1)} s = ${fmt(sent2 / p2Sec)} packets/s; the MUX, short of CPU, read ${fmt(read2)} of the ${fmt(arrived2)} that reached it (${((100 * read2) / Math.max(1, arrived2)).toFixed(0)} %); the kernel dropped the rest at its full capture ring`,
  );
  const peak2 = Math.max(0, ...during2.map((x) => x.rss));
  const peakAnon2 = Math.max(0, ...during2.map((x) => x.anon));
  c.check(
    sent2 > 0 && (md2.flow_table_full ?? 0) === 0 && peak2 > 0 && peak2 <= bound && peakAnon2 <= boundAnon,
    "at the generator's ceiling too the main table was never full and memory stayed within the bounds",
    `flow_table_full +${md2.flow_table_full ?? 0}, flow_untrusted_full +${fmt(md2.flow_untrusted_full ?? 0)}; VmRSS peak ${mb(peak2)} of ${mb(bound)}, RssAnon ${mb(peakAnon2)} of ${mb(boundAnon)}`,
  );
  return c;
}
