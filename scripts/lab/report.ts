// The packet-walk report: one self-contained HTML page (inline CSS and SVG, no script, no fetch) drawn
// from a north-south run's captures (scripts/demo.sh writes it beside its pcaps). It shows:
//   - a sequence diagram of one real TCP flow (the run's first SYN to the VIP): client -> router -> MUX ->
//     host -> DIP and the direct server return, each hop with its MACs, addresses, ports, TTL, the VNI and
//     the NAT, and its capture timestamp;
//   - the whole run's distribution per backend and per MUX (flows and packets), as bar charts;
//   - the daemons' drop and send-error counters (their GET /counters, saved as NODE-counters.json);
//   - tshark's decode of the same frames and of every MUX's VXLAN packets, next to slbx's.
// Every number comes from the pcaps, decoded by slbx's codecs (shared/dissect.ts), the config and the
// saved counters: nothing is assumed.
//   node dist/scripts/lab/report.js --run RUNDIR [--vip ADDR] [--port N] [--out FILE]
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { isMain } from '../../runtime/command.js';
import { formatHelp, parseArgs, UsageError } from '../../shared/args.js';
import { loadCapture, loadConfig, type CapturedPacket } from '../scenarios/lib/check.js';
import type { SlbxConfig } from '../../shared/config.js';

const TCP_SYN = 0x02;
const TCP_ACK = 0x10;

/** One hop of the walked flow: a frame as one capture saw it. */
export interface Hop {
  /** Stable id: client-syn, router-mux, mux-host, host-dip, dip-host, host-router, router-client. */
  id: string;
  from: string;
  to: string;
  /** What happened on this hop, in words. */
  what: string;
  capture: string;
  /** 1-based frame number in that capture (tshark's frame.number). */
  frame: number;
  tsUs: number;
  srcMac: string;
  dstMac: string;
  /** The addresses and ports of the packet (the inner one for VXLAN), "a:p -> b:q". */
  src: string;
  dst: string;
  ttl: number;
  flags: string;
  /** VXLAN only. */
  outer?: { src: string; dst: string; srcPort: number; vni: number };
}

export interface Walk {
  vip: string;
  port: number;
  client: string;
  clientPort: number;
  mux: string;
  host: string;
  nic: string;
  dip: string;
  backendPort: number;
  hops: Hop[];
  /** Packets of this flow seen at each capture. */
  flowPackets: Record<string, number>;
}

export interface Distribution {
  /** Per backend: flows (SYNs delivered to DIP:port) and packets delivered, from the nic captures. */
  backends: { name: string; host: string; dip: string; flows: number; packets: number }[];
  /** Per MUX: flows (SYNs received), packets received from the router and VXLAN packets sent. */
  muxes: { name: string; pa: string; flows: number; received: number; vxlan: number }[];
}

export interface CounterRow {
  node: string;
  drops: number;
  nonZero: [string, number][];
  sendErrors: number;
  counters: number;
}

export interface TsharkCheck {
  /** Per hop: tshark's addresses for the same frame, and whether they match slbx's. */
  hops: { id: string; tshark: string; agrees: boolean }[];
  /** Per MUX capture: VXLAN packets as tshark and as slbx decode them, and the VNIs tshark saw. */
  vxlan: { capture: string; tshark: number; slbx: number; vnis: string[] }[];
  /** Why it did not run, or null. */
  missing: string | null;
}

export interface Report {
  walk: Walk;
  distribution: Distribution;
  counters: CounterRow[];
  tshark: TsharkCheck;
  html: string;
}

type Ip = { layer: 'ipv4' | 'ipv6'; src: string; dst: string; ttl?: number; hopLimit?: number };

const ipLayers = (p: CapturedPacket): Ip[] => p.d.layers.filter((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as Ip[];
const lastIp = (p: CapturedPacket): Ip | undefined => ipLayers(p).at(-1);
const lastTcp = (p: CapturedPacket) => p.d.all('tcp').at(-1);
const hostPort = (a: string, port: number) => (a.includes(':') ? `[${a}]:${port}` : `${a}:${port}`);

function tcpFlags(f: number): string {
  const n: string[] = [];
  if (f & 0x02) n.push('SYN');
  if (f & 0x10) n.push('ACK');
  if (f & 0x01) n.push('FIN');
  if (f & 0x04) n.push('RST');
  if (f & 0x08) n.push('PSH');
  return n.join('-') || 'none';
}

function hopOf(p: CapturedPacket, capture: string, id: string, from: string, to: string, what: string): Hop {
  const eth = p.d.all('eth');
  const ip = lastIp(p)!;
  const tcp = lastTcp(p)!;
  const vx = p.d.first('vxlan');
  const hop: Hop = {
    id,
    from,
    to,
    what,
    capture,
    frame: p.index,
    tsUs: p.tsUs,
    srcMac: eth.at(-1)?.src ?? '',
    dstMac: eth.at(-1)?.dst ?? '',
    src: hostPort(ip.src, tcp.srcPort),
    dst: hostPort(ip.dst, tcp.dstPort),
    ttl: ip.ttl ?? ip.hopLimit ?? 0,
    flags: tcpFlags(tcp.flags),
  };
  if (vx !== undefined) {
    const o = ipLayers(p)[0]!;
    const u = p.d.first('udp')!;
    hop.outer = { src: o.src, dst: o.dst, srcPort: u.srcPort, vni: vx.vni };
    hop.srcMac = eth[0]!.src;
    hop.dstMac = eth[0]!.dst;
  }
  return hop;
}

/** Finds the first packet of `caps` matching `pred`, with the capture's name. */
function findIn(caps: Map<string, CapturedPacket[]>, names: readonly string[], pred: (p: CapturedPacket) => boolean) {
  for (const n of names) {
    const p = caps.get(n)?.find(pred);
    if (p !== undefined) return { name: n, p };
  }
  return null;
}

export class ReportError extends Error {}

/** Builds the report of the run in `run` (config.yaml, pcaps/, NODE-counters.json). */
export function buildReport(run: string, opts: { vip?: string; port?: number; tshark?: boolean } = {}): Report {
  if (!existsSync(join(run, 'config.yaml')))
    throw new ReportError(`${run} is not a lab run directory: it has no config.yaml (scripts/demo.sh prints its run directory)`);
  const config = loadConfig(join(run, 'config.yaml'));
  const vipCfg = opts.vip === undefined ? config.vips[0] : config.vips.find((v) => v.address.text === opts.vip);
  if (vipCfg === undefined) throw new ReportError(`--vip ${opts.vip}: not a VIP of ${join(run, 'config.yaml')}`);
  const rule = vipCfg.rules.find((r) => r.protocols.includes(6) && (opts.port === undefined || r.frontendPort === opts.port));
  if (rule === undefined)
    throw new ReportError(`no TCP rule${opts.port === undefined ? '' : ` on port ${opts.port}`} for ${vipCfg.address.text}`);
  const vip = vipCfg.address.text;
  const port = rule.frontendPort;
  const pool = config.pools.find((p) => p.name === rule.pool)!;
  const network = config.networks.find((n) => n.name === pool.network)!;
  const nics = pool.backends.map((b) => config.nics.find((n) => n.name === b.nic)!);
  const dipOf = (n: (typeof nics)[number]) => (vipCfg.address.family === 4 ? n.address4 : n.address6)!.text;
  const paOf = (n: { address: { text: string }; address6: { text: string } | null }) =>
    config.fabric.underlay === 'ipv6' ? n.address6!.text : n.address.text;

  const caps = new Map<string, CapturedPacket[]>();
  const load = (name: string) => {
    const path = join(run, 'pcaps', `${name}.pcap`);
    if (!existsSync(path)) throw new ReportError(`capture ${path} is missing (the report needs client1, every MUX, host and backend)`);
    caps.set(name, loadCapture(path));
  };
  load('client1');
  for (const m of config.muxes) load(m.name);
  for (const h of config.hosts) load(h.name);
  for (const n of nics) load(n.name);

  const walk = walkFirstFlow(config, caps, { vip, port, backendPort: rule.backendPort, nics, dipOf, paOf, vni: network.vni });
  const distribution = distributionOf(config, caps, {
    vip,
    port,
    backendPort: rule.backendPort,
    nics,
    dipOf,
    paOf,
    gateways: gatewaysOf(network),
  });
  const counters = countersOf(run, config);
  const tshark = opts.tshark === false ? { hops: [], vxlan: [], missing: 'not asked for' } : tsharkCheck(run, config, walk, caps);
  const html = renderHtml(run, walk, distribution, counters, tshark, network.vni);
  return { walk, distribution, counters, tshark, html };
}

function gatewaysOf(n: { gateway?: { text: string } | null; gateway6?: { text: string } | null }): Set<string> {
  return new Set([n.gateway?.text, n.gateway6?.text].filter((g): g is string => g !== undefined));
}

interface RunShape {
  vip: string;
  port: number;
  backendPort: number;
  nics: SlbxConfig['nics'];
  dipOf: (n: SlbxConfig['nics'][number]) => string;
  paOf: (n: { address: { text: string }; address6: { text: string } | null }) => string;
}

function walkFirstFlow(config: SlbxConfig, caps: Map<string, CapturedPacket[]>, s: RunShape & { vni: number }): Walk {
  const { vip, port } = s;
  const client = caps.get('client1')!;
  const syn = client.find((p) => {
    const t = lastTcp(p);
    return lastIp(p)?.dst === vip && t?.dstPort === port && (t.flags & (TCP_SYN | TCP_ACK)) === TCP_SYN && p.d.first('vxlan') === undefined;
  });
  if (syn === undefined) throw new ReportError(`client1.pcap holds no SYN to ${hostPort(vip, port)}`);
  const cAddr = lastIp(syn)!.src;
  const cPort = lastTcp(syn)!.srcPort;
  // this flow's packets, client to VIP (inner or plain), VIP or DIP to client
  const toVip = (p: CapturedPacket) => lastIp(p)?.src === cAddr && lastTcp(p)?.srcPort === cPort;
  const fromBack = (p: CapturedPacket) => lastIp(p)?.dst === cAddr && lastTcp(p)?.dstPort === cPort;
  const isSyn = (p: CapturedPacket) => ((lastTcp(p)?.flags ?? 0) & (TCP_SYN | TCP_ACK)) === TCP_SYN;
  const isSynAck = (p: CapturedPacket) => ((lastTcp(p)?.flags ?? 0) & (TCP_SYN | TCP_ACK)) === (TCP_SYN | TCP_ACK);
  const plain = (p: CapturedPacket) => p.d.first('vxlan') === undefined;

  const muxNames = config.muxes.map((m) => m.name);
  const arrival = findIn(caps, muxNames, (p) => plain(p) && toVip(p) && isSyn(p) && lastIp(p)!.dst === vip);
  if (arrival === null) throw new ReportError(`no MUX capture holds the SYN from ${hostPort(cAddr, cPort)}`);
  const mux = arrival.name;
  const encap = caps.get(mux)!.find((p) => !plain(p) && toVip(p) && isSyn(p));
  if (encap === undefined) throw new ReportError(`${mux}.pcap: the SYN from ${hostPort(cAddr, cPort)} never left in VXLAN`);
  const outerDst = ipLayers(encap)[0]!.dst;
  const hostCfg = config.hosts.find((h) => s.paOf(h) === outerDst);
  if (hostCfg === undefined) throw new ReportError(`${mux} sent the SYN to ${outerDst}, which is no host's provider address`);
  const host = hostCfg.name;
  const atHost = caps.get(host)!.find((p) => !plain(p) && toVip(p) && isSyn(p));
  if (atHost === undefined) throw new ReportError(`${host}.pcap: the VXLAN SYN from ${mux} never arrived`);
  const atDip = findIn(
    caps,
    s.nics.filter((n) => n.host === host).map((n) => n.name),
    (p) => toVip(p) && isSyn(p) && lastTcp(p)!.dstPort === s.backendPort,
  );
  if (atDip === null) throw new ReportError(`no backend capture on ${host} holds the SYN from ${hostPort(cAddr, cPort)}`);
  const nic = s.nics.find((n) => n.name === atDip.name)!;
  const dip = s.dipOf(nic);
  const synAck = caps.get(nic.name)!.find((p) => fromBack(p) && isSynAck(p) && lastIp(p)!.src === dip);
  if (synAck === undefined) throw new ReportError(`${nic.name}.pcap: the backend never answered the SYN`);
  const dsr = caps.get(host)!.find((p) => plain(p) && fromBack(p) && isSynAck(p) && lastIp(p)!.src === vip);
  if (dsr === undefined) throw new ReportError(`${host}.pcap: the SYN-ACK never left from the VIP`);
  const back = client.find((p) => fromBack(p) && isSynAck(p) && lastIp(p)!.src === vip);
  if (back === undefined) throw new ReportError('client1.pcap: the SYN-ACK never arrived');

  const vni = encap.d.first('vxlan')!.vni;
  const mPa = ipLayers(encap)[0]!.src;
  const hops: Hop[] = [
    hopOf(syn, 'client1', 'client-syn', 'client1', 'router', `SYN to the VIP (client1's eth0)`),
    hopOf(arrival.p, mux, 'router-mux', 'router', mux, `routed by ECMP to ${mux}, TTL decremented (${mux}'s fab0)`),
    hopOf(encap, mux, 'mux-host', mux, host, `VXLAN VNI ${vni}, ${mPa} -> ${outerDst}: the SYN byte for byte inside (${mux}'s fab0)`),
    hopOf(atHost, host, 'host-in', mux, host, `arrives at ${host} (${host}'s fab0)`),
    hopOf(
      atDip.p,
      nic.name,
      'host-dip',
      host,
      nic.name,
      `decapsulated, NAT ${hostPort(vip, port)} -> ${hostPort(dip, s.backendPort)} (${nic.name}'s eth0)`,
    ),
    hopOf(synAck, nic.name, 'dip-host', nic.name, host, `the backend answers from its DIP (${nic.name}'s eth0)`),
    hopOf(
      dsr,
      host,
      'host-router',
      host,
      'router',
      `reverse NAT to ${hostPort(vip, port)}, sent straight to the router: DSR (${host}'s fab0)`,
    ),
    hopOf(back, 'client1', 'router-client', 'router', 'client1', `the reply reaches the client, no MUX on the way (client1's eth0)`),
  ];
  const flowPackets: Record<string, number> = {};
  for (const [name, pk] of caps) {
    const n = pk.filter((p) => toVip(p) || fromBack(p)).length;
    if (n > 0) flowPackets[name] = n;
  }
  return { vip, port, client: cAddr, clientPort: cPort, mux, host, nic: nic.name, dip, backendPort: s.backendPort, hops, flowPackets };
}

function distributionOf(config: SlbxConfig, caps: Map<string, CapturedPacket[]>, s: RunShape & { gateways: Set<string> }): Distribution {
  const backends = s.nics.map((n) => {
    const dip = s.dipOf(n);
    let flows = 0;
    let packets = 0;
    for (const p of caps.get(n.name)!) {
      const ip = lastIp(p);
      const t = lastTcp(p);
      // health probes come from the network's gateway address: not the run's traffic
      if (ip === undefined || t === undefined || s.gateways.has(ip.src) || ip.dst !== dip || t.dstPort !== s.backendPort) continue;
      packets++;
      if ((t.flags & (TCP_SYN | TCP_ACK)) === TCP_SYN) flows++;
    }
    return { name: n.name, host: n.host, dip, flows, packets };
  });
  const muxes = config.muxes.map((m) => {
    let flows = 0;
    let received = 0;
    let vxlan = 0;
    for (const p of caps.get(m.name)!) {
      const ip = lastIp(p);
      const t = lastTcp(p);
      if (ip === undefined || t === undefined || ip.dst !== s.vip || t.dstPort !== s.port) continue;
      if (p.d.first('vxlan') !== undefined) {
        vxlan++;
        continue;
      }
      received++;
      if ((t.flags & (TCP_SYN | TCP_ACK)) === TCP_SYN) flows++;
    }
    return { name: m.name, pa: s.paOf(m), flows, received, vxlan };
  });
  return { backends, muxes };
}

function countersOf(run: string, config: SlbxConfig): CounterRow[] {
  const rows: CounterRow[] = [];
  for (const n of [...config.muxes.map((m) => m.name), ...config.hosts.map((h) => h.name)]) {
    const path = join(run, `${n}-counters.json`);
    if (!existsSync(path)) continue;
    const c = JSON.parse(readFileSync(path, 'utf8')) as Record<string, number>;
    const bad = Object.entries(c).filter(([k]) => k.startsWith('drop_') || k.startsWith('send_error_'));
    rows.push({
      node: n,
      drops: bad.filter(([k]) => k.startsWith('drop_')).reduce((s, [, v]) => s + v, 0),
      sendErrors: bad.filter(([k]) => k.startsWith('send_error_')).reduce((s, [, v]) => s + v, 0),
      nonZero: bad.filter(([, v]) => v !== 0),
      counters: bad.length,
    });
  }
  return rows;
}

function tsharkCheck(run: string, config: SlbxConfig, walk: Walk, caps: Map<string, CapturedPacket[]>): TsharkCheck {
  const ts = (file: string, filter: string, fields: string[]): string[][] | string => {
    const args = ['-r', join(run, 'pcaps', `${file}.pcap`), '-d', 'udp.port==4789,vxlan', '-T', 'fields', '-E', 'occurrence=l'];
    if (filter !== '') args.push('-Y', filter);
    for (const f of fields) args.push('-e', f);
    const r = spawnSync('tshark', args, { encoding: 'utf8', maxBuffer: 1 << 28 });
    if (r.error !== undefined) return `tshark could not be run: ${r.error.message}`;
    if (r.status !== 0) return `tshark failed: ${r.stderr.trim()}`;
    const t = r.stdout.replace(/\n+$/, '');
    return t === '' ? [] : t.split('\n').map((l) => l.split('\t'));
  };
  const out: TsharkCheck = { hops: [], vxlan: [], missing: null };
  const v6 = walk.vip.includes(':');
  // one tshark run per capture, for the frames of the walk it holds
  const byCapture = new Map<string, Map<string, string[]>>();
  for (const cap of new Set(walk.hops.map((h) => h.capture))) {
    const frames = walk.hops.filter((h) => h.capture === cap).map((h) => h.frame);
    const fields = ['frame.number', v6 ? 'ipv6.src' : 'ip.src', v6 ? 'ipv6.dst' : 'ip.dst', 'tcp.srcport', 'tcp.dstport', 'vxlan.vni'];
    const rows = ts(cap, frames.map((f) => `frame.number == ${f}`).join(' || '), fields);
    if (typeof rows === 'string') return { hops: [], vxlan: [], missing: rows };
    byCapture.set(cap, new Map(rows.map((r) => [r[0] ?? '', r.slice(1)])));
  }
  for (const h of walk.hops) {
    const r = byCapture.get(h.capture)?.get(String(h.frame)) ?? [];
    const src = hostPort(r[0] ?? '?', Number(r[2]));
    const dst = hostPort(r[1] ?? '?', Number(r[3]));
    const vni = r[4] || undefined;
    const agrees = src === h.src && dst === h.dst && vni === (h.outer ? String(h.outer.vni) : undefined);
    out.hops.push({ id: h.id, tshark: `${src} -> ${dst}${vni ? ` VNI ${vni}` : ''}`, agrees });
  }
  for (const m of config.muxes) {
    const rows = ts(m.name, 'vxlan', ['vxlan.vni']);
    if (typeof rows === 'string') return { hops: out.hops, vxlan: [], missing: rows };
    const slbx = caps.get(m.name)!.filter((p) => p.d.first('vxlan') !== undefined).length;
    out.vxlan.push({ capture: m.name, tshark: rows.length, slbx, vnis: [...new Set(rows.map((r) => r[0] ?? ''))].sort() });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// HTML

const esc = (s: string | number) =>
  String(s).replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');

function ms(us: number, t0: number): string {
  return `${((us - t0) / 1000).toFixed(3)} ms`;
}

/** The sequence diagram: one lane per node, one arrow per hop, labels above the arrows. */
function sequenceSvg(w: Walk): string {
  const lanes = ['client1', 'router', w.mux, w.host, w.nic];
  const laneLabel: Record<string, string> = {
    client1: `client1 ${w.client}`,
    router: 'router (ECMP)',
    [w.mux]: `${w.mux} (MUX)`,
    [w.host]: `${w.host} (host agent)`,
    [w.nic]: `${w.nic} DIP ${w.dip}`,
  };
  const W = 1100;
  const left = 150;
  const gap = (W - left - 100) / (lanes.length - 1);
  const x = (n: string) => left + lanes.indexOf(n) * gap;
  const rowH = 86;
  const top = 70;
  const hops = w.hops.filter((h) => h.id !== 'host-in');
  const H = top + hops.length * rowH + 30;
  const t0 = w.hops[0]!.tsUs;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" id="walk" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="packet walk of one flow">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>' +
      '<marker id="arrow-dsr" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#c0392b"/></marker></defs>',
  );
  for (const n of lanes) {
    parts.push(
      `<g class="lane" data-node="${esc(n)}"><rect x="${x(n) - 88}" y="10" width="176" height="34" rx="6" class="node"/>` +
        `<text x="${x(n)}" y="32" text-anchor="middle" class="node-label">${esc(laneLabel[n]!)}</text>` +
        `<line x1="${x(n)}" y1="44" x2="${x(n)}" y2="${H - 10}" class="lifeline"/></g>`,
    );
  }
  hops.forEach((h, i) => {
    const y = top + i * rowH + 52;
    const x1 = x(h.from);
    const x2 = x(h.to);
    const dsr = h.id === 'dip-host' || h.id === 'host-router' || h.id === 'router-client';
    const mid = (x1 + x2) / 2;
    const lines = [
      `${h.flags}  ${h.src} -> ${h.dst}`,
      h.outer
        ? `outer ${h.outer.src}:${h.outer.srcPort} -> ${h.outer.dst}:4789, VNI ${h.outer.vni}`
        : `MAC ${h.srcMac} -> ${h.dstMac}, TTL ${h.ttl}`,
      h.what,
    ];
    parts.push(`<g class="hop${dsr ? ' dsr' : ''}" data-hop="${esc(h.id)}" data-src="${esc(h.src)}" data-dst="${esc(h.dst)}">`);
    parts.push(`<text x="8" y="${y + 4}" class="ts">${esc(ms(h.tsUs, t0))}</text>`);
    parts.push(
      `<line x1="${x1}" y1="${y}" x2="${x2}" y2="${y}" class="${dsr ? 'arrow-dsr' : 'arrow'}" marker-end="url(#${dsr ? 'arrow-dsr' : 'arrow'})"/>`,
    );
    // labels sit above the arrow, centred on it, clamped to the drawing
    const anchorX = Math.min(Math.max(mid, left + 200), W - 230);
    lines.forEach((l, j) => {
      parts.push(
        `<text x="${anchorX}" y="${y - 44 + j * 14}" text-anchor="middle" class="${j === 0 ? 'hop-main' : 'hop-detail'}">${esc(l)}</text>`,
      );
    });
    parts.push('</g>');
  });
  parts.push('</svg>');
  return parts.join('\n');
}

/** A horizontal bar chart: one bar per item, its value at the end. */
function barsSvg(id: string, title: string, items: { label: string; value: number }[], colour: string): string {
  const W = 560;
  const rowH = 26;
  const H = 34 + items.length * rowH;
  const max = Math.max(1, ...items.map((i) => i.value));
  const total = items.reduce((s, i) => s + i.value, 0);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" id="${esc(id)}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">`,
    `<text x="0" y="16" class="chart-title">${esc(title)}</text>`,
  ];
  items.forEach((it, i) => {
    const y = 28 + i * rowH;
    const bw = Math.round((it.value / max) * 230);
    const share = total > 0 ? ` (${((100 * it.value) / total).toFixed(1)} %)` : '';
    parts.push(
      `<g class="bar" data-label="${esc(it.label)}" data-value="${it.value}"><text x="0" y="${y + 15}" class="bar-label">${esc(it.label)}</text>` +
        `<rect x="150" y="${y + 2}" width="${bw}" height="18" fill="${colour}"/>` +
        `<text x="${156 + bw}" y="${y + 15}" class="bar-value">${it.value}${share}</text></g>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n');
}

function renderHtml(run: string, w: Walk, d: Distribution, counters: CounterRow[], ts: TsharkCheck, vni: number): string {
  const t0 = w.hops[0]!.tsUs;
  const rtt = w.hops.find((h) => h.id === 'router-client')!.tsUs - t0;
  const hopRows = w.hops
    .map((h) => {
      const t = ts.hops.find((x) => x.id === h.id);
      return `<tr data-hop="${esc(h.id)}"><td>${esc(ms(h.tsUs, t0))}</td><td>${esc(h.capture)}.pcap #${h.frame}</td><td>${esc(h.from)} &rarr; ${esc(h.to)}</td><td>${esc(h.flags)}</td><td>${esc(h.src)} &rarr; ${esc(h.dst)}</td><td>${
        h.outer ? `${esc(h.outer.src)} &rarr; ${esc(h.outer.dst)}, VNI ${h.outer.vni}` : '-'
      }</td><td>${esc(h.srcMac)} &rarr; ${esc(h.dstMac)}</td><td>${h.ttl}</td><td>${t === undefined ? 'not run' : `${t.agrees ? 'same' : 'DIFFERENT'}: ${esc(t.tshark)}`}</td></tr>`;
    })
    .join('\n');
  const counterRows = counters
    .map(
      (c) =>
        `<tr><td>${esc(c.node)}</td><td>${c.drops}</td><td>${c.sendErrors}</td><td>${
          c.nonZero.length === 0 ? `all ${c.counters} zero` : c.nonZero.map(([k, v]) => `${esc(k)} ${v}`).join(', ')
        }</td></tr>`,
    )
    .join('\n');
  const tsRows = ts.vxlan
    .map(
      (v) =>
        `<tr><td>${esc(v.capture)}.pcap</td><td>${v.tshark}</td><td>${v.slbx}</td><td>${esc(v.vnis.join(', ') || '-')}</td><td>${
          v.tshark === v.slbx && v.vnis.every((x) => x === String(vni)) ? 'agree' : 'DISAGREE'
        }</td></tr>`,
    )
    .join('\n');
  const flowAt = Object.entries(w.flowPackets)
    .map(([k, v]) => `${esc(k)} ${v}`)
    .join(', ');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>slbx packet walk: ${esc(hostPort(w.vip, w.port))}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
p.sub { color: #555; margin: 0 0 12px; }
table { border-collapse: collapse; font-size: 12.5px; } td, th { border: 1px solid #ccc; padding: 3px 7px; text-align: left; }
th { background: #f0f3f7; }
.node { fill: #eef4fb; stroke: #36c; } .node-label { font: bold 13px system-ui, sans-serif; fill: #123; }
.lifeline { stroke: #9ab; stroke-dasharray: 4 4; }
.arrow { stroke: #333; stroke-width: 2; } .arrow-dsr { stroke: #c0392b; stroke-width: 2; }
.hop-main { font: 12.5px ui-monospace, monospace; fill: #111; } .hop-detail { font: 11.5px ui-monospace, monospace; fill: #444; }
.dsr .hop-main { fill: #a5281b; }
.ts { font: 12px ui-monospace, monospace; fill: #555; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; }
.chart-title { font: bold 13px system-ui, sans-serif; } .bar-label, .bar-value { font: 12px ui-monospace, monospace; }
</style>
</head>
<body>
<h1>slbx packet walk: ${esc(hostPort(w.vip, w.port))}</h1>
<p class="sub">Drawn from the captures of ${esc(run)} by slbx's own decoder; every address, MAC, TTL, VNI and timestamp below is read from a captured frame.</p>
<h2>One flow: ${esc(hostPort(w.client, w.clientPort))} &rarr; ${esc(hostPort(w.vip, w.port))}, the SYN and the SYN-ACK</h2>
<p class="sub">The router spread it to ${esc(w.mux)}, which sent it in VXLAN (VNI ${w.hops.find((h) => h.outer)?.outer?.vni ?? '-'}) to ${esc(w.host)}; the host agent NATed it to ${esc(w.nic)} (${esc(hostPort(w.dip, w.backendPort))}); the answer went from ${esc(w.host)} straight to the router (direct server return, red). SYN to SYN-ACK at the client: ${(rtt / 1000).toFixed(3)} ms. This flow's packets per capture: ${flowAt}.</p>
${sequenceSvg(w)}
<h2>The hops, frame by frame (tshark's decode of the same frame on the right)</h2>
<table id="hops"><tr><th>time</th><th>frame</th><th>hop</th><th>TCP</th><th>addresses</th><th>VXLAN outer</th><th>MAC</th><th>TTL</th><th>tshark</th></tr>
${hopRows}
</table>
<h2>The whole run</h2>
<div class="charts">
${barsSvg(
  'backends-flows',
  'new flows (SYNs) per backend, at the backend',
  d.backends.map((b) => ({ label: `${b.name} ${b.dip}`, value: b.flows })),
  '#2e86c1',
)}
${barsSvg(
  'backends-packets',
  'packets per backend, to DIP:port',
  d.backends.map((b) => ({ label: `${b.name} ${b.dip}`, value: b.packets })),
  '#5dade2',
)}
${barsSvg(
  'muxes-flows',
  'new flows (SYNs) per MUX, from the router',
  d.muxes.map((m) => ({ label: `${m.name} ${m.pa}`, value: m.flows })),
  '#28b463',
)}
${barsSvg(
  'muxes-packets',
  'packets per MUX, from the router',
  d.muxes.map((m) => ({ label: `${m.name} ${m.pa}`, value: m.received })),
  '#82e0aa',
)}
</div>
<h2>Drops and send errors (the daemons' counters after the run)</h2>
<table id="drops"><tr><th>daemon</th><th>drops</th><th>send errors</th><th>non-zero drop_* and send_error_* counters</th></tr>
${counterRows || '<tr><td colspan="4">no counters saved with the run</td></tr>'}
</table>
<h2>tshark cross-check: VXLAN on every MUX</h2>
${
  ts.missing !== null
    ? `<p id="tshark-missing">tshark cross-check not run: ${esc(ts.missing)}</p>`
    : `<table id="tshark"><tr><th>capture</th><th>VXLAN (tshark)</th><th>VXLAN (slbx)</th><th>VNIs (tshark)</th><th></th></tr>\n${tsRows}\n</table>`
}
</body>
</html>
`;
}

const OPTIONS = [
  { name: 'run', value: 'DIR', help: 'the run directory: config.yaml, pcaps/ (client1, every MUX, host and backend), NODE-counters.json' },
  { name: 'vip', value: 'ADDR', help: "the VIP whose flow is walked (default: the config's first)" },
  { name: 'port', value: 'N', help: 'its TCP frontend port (default: its first TCP rule)' },
  { name: 'out', value: 'FILE', help: 'where to write the page (default RUNDIR/report.html)' },
  { name: 'help', help: 'show help' },
];

export function main(argv: readonly string[]): number {
  const usage = formatHelp(
    'node dist/scripts/lab/report.js --run DIR [--vip ADDR] [--port N] [--out FILE]',
    'writes the packet-walk report of a north-south run (one self-contained HTML page) and prints its path',
    OPTIONS,
  );
  let a;
  try {
    a = parseArgs(argv, OPTIONS);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`report: ${e.message}\n${usage}`);
      return 2;
    }
    throw e;
  }
  if (a.flags.has('help')) {
    process.stdout.write(usage);
    return 0;
  }
  const run = a.values.get('run')?.[0];
  if (run === undefined) {
    process.stderr.write(`report: --run DIR is needed\n${usage}`);
    return 2;
  }
  const portText = a.values.get('port')?.[0];
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) {
    process.stderr.write(`report: --port must be 1..65535, got ${portText}\n`);
    return 2;
  }
  try {
    const r = buildReport(run, { vip: a.values.get('vip')?.[0], port });
    const out = a.values.get('out')?.[0] ?? join(run, 'report.html');
    writeFileSync(out, r.html);
    process.stdout.write(`${out}\n`);
    // tshark must have run and agreed on every hop and every MUX's VXLAN count, or the run says so
    const t = r.tshark;
    const bad = t.missing !== null || t.hops.some((h) => !h.agrees) || t.vxlan.some((v) => v.tshark !== v.slbx);
    if (bad)
      process.stderr.write(
        `report: the tshark cross-check ${t.missing !== null ? `did not run: ${t.missing}` : 'disagrees (see the page)'}\n`,
      );
    return bad ? 1 : 0;
  } catch (e) {
    // a missing or unreadable run, capture or config: named, not a stack
    if (e instanceof Error) {
      process.stderr.write(`report: ${(e as Error).message}\n`);
      return 1;
    }
    throw e;
  }
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
