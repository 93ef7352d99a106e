#!/usr/bin/env node
// Scenario 24 (the fabric is closed): frames an internet attacker and a compromised node on the fabric
// send, and the verdict from captures and counters (docs/security.md).
//
//   node dist/scripts/scenarios/lib/fabric-closed.js gen --config F --out DIR --underlay ipv4|ipv6
//        --client-mac M --router-mac M --rogue-mac M --host-macs host1=M,host2=M
//     DIR/outside.pcap  from client1 to the router: VXLAN with each MUX's PA (of the underlay's family)
//                       as source toward every host PA; ICMP echo to every host, MUX and controller
//                       address and to the router's fabric address; TCP SYNs to the controller's API,
//                       BGP and the status ports, UDP to BFD; IPv4 and IPv6
//     DIR/rogue.pcap    from a namespace on the fabric that is no MUX (its own MAC): VXLAN with each
//                       MUX's PA as source toward every host PA
//   node dist/scripts/scenarios/lib/fabric-closed.js verify --config F --run DIR --underlay ipv4|ipv6
//        --rogue-mac M --mux-macs mux1=M,... --requests N
//     reads DIR/pcaps/{client1,router-fab,host*,h*vm*}.pcap, DIR/edge-{before,after}.json,
//     DIR/host-{before,after}-NODE.json, DIR/neighbors-NODE.json, DIR/client-http.json
//   node dist/scripts/scenarios/lib/fabric-closed.js settled --config F --run DIR --client-mac M
//        --edge-now F --host-now host1=F,...
//     exit 0 once the router's edge counters read now moved by exactly what client1's (stopped) capture
//     calls for and every host counted each rogue frame: the scenario waits for this, not for time
//
// The verifier classifies every packet client1 sent, from the config's addresses alone, into what the
// router's filter must do with it, and requires each named nft counter to have moved by exactly that.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { inPrefix, parseIpAddr, type IpAddr } from '../../../shared/addr.js';
import type { SlbxConfig } from '../../../shared/config.js';
import { pkt } from '../../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../../shared/pcap-file.js';
import { TCP_SYN } from '../../../shared/tcp.js';
import { Checks, flagsOf, loadCapture, loadConfig, need, tsharkFields, type CapturedPacket } from './check.js';
import { readClientRecords } from './north-south.js';

/** Copies of each spoofed VXLAN (per MUX, per host) and of each probe toward the fabric. */
export const SPOOF_COPIES = 20;
export const PROBE_COPIES = 3;
/** The spoofed VXLAN's inner packet: from this address, so a backend's capture shows any that got through. */
export const SPOOF_INNER_SRC = '198.51.100.77';
export const SPOOF_INNER_SRC6 = '2001:db8:c::77';
const CLIENT4 = '198.51.100.10';
const CLIENT6 = '2001:db8:c::10';
/** Ports that must never be reachable from outside: the controller's API, BGP, BFD, the status endpoints. */
const TCP_PORTS = [8480, 179, 9180, 9181];
const UDP_PORTS = [3784, 4784];

type Family = 4 | 6;
const LAB_ROUTER4 = ['198.51.100.1'];
const LAB_ROUTER6 = ['2001:db8:c::1'];

/** Addresses of the lab, from the config and the lab's fixed numbering (docs/lab.md). */
interface LabAddrs {
  muxes: { name: string; a4: string; a6: string | null }[];
  hosts: { name: string; a4: string; a6: string | null; nicMac: string }[];
  controller4: string;
  controller6: string | null;
  routerFab4: string;
  routerFab6: string | null;
  vips: string[];
  /** The prefixes delegated to the load balancer (config vipRanges): what the edge forwards inward. */
  vipRanges: [IpAddr, number][];
  /** Prefixes (address, length) of our own ranges: the fabric, the backends' networks, the VIPs, the router. */
  own: [IpAddr, number][];
}

function net24(a: string, host: number): string {
  return a.split('.').slice(0, 3).concat(String(host)).join('.');
}
function net64(a: string, host: number): string {
  const w = parseIpAddr(a)!.words;
  return parseIpAddr(
    `${w[0]!
      .toString(16)
      .padStart(8, '0')
      .replace(/(.{4})/, '$1:')}:${w[1]!
      .toString(16)
      .padStart(8, '0')
      .replace(/(.{4})/, '$1:')}::${host.toString(16)}`,
  )!.text;
}

function labAddrs(config: SlbxConfig): LabAddrs {
  const m0 = config.muxes[0]!;
  const nicOf = (host: string) => config.nics.find((n) => n.host === host);
  const macText = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
  const own: [IpAddr, number][] = [];
  const add = (t: string | null | undefined, len4: number, len6: number) => {
    if (!t) return;
    const a = parseIpAddr(t)!;
    own.push([a, a.family === 4 ? len4 : len6]);
  };
  for (const n of [...config.muxes, ...config.hosts]) {
    add(n.address.text, 24, 64);
    add(n.address6?.text, 24, 64);
  }
  for (const n of config.nics) {
    add(n.address4?.text, 24, 64);
    add(n.address6?.text, 24, 64);
  }
  for (const r of config.vipRanges) own.push([r.network, r.prefixLen]);
  for (const r of [...LAB_ROUTER4, ...LAB_ROUTER6]) add(r, 32, 128);
  return {
    muxes: config.muxes.map((m) => ({ name: m.name, a4: m.address.text, a6: m.address6?.text ?? null })),
    hosts: config.hosts.map((h) => ({
      name: h.name,
      a4: h.address.text,
      a6: h.address6?.text ?? null,
      nicMac: macText(nicOf(h.name)!.mac),
    })),
    controller4: net24(m0.address.text, 5),
    controller6: m0.address6 ? net64(m0.address6.text, 5) : null,
    routerFab4: net24(m0.address.text, 1),
    routerFab6: m0.address6 ? net64(m0.address6.text, 1) : null,
    vips: config.vips.map((v) => v.address.text),
    vipRanges: config.vipRanges.map((r): [IpAddr, number] => [r.network, r.prefixLen]),
    own,
  };
}

function inVipRanges(a: IpAddr, lab: LabAddrs): boolean {
  return lab.vipRanges.some(([n, len]) => inPrefix(a, n, len));
}

function mapOf(text: string): Map<string, string> {
  return new Map(
    text
      .split(',')
      .filter(Boolean)
      .map((kv) => kv.split('=') as [string, string]),
  );
}

function writePcap(path: string, frames: Buffer[]): void {
  writeFileSync(
    path,
    buildPcap(
      LINKTYPE_ETHERNET,
      frames.map((d, i) => ({ tsUs: 1e15 + i, data: d, origLen: d.length })),
    ),
  );
}

/** A spoofed VXLAN frame: outer `src` -> host `dst` (the family of the addresses), to the host's first nic. */
function spoofedVxlan(ethSrc: string, ethDst: string, src: string, dst: string, nicMac: string, vip4: string, i: number): Buffer {
  const p = pkt().eth({ src: ethSrc, dst: ethDst });
  const outer = src.includes(':') ? p.ipv6({ src, dst }) : p.ipv4({ src, dst });
  return outer
    .udp({ sport: 50200 + i, dport: 4789, ...(src.includes(':') ? {} : { checksum: 'zero' as const }) })
    .vxlan({ vni: 5001 })
    .eth({ src: ethSrc, dst: nicMac })
    .ipv4({ src: SPOOF_INNER_SRC, dst: vip4 })
    .udp({ sport: 40000, dport: 7 })
    .payload(`slbx-spoof ${i}`)
    .build();
}

export function generate(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const config = loadConfig(need(f, 'config'));
  const out = need(f, 'out');
  const underlay = need(f, 'underlay');
  const a = labAddrs(config);
  const clientMac = need(f, 'client-mac');
  const routerMac = need(f, 'router-mac');
  const rogueMac = need(f, 'rogue-mac');
  const hostMacs = mapOf(need(f, 'host-macs'));
  const vip4 = a.vips.find((v) => !v.includes(':'))!;
  const paOf = (n: { a4: string; a6: string | null }) => (underlay === 'ipv6' ? n.a6 : n.a4);

  const outside: Buffer[] = [];
  // 1. VXLAN with each MUX's PA toward every host PA (the attack)
  for (const m of a.muxes) {
    for (const h of a.hosts) {
      const src = paOf(m);
      const dst = paOf(h);
      if (src === null || dst === null) throw new Error(`${m.name} or ${h.name} has no provider address for an ${underlay} underlay`);
      for (let i = 0; i < SPOOF_COPIES; i++) outside.push(spoofedVxlan(clientMac, routerMac, src, dst, h.nicMac, vip4, i));
    }
  }
  // 2. ICMP echo, TCP SYNs and UDP to the fabric: every host, MUX and the controller, IPv4 and IPv6,
  //    and the router's own fabric address
  const targets: string[] = [];
  for (const n of [...a.hosts, ...a.muxes]) {
    targets.push(n.a4);
    if (n.a6) targets.push(n.a6);
  }
  targets.push(a.controller4, a.routerFab4);
  if (a.controller6) targets.push(a.controller6);
  if (a.routerFab6) targets.push(a.routerFab6);
  for (const t of targets) {
    const v6 = t.includes(':');
    const ipl = () =>
      v6
        ? pkt().eth({ src: clientMac, dst: routerMac }).ipv6({ src: CLIENT6, dst: t })
        : pkt().eth({ src: clientMac, dst: routerMac }).ipv4({ src: CLIENT4, dst: t });
    for (let i = 0; i < PROBE_COPIES; i++) {
      outside.push(
        v6
          ? ipl()
              .icmpv6({ type: 128, rest: (0x5b0c << 16) | i })
              .payload('slbx-probe')
              .build()
          : ipl()
              .icmp({ type: 8, rest: (0x5b0c << 16) | i })
              .payload('slbx-probe')
              .build(),
      );
      for (const port of TCP_PORTS)
        outside.push(
          ipl()
            .tcp({ sport: 41000 + i, dport: port, flags: TCP_SYN, seq: 1000 + i })
            .build(),
        );
      for (const port of UDP_PORTS)
        outside.push(
          ipl()
            .udp({ sport: 42000 + i, dport: port })
            .payload(24)
            .build(),
        );
    }
  }
  writePcap(join(out, 'outside.pcap'), outside);

  // 3. the compromised node on the fabric: its own MAC, each MUX's PA, to each host's MAC and PA
  const rogue: Buffer[] = [];
  for (const m of a.muxes) {
    for (const h of a.hosts) {
      const hm = hostMacs.get(h.name);
      if (hm === undefined) throw new Error(`--host-macs has no ${h.name}`);
      for (let i = 0; i < SPOOF_COPIES; i++) rogue.push(spoofedVxlan(rogueMac, hm, paOf(m)!, paOf(h)!, h.nicMac, vip4, i));
    }
  }
  writePcap(join(out, 'rogue.pcap'), rogue);
  process.stdout.write(`outside.pcap: ${outside.length} frames; rogue.pcap: ${rogue.length} frames\n`);
}

/** The outermost IP header (a VXLAN packet over IPv6 may carry IPv4 inside). */
function outerIp(p: CapturedPacket) {
  return p.d.layers.find((x) => x.layer === 'ipv4' || x.layer === 'ipv6') as
    Extract<CapturedPacket['d']['layers'][number], { layer: 'ipv4' | 'ipv6' }> | undefined;
}

/** What the router's edge filter must do with a packet from the outside, by its addresses alone. */
type Fate = 'spoofed' | 'toRouter' | 'notVip' | 'toVip' | 'ignored';

function classify(p: CapturedPacket, a: LabAddrs, clientMac: string): { fate: Fate; family: Family } | null {
  const eth = p.d.first('eth');
  if (eth === undefined || eth.src !== clientMac) return null; // not sent by the client
  const l = outerIp(p);
  if (l === undefined) return null; // ARP
  const family: Family = l.layer === 'ipv4' ? 4 : 6;
  const src = parseIpAddr(l.src)!;
  const dst = parseIpAddr(l.dst)!;
  const icmp6 = p.d.first('icmpv6');
  // neighbour discovery and link-scope multicast stay on the link (the filter lets them be)
  if (icmp6 !== undefined && icmp6.type >= 133 && icmp6.type <= 137) return { fate: 'ignored', family };
  if (family === 6 && dst.words[0]! >>> 16 === 0xff02) return { fate: 'ignored', family };
  if (a.own.some(([n, len]) => inPrefix(src, n, len))) return { fate: 'spoofed', family };
  const router = [...LAB_ROUTER4, ...LAB_ROUTER6, a.routerFab4, a.routerFab6].filter((x): x is string => x !== null);
  if (router.includes(dst.text)) {
    const isIcmp = p.d.first('icmp') !== undefined || icmp6 !== undefined;
    if (isIcmp && (LAB_ROUTER4.includes(dst.text) || LAB_ROUTER6.includes(dst.text))) return { fate: 'ignored', family };
    return { fate: 'toRouter', family };
  }
  if (inVipRanges(dst, a)) return { fate: 'toVip', family };
  return { fate: 'notVip', family };
}

const COUNTER_OF: Record<Exclude<Fate, 'ignored'>, string> = {
  spoofed: 'edge_spoofed_source',
  toRouter: 'edge_to_router',
  notVip: 'edge_not_vip',
  toVip: 'edge_to_vip',
};

/** What the router's edge counters must move by for client1's capture: counter name -> packets; and how many packets that was. */
function wantedEdge(client: readonly CapturedPacket[], a: LabAddrs, clientMac: string): { want: Map<string, number>; sent: number } {
  const want = new Map<string, number>();
  let sent = 0;
  for (const p of client) {
    const k = classify(p, a, clientMac);
    if (k === null || k.fate === 'ignored') continue;
    sent++;
    const name = `${COUNTER_OF[k.fate]}${k.family}`;
    want.set(name, (want.get(name) ?? 0) + 1);
  }
  return { want, sent };
}

const EDGE_COUNTERS = (['spoofed', 'toRouter', 'notVip', 'toVip'] as const).flatMap((fate) =>
  ([4, 6] as const).map((fam) => `${COUNTER_OF[fate]}${fam}`),
);

/**
 * The scenario's evidence that everything sent has been counted (instead of a pause): with client1's
 * capture stopped, the router's edge counters read now (--edge-now F) moved by exactly what the capture
 * calls for, and each host's drop_in_spoofed_source (--host-now host1=F,...) by every rogue frame
 * (muxes x SPOOF_COPIES). Exit 0 when so, 1 (saying what differs) when not yet.
 */
export function settled(argv: readonly string[]): number {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const a = labAddrs(loadConfig(need(f, 'config')));
  const json = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
  const { want } = wantedEdge(loadCapture(join(run, 'pcaps', 'client1.pcap')), a, need(f, 'client-mac'));
  const before = json(join(run, 'edge-before.json')) as Record<string, { packets: number }>;
  const now = json(need(f, 'edge-now')) as Record<string, { packets: number }>;
  const differ: string[] = [];
  for (const name of EDGE_COUNTERS) {
    const d = (now[name]?.packets ?? NaN) - (before[name]?.packets ?? NaN);
    if (d !== (want.get(name) ?? 0)) differ.push(`${name} +${d} of ${want.get(name) ?? 0}`);
  }
  for (const [host, file] of mapOf(need(f, 'host-now'))) {
    const d = (json(file).drop_in_spoofed_source ?? NaN) - (json(join(run, `host-before-${host}.json`)).drop_in_spoofed_source ?? NaN);
    if (d !== a.muxes.length * SPOOF_COPIES) differ.push(`${host} drop_in_spoofed_source +${d} of ${a.muxes.length * SPOOF_COPIES}`);
  }
  if (differ.length > 0) process.stderr.write(`not yet counted: ${differ.join(', ')}\n`);
  return differ.length === 0 ? 0 : 1;
}

function isSpoofInner(p: CapturedPacket): boolean {
  return p.d.all('ipv4').some((l) => l.src === SPOOF_INNER_SRC) || p.d.all('ipv6').some((l) => l.src === SPOOF_INNER_SRC6);
}

export function verify(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const c = new Checks();
  const config = loadConfig(need(f, 'config'));
  const run = need(f, 'run');
  const underlay = need(f, 'underlay');
  const a = labAddrs(config);
  const json = (name: string) => JSON.parse(readFileSync(join(run, name), 'utf8'));
  const pcap = (name: string) => loadCapture(join(run, 'pcaps', `${name}.pcap`));
  const clientMac = need(f, 'client-mac');
  const rogueMac = need(f, 'rogue-mac');
  const requests = Number(need(f, 'requests'));

  // 1. every packet client1 sent, classified from the config's addresses, against the router's counters
  const { want, sent } = wantedEdge(pcap('client1'), a, clientMac);
  const before = json('edge-before.json') as Record<string, { packets: number }>;
  const after = json('edge-after.json') as Record<string, { packets: number }>;
  let dropped = 0;
  let wantDropped = 0;
  for (const fate of ['spoofed', 'toRouter', 'notVip', 'toVip'] as const) {
    for (const fam of [4, 6] as const) {
      const name = `${COUNTER_OF[fate]}${fam}`;
      const d = (after[name]?.packets ?? NaN) - (before[name]?.packets ?? NaN);
      const w = want.get(name) ?? 0;
      c.check(d === w, `router counter ${name} moved by exactly what client1 sent of that kind`, `+${d}, client1's capture: ${w}`);
      if (fate !== 'toVip') {
        dropped += d;
        wantDropped += w;
      }
    }
  }
  const spoofSent = (want.get('edge_spoofed_source4') ?? 0) + (want.get('edge_spoofed_source6') ?? 0);
  c.check(
    spoofSent >= a.muxes.length * a.hosts.length * SPOOF_COPIES,
    "client1 sent VXLAN with each MUX's PA to every host PA",
    `${spoofSent} packets with a source of ours`,
  );
  c.check(
    dropped === wantDropped && wantDropped > 0,
    "the router's drop counters account for every packet client1 sent that was not to a VIP",
    `${dropped} dropped of ${wantDropped} (of ${sent} client packets in all)`,
  );
  const rpf = ['fabric_rpf4', 'fabric_rpf6'].map((n) => (after[n]?.packets ?? 0) - (before[n]?.packets ?? 0));
  c.check(
    rpf[0] === 0 && rpf[1] === 0,
    "the fabric side's reverse-path filter dropped nothing of the lab's own traffic",
    `fabric_rpf4 +${rpf[0]}, fabric_rpf6 +${rpf[1]}`,
  );

  // 2. nothing from the outside entered the fabric but packets to a VIP (the router's fabric side)
  const routerFab = pcap('router-fab');
  const clientNets = [parseIpAddr('198.51.100.0')!, parseIpAddr('2001:db8:c::')!];
  const fromOutside = routerFab.filter((p) => {
    const l = outerIp(p);
    if (l === undefined) return false;
    const s = parseIpAddr(l.src)!;
    const fromClient = inPrefix(s, clientNets[0]!, 24) || inPrefix(s, clientNets[1]!, 64);
    return (fromClient && !inVipRanges(parseIpAddr(l.dst)!, a)) || isSpoofInner(p);
  });
  const toVip = routerFab.filter((p) => {
    const l = outerIp(p);
    return l !== undefined && inVipRanges(parseIpAddr(l.dst)!, a);
  }).length;
  c.check(
    fromOutside.length === 0,
    'nothing from the outside reached the fabric but packets to a VIP (router fab0 capture)',
    `${fromOutside.length} other packets, ${toVip} to VIPs`,
  );

  // 3. the compromised node: its frames reached the hosts and were refused by the MAC check, counted
  const perHost = new Map(a.hosts.map((h) => [h.name, 0]));
  for (const h of a.hosts) {
    const cap = pcap(h.name);
    const arrived = cap.filter((p) => p.d.first('eth')?.src === rogueMac && p.d.first('vxlan') !== undefined).length;
    perHost.set(h.name, arrived);
    const expected = a.muxes.length * SPOOF_COPIES;
    c.check(
      arrived === expected,
      `${h.name}: the forged VXLAN of a node on the segment that is no MUX arrived (its fab0 capture)`,
      `${arrived} frames from ${rogueMac}, sent ${expected}`,
    );
    const hb = json(`host-before-${h.name}.json`) as Record<string, number>;
    const ha = json(`host-after-${h.name}.json`) as Record<string, number>;
    const d = (ha.drop_in_spoofed_source ?? NaN) - (hb.drop_in_spoofed_source ?? NaN);
    c.check(d === arrived, `${h.name}: every one was refused by the source MAC check and counted as drop_in_spoofed_source`, `+${d}`);
    const un = (ha.drop_in_source_unresolved ?? NaN) - (hb.drop_in_source_unresolved ?? NaN);
    c.check(un === 0, `${h.name}: no VXLAN was dropped for an unresolved MUX MAC meanwhile`, `drop_in_source_unresolved +${un}`);
    const outer = cap.filter((p) => p.d.first('vxlan') !== undefined && p.d.first('eth')?.src !== rogueMac && isSpoofInner(p)).length;
    c.check(outer === 0, `${h.name}: none of client1's spoofed VXLAN reached it`, `${outer} frames`);
  }
  // the neighbours the host agents learned are the MUXes' real MACs (read from each MUX's fab0)
  const muxMacs = mapOf(need(f, 'mux-macs'));
  for (const h of a.hosts) {
    const nb = json(`neighbors-${h.name}.json`) as { peer: string; kind: string; address: string; mac: string | null }[];
    for (const m of a.muxes) {
      const pa = underlay === 'ipv6' ? m.a6 : m.a4;
      const e = nb.find((x) => x.address === pa);
      c.check(
        e?.mac === muxMacs.get(m.name),
        `${h.name} learned ${m.name}'s MAC for ${pa} by ${underlay === 'ipv6' ? 'ND' : 'ARP'}`,
        `${e?.mac ?? 'nothing'}, ${m.name} fab0 is ${muxMacs.get(m.name)}`,
      );
    }
  }

  // 4. zero spoofed inner packets reached any VM
  for (const nic of config.nics) {
    const n = pcap(nic.name).filter(isSpoofInner).length;
    c.check(n === 0, `${nic.name}: no spoofed inner packet (from ${SPOOF_INNER_SRC}) reached it`, `${n}`);
  }

  // 5. the good requests, all the while
  const recs = readClientRecords(join(run, 'client-http.json'));
  const ok = recs.filter((r) => r.ok).length;
  c.check(
    ok === requests && recs.length === requests,
    `${requests} requests through the VIP all succeeded meanwhile`,
    `${ok}/${recs.length}`,
  );

  // 6. tshark, independently: what client1 sent to UDP 4789, what the hosts got from the rogue, what the VMs got
  const vx = tsharkFields(join(run, 'pcaps', 'client1.pcap'), ['frame.number'], `eth.src==${clientMac} && udp.dstport==4789`);
  if (vx !== null)
    c.check(
      vx.length === spoofSent,
      'tshark: client1 sent as many VXLAN packets as the router counted as spoofed',
      `${vx.length} vs ${spoofSent}`,
    );
  for (const h of a.hosts) {
    const t = tsharkFields(join(run, 'pcaps', `${h.name}.pcap`), ['vxlan.vni'], `eth.src==${rogueMac} && vxlan`);
    if (t !== null)
      c.check(
        t.length === perHost.get(h.name),
        `tshark: ${h.name}'s capture holds the rogue's VXLAN`,
        `${t.length} frames, VNI ${[...new Set(t.map((r) => r[0]))].join(',')}`,
      );
  }
  for (const nic of config.nics) {
    const t = tsharkFields(join(run, 'pcaps', `${nic.name}.pcap`), ['frame.number'], `ip.src==${SPOOF_INNER_SRC}`);
    if (t !== null) c.check(t.length === 0, `tshark: nothing from ${SPOOF_INNER_SRC} in ${nic.name}'s capture`, `${t.length}`);
  }
  return c;
}

function main(argv: readonly string[]): number {
  const [cmd, ...rest] = argv;
  if (cmd === 'gen') {
    generate(rest);
    return 0;
  }
  if (cmd === 'verify') verify(rest).exit();
  if (cmd === 'settled') return settled(rest);
  process.stderr.write(
    'usage: fabric-closed.js gen --config F --out DIR --underlay ipv4|ipv6 --client-mac M --router-mac M --rogue-mac M --host-macs host1=M,...\n' +
      '       fabric-closed.js verify --config F --run DIR --underlay ipv4|ipv6 --client-mac M --rogue-mac M --mux-macs mux1=M,... --requests N\n' +
      '       fabric-closed.js settled --config F --run DIR --client-mac M --edge-now F --host-now host1=F,...\n',
  );
  return cmd === '--help' || cmd === '-h' ? 0 : 2;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href)
  process.exitCode = main(process.argv.slice(2));
