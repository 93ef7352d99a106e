#!/usr/bin/env node
// slbx-replay: runs one data plane, unchanged, over the frames of a pcap file and writes what it sends
// to another pcap file. The offline way to see (and test) exactly what the MUX or a host agent does.
import { readFileSync, writeFileSync } from 'node:fs';
import { mac, parseMac } from '../shared/addr.js';
import { formatConfigErrors, parseConfig, type SlbxConfig } from '../shared/config.js';
import { buildPcap, readPcap, LINKTYPE_ETHERNET, type PcapPacket } from '../shared/pcap-file.js';
import { codecErrorName } from '../shared/codec-error.js';
import { writeEthernetRaw, ETHERTYPE_IPV4, ETHERTYPE_IPV6 } from '../shared/ethernet.js';
import { compileMuxTables, ALL_HEALTHY } from '../mux/tables.js';
import { processPacket, VERDICT_FORWARD as MUX_FORWARD, VERDICT_REPLY as MUX_REPLY } from '../mux/data-plane.js';
import { buildMuxContext } from '../mux/context.js';
import { compileHostTables, macKey } from '../host-agent/tables.js';
import { processInbound, processOutbound, OUT_DSR, VERDICT_FORWARD as HOST_FORWARD } from '../host-agent/data-plane.js';
import { learnReplyFlow } from '../host-agent/dsr-flows.js';
import { buildHostContext } from '../host-agent/context.js';
import { one, type OptionSpec, type ParsedArgs } from '../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../runtime/command.js';

export type Plane = 'mux' | 'host-in' | 'host-out';

export interface ReplayOptions {
  config: SlbxConfig;
  plane: Plane;
  input: Uint8Array;
  /** MUX name (plane mux) or host name (host planes); default: the first in the config. */
  node?: string;
  /** Our own MAC; default 02:00 + the node's IPv4 provider address. */
  localMac?: Uint8Array;
  /** Next-hop MACs: host name -> MAC (plane mux) or the router's MAC (host-out); default derived. */
  neighbors?: Map<string, Uint8Array>;
  /** Host planes: the MTU of the interface toward the router (DSR); default fabric.mtu, as in the lab. */
  dsrMtu?: number;
  /**
   * host-out: record each reply's flow as if its client's packet had come in through a MUX first (a
   * capture of replies alone). Without it a reply of no recorded flow is dropped as
   * drop_out_dsr_unsolicited, as the daemon does (host-agent/dsr-flows.ts).
   */
  assumeFlows?: boolean;
}

export interface ReplayResult {
  output: Uint8Array;
  packetsIn: number;
  packetsOut: number;
  counters: Record<string, number>;
  /** Per output frame: where it went (a host name, 'icmp-reply' (the MUX's ICMP too big), a port, 'dsr'). */
  destinations: Record<string, number>;
}

/** 02:00 followed by the four bytes of an IPv4 address: the MACs the replay cannot learn. */
export function derivedMac(addr4: number): Uint8Array {
  return Uint8Array.of(0x02, 0x00, addr4 >>> 24, (addr4 >>> 16) & 0xff, (addr4 >>> 8) & 0xff, addr4 & 0xff);
}

/** The lab's router MAC as the replay assumes it (02:00 + 198.18.0.1). */
export const REPLAY_ROUTER_MAC = derivedMac(0xc6120001);

export function replay(o: ReplayOptions): ReplayResult {
  const file = readPcap(o.input);
  if (typeof file === 'number')
    throw new Error(`input is not a pcap file (${codecErrorName(file)}); pcapng is not read: convert with 'editcap -F pcap IN OUT'`);
  if (file.linkType !== LINKTYPE_ETHERNET) throw new Error(`input link type ${file.linkType} is not Ethernet (1)`);
  const out: PcapPacket[] = [];
  const destinations: Record<string, number> = {};
  const count = (k: string) => {
    destinations[k] = (destinations[k] ?? 0) + 1;
  };
  const cfg = o.config;
  if (o.plane === 'mux') {
    const mux = o.node === undefined ? cfg.muxes[0]! : cfg.muxes.find((m) => m.name === o.node);
    if (mux === undefined) throw new Error(`no mux named ${o.node} (muxes: ${cfg.muxes.map((m) => m.name).join(', ')})`);
    const tables = compileMuxTables(cfg, ALL_HEALTHY, null, 1);
    for (const h of tables.hosts.values()) {
      h.mac.set(o.neighbors?.get(h.name) ?? derivedMac(h.pa4));
      h.macKnown = true;
    }
    // built as the daemon builds it (mux/context.ts): its underlay, provider addresses, MTU, port, seed
    const ctx = buildMuxContext(cfg, mux.name, tables, o.localMac ?? derivedMac(mux.address.words[0]!));
    for (const p of file.packets) {
      ctx.nowS = Math.max(1, Math.floor(p.tsUs / 1e6));
      const v = processPacket(p.data, p.data.length, ctx);
      // the daemon sends both: VXLAN to a host, and ICMP too big back out the interface it came from
      if (v !== MUX_FORWARD && v !== MUX_REPLY) continue;
      out.push({ tsUs: p.tsUs, data: Uint8Array.from(ctx.out.subarray(0, ctx.outLen)), origLen: ctx.outLen });
      count(v === MUX_FORWARD ? ctx.lastNic!.host.name : 'icmp-reply');
    }
    return {
      output: buildPcap(LINKTYPE_ETHERNET, out),
      packetsIn: file.packets.length,
      packetsOut: out.length,
      counters: ctx.counters.snapshot(),
      destinations,
    };
  }
  const host = o.node === undefined ? cfg.hosts[0]! : cfg.hosts.find((h) => h.name === o.node);
  if (host === undefined) throw new Error(`no host named ${o.node} (hosts: ${cfg.hosts.map((h) => h.name).join(', ')})`);
  const tables = compileHostTables(cfg, host.name, 1);
  // the port's MAC (the backends' gateway MAC): the nic's MAC with the locally administered 0x04 bit flipped
  const portMacs = tables.nics.map((n) => {
    const m = Uint8Array.from(n.mac);
    m[0] = m[0]! ^ 0x04;
    return m;
  });
  // built as the daemon builds it (host-agent/context.ts); the DSR return's MTU is the fabric interface's,
  // which the lab sets to fabric.mtu
  const ctx = buildHostContext(cfg, tables, portMacs, o.dsrMtu ?? cfg.fabric.mtu);
  // the daemon (capture path) accepts VXLAN from a peer only from the MAC its provider address resolved
  // to (host-agent/neighbors.ts): here every peer is resolved to the MAC the replay gives that node
  // (--neighbor NAME=MAC, else 02:00 + its IPv4 provider address, what the mux plane writes)
  const pa4ByName = new Map([...cfg.muxes, ...cfg.hosts].map((n) => [n.name, n.address.words[0]!]));
  ctx.sourceMacCheck = true;
  for (const peer of tables.peers)
    ctx.peerMacs[peer.index] = macKey(o.neighbors?.get(peer.name) ?? derivedMac(pa4ByName.get(peer.name)!), 0);
  const localMac = o.localMac ?? derivedMac(host.address.words[0]!);
  const routerMac = o.neighbors?.get('router') ?? REPLAY_ROUTER_MAC;
  const byMac = new Map(tables.nics.map((n) => [macKey(n.mac, 0), n.index]));
  for (const p of file.packets) {
    let v: number;
    // the host planes NAT in place: a copy of each frame, as the daemon gets a fresh one from its capture
    // (the caller's input stays as it was)
    const data = Uint8Array.from(p.data);
    if (o.plane === 'host-in') v = processInbound(data, data.length, ctx);
    else {
      const port = data.length >= 12 ? byMac.get(macKey(data, 6)) : undefined;
      if (port === undefined) {
        count('unknown-port');
        continue;
      }
      if (o.assumeFlows === true) learnReplyFlow(data, data.length, port, ctx);
      v = processOutbound(data, data.length, port, ctx);
    }
    if (v !== HOST_FORWARD) continue;
    const pktBytes = ctx.outBuf.subarray(ctx.outOff, ctx.outOff + ctx.outLen);
    if (ctx.outPort === OUT_DSR) {
      // as the host's kernel frames it toward the router
      const f = new Uint8Array(14 + pktBytes.length);
      writeEthernetRaw(routerMac, localMac, pktBytes[0]! >>> 4 === 6 ? ETHERTYPE_IPV6 : ETHERTYPE_IPV4, f, 0);
      f.set(pktBytes, 14);
      out.push({ tsUs: p.tsUs, data: f, origLen: f.length });
      count('dsr');
    } else {
      out.push({ tsUs: p.tsUs, data: Uint8Array.from(pktBytes), origLen: pktBytes.length });
      count(`port ${tables.nics[ctx.outPort]!.port}`);
    }
  }
  return {
    output: buildPcap(LINKTYPE_ETHERNET, out),
    packetsIn: file.packets.length,
    packetsOut: out.length,
    counters: ctx.counters.snapshot(),
    destinations,
  };
}

const OPTIONS: OptionSpec[] = [
  { name: 'config', value: 'FILE', help: 'slbx config (YAML or JSON), e.g. examples/lab.yaml' },
  {
    name: 'plane',
    value: 'PLANE',
    help: 'mux (client frames -> VXLAN), host-in (VXLAN -> backend ports) or host-out (backend frames -> DSR)',
  },
  { name: 'in', value: 'IN.pcap', help: 'frames to feed (pcap, Ethernet link type; pcapng is not read)' },
  { name: 'out', value: 'OUT.pcap', help: 'where to write the frames the plane sends' },
  { name: 'node', value: 'NAME', help: 'which mux (plane mux) or host (host planes) to be; default: the first in the config' },
  { name: 'local-mac', value: 'MAC', help: "our own MAC; default 02:00 + the node's IPv4 provider address" },
  {
    name: 'neighbor',
    value: 'NAME=MAC',
    help: 'next-hop MAC of a host (plane mux) or of "router" (host-out); host-in: the MAC VXLAN from that mux or host comes from; default 02:00 + its IPv4 address',
    repeat: true,
  },
  {
    name: 'dsr-mtu',
    value: 'N',
    help: 'host planes: MTU of the interface toward the router (default: fabric.mtu of the config, as the lab sets it)',
  },
  {
    name: 'assume-flows',
    help: "host-out: record each reply's flow as if its client's packet had come in first (without it, a reply of no recorded flow is dropped as drop_out_dsr_unsolicited, as in the daemon)",
  },
  { name: 'json', help: 'print the result as JSON' },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'slbx-replay',
  usage: 'slbx-replay --config FILE --plane mux|host-in|host-out --in IN.pcap --out OUT.pcap [options]',
  about:
    'Runs a slbx data plane, exactly as the daemons run it, over the frames of a pcap file, writes the frames\n' +
    'it would send to OUT.pcap, and prints its counters: every drop under its reason. The context is built\n' +
    'from the config as the daemons build it: with fabric.underlay: ipv6 the MUX writes VXLAN in IPv6 (from\n' +
    "the MUX's address6, UDP checksum computed) and leaves 70 bytes of the fabric MTU for it, not 50; the\n" +
    "MUX's ICMP too big answers are written too. host-out picks the port of each frame by its source MAC\n" +
    "(the nic's MAC), frames DSR packets toward the router, and answers replies larger than the DSR MTU\n" +
    '(default fabric.mtu) with ICMP too big on the port.',
  options: OPTIONS,
  extraHelp:
    'example:\n  slbx-replay --config examples/lab.yaml --plane mux --in client.pcap --out fabric.pcap\n' +
    '  tshark -r fabric.pcap -d udp.port==4789,vxlan',
};

export const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  for (const req of ['config', 'plane', 'in', 'out']) {
    if (one(args, req) === undefined) {
      process.stderr.write(`slbx-replay: --${req} is required (see --help)\n`);
      return 2;
    }
  }
  const plane = one(args, 'plane') as Plane;
  if (!['mux', 'host-in', 'host-out'].includes(plane)) {
    process.stderr.write(`slbx-replay: --plane must be mux, host-in or host-out, not ${JSON.stringify(plane)}\n`);
    return 2;
  }
  const cfgPath = one(args, 'config')!;
  const parsed = parseConfig(readFileSync(cfgPath, 'utf8'), cfgPath);
  if (!parsed.ok) {
    process.stderr.write(`${formatConfigErrors(parsed.errors, cfgPath)}\n`);
    return 1;
  }
  const neighbors = new Map<string, Uint8Array>();
  for (const n of args.values.get('neighbor') ?? []) {
    const [name, m] = n.split('=');
    const parsedMac = m === undefined ? null : parseMac(m);
    if (!name || parsedMac === null) {
      process.stderr.write(`slbx-replay: --neighbor wants NAME=MAC, e.g. host1=02:00:00:00:00:21; got ${JSON.stringify(n)}\n`);
      return 2;
    }
    neighbors.set(name, parsedMac);
  }
  const lm = one(args, 'local-mac');
  if (lm !== undefined && parseMac(lm) === null) {
    process.stderr.write(`slbx-replay: --local-mac is not a MAC: ${lm}\n`);
    return 2;
  }
  const dsrMtuText = one(args, 'dsr-mtu');
  const dsrMtu = dsrMtuText === undefined ? undefined : Number(dsrMtuText);
  if (dsrMtu !== undefined && !(Number.isInteger(dsrMtu) && dsrMtu >= 576 && dsrMtu <= 65535)) {
    process.stderr.write(`slbx-replay: --dsr-mtu must be an integer 576..65535 (an interface MTU), got ${JSON.stringify(dsrMtuText)}\n`);
    return 2;
  }
  let r: ReplayResult;
  try {
    r = replay({
      config: parsed.config,
      plane,
      input: readFileSync(one(args, 'in')!),
      neighbors,
      ...(one(args, 'node') !== undefined ? { node: one(args, 'node')! } : {}),
      ...(lm !== undefined ? { localMac: mac(lm) } : {}),
      ...(dsrMtu !== undefined ? { dsrMtu } : {}),
      ...(args.flags.has('assume-flows') ? { assumeFlows: true } : {}),
    });
  } catch (e) {
    process.stderr.write(`slbx-replay: ${(e as Error).message}\n`);
    return 1;
  }
  writeFileSync(one(args, 'out')!, r.output);
  if (args.flags.has('json')) {
    process.stdout.write(
      `${JSON.stringify({ packetsIn: r.packetsIn, packetsOut: r.packetsOut, destinations: r.destinations, counters: r.counters }, null, 2)}\n`,
    );
  } else {
    process.stdout.write(`${plane}: ${r.packetsIn} frames in, ${r.packetsOut} out -> ${one(args, 'out')}\n`);
    for (const [k, v] of Object.entries(r.destinations)) process.stdout.write(`  to ${k}: ${v}\n`);
    const drops = Object.entries(r.counters).filter(([k]) => k.startsWith('drop_'));
    if (drops.length > 0) process.stdout.write(`  dropped:\n${drops.map(([k, v]) => `    ${k.slice(5)}: ${v}`).join('\n')}\n`);
  }
  return 0;
}

if (isMain(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
