#!/usr/bin/env node
// slbx-gen-traffic: writes a pcap of client frames toward every VIP rule of a config (TCP SYNs and UDP
// datagrams from a range of clients and ports), or of backend replies for host-out replay: input for
// slbx-replay and the offline demo.
import { readFileSync, writeFileSync } from 'node:fs';
import { formatConfigErrors, parseConfig, type SlbxConfig } from '../shared/config.js';
import { formatIpv4, formatIpv6 } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN, TCP_ACK } from '../shared/tcp.js';
import { buildPcap, LINKTYPE_ETHERNET, type PcapPacket } from '../shared/pcap-file.js';
import { one, type OptionSpec, type ParsedArgs } from '../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../runtime/command.js';
import { derivedMac, REPLAY_ROUTER_MAC } from './replay.js';
import { formatMac } from '../shared/addr.js';

export const CLIENT4_BASE = 0xc6336400 + 10; // 198.51.100.10
export const CLIENT6_PREFIX = [0x20010db8, 0x000c0000, 0, 0]; // 2001:db8:c::/64

function client(i: number, family: 4 | 6): string {
  return family === 4 ? formatIpv4(CLIENT4_BASE + i) : formatIpv6(Uint32Array.of(...CLIENT6_PREFIX.slice(0, 3), 0x10 + i));
}

/** Client frames: for each VIP rule and protocol, `flows` flows spread over `clients` clients. */
export function clientFrames(cfg: SlbxConfig, flows: number, clients: number, muxIndex = 0): Buffer[] {
  const frames: Buffer[] = [];
  const muxMac = formatMac(derivedMac(cfg.muxes[muxIndex]!.address.words[0]!));
  const routerMac = formatMac(REPLAY_ROUTER_MAC);
  for (const v of cfg.vips) {
    for (const r of v.rules) {
      for (const proto of r.protocols) {
        for (let f = 0; f < flows; f++) {
          const src = client(f % clients, v.address.family);
          const sport = 40000 + f;
          const b = pkt().eth({ src: routerMac, dst: muxMac });
          const ip =
            v.address.family === 4 ? b.ipv4({ src, dst: v.address.text, ttl: 63 }) : b.ipv6({ src, dst: v.address.text, hopLimit: 63 });
          frames.push(
            proto === 6
              ? ip.tcp({ sport, dport: r.frontendPort, flags: TCP_SYN, seq: 1000 + f }).build()
              : ip.udp({ sport, dport: r.frontendPort }).payload(`hello ${r.name} ${f}`).build(),
          );
        }
      }
    }
  }
  return frames;
}

/** Replies of every backend of `host` for the rules that reach it, as frames on its ports. */
export function replyFrames(cfg: SlbxConfig, host: string, flows: number, clients: number): Buffer[] {
  const frames: Buffer[] = [];
  for (const v of cfg.vips) {
    for (const r of v.rules) {
      const pool = cfg.pools.find((p) => p.name === r.pool)!;
      for (const b of pool.backends) {
        const nic = cfg.nics.find((n) => n.name === b.nic)!;
        if (nic.host !== host) continue;
        const dip = v.address.family === 4 ? nic.address4 : nic.address6;
        if (dip === null) continue;
        const gwMac = Uint8Array.from(nic.mac);
        gwMac[0] = gwMac[0]! ^ 0x04;
        for (const proto of r.protocols) {
          for (let f = 0; f < flows; f++) {
            const dst = client(f % clients, v.address.family);
            const e = pkt().eth({ src: formatMac(nic.mac), dst: formatMac(gwMac) });
            const ip = v.address.family === 4 ? e.ipv4({ src: dip.text, dst }) : e.ipv6({ src: dip.text, dst });
            frames.push(
              proto === 6
                ? ip.tcp({ sport: r.backendPort, dport: 40000 + f, flags: TCP_SYN | TCP_ACK, seq: 9000, ack: 1001 + f }).build()
                : ip
                    .udp({ sport: r.backendPort, dport: 40000 + f })
                    .payload(`${nic.name} ${f}`)
                    .build(),
            );
          }
        }
      }
    }
  }
  return frames;
}

const OPTIONS: OptionSpec[] = [
  { name: 'config', value: 'FILE', help: 'slbx config (YAML or JSON)' },
  { name: 'out', value: 'OUT.pcap', help: 'where to write the frames' },
  { name: 'kind', value: 'KIND', help: "client (frames to the VIPs) or replies (backend replies on one host's ports)", default: 'client' },
  { name: 'host', value: 'NAME', help: 'the host whose backends reply (kind replies)' },
  { name: 'flows', value: 'N', help: 'flows per rule and protocol', default: '20' },
  { name: 'clients', value: 'N', help: 'distinct clients (198.51.100.10.., 2001:db8:c::10..)', default: '4' },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'slbx-gen-traffic',
  usage: 'slbx-gen-traffic --config FILE --out OUT.pcap [--kind client|replies] [options]',
  options: OPTIONS,
  about:
    "Writes test traffic for slbx-replay: client TCP SYNs and UDP datagrams to every VIP rule, or the\nreplies of one host's backends. MACs follow slbx-replay's defaults (02:00 + IPv4 address).",
};

export const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  const cfgPath = one(args, 'config');
  const out = one(args, 'out');
  if (!cfgPath || !out) {
    process.stderr.write('slbx-gen-traffic: --config and --out are required (see --help)\n');
    return 2;
  }
  const flows = Number(one(args, 'flows'));
  const clients = Number(one(args, 'clients'));
  if (!Number.isInteger(flows) || flows < 1 || flows > 100000) {
    process.stderr.write('slbx-gen-traffic: --flows must be an integer 1..100000\n');
    return 2;
  }
  if (!Number.isInteger(clients) || clients < 1 || clients > 200) {
    process.stderr.write('slbx-gen-traffic: --clients must be an integer 1..200\n');
    return 2;
  }
  const parsed = parseConfig(readFileSync(cfgPath, 'utf8'), cfgPath);
  if (!parsed.ok) {
    process.stderr.write(`${formatConfigErrors(parsed.errors, cfgPath)}\n`);
    return 1;
  }
  const kind = one(args, 'kind');
  let frames: Buffer[];
  if (kind === 'client') frames = clientFrames(parsed.config, flows, clients);
  else if (kind === 'replies') {
    const host = one(args, 'host');
    if (!host || !parsed.config.hosts.some((h) => h.name === host)) {
      process.stderr.write(`slbx-gen-traffic: --kind replies needs --host, one of: ${parsed.config.hosts.map((h) => h.name).join(', ')}\n`);
      return 2;
    }
    frames = replyFrames(parsed.config, host, flows, clients);
  } else {
    process.stderr.write(`slbx-gen-traffic: --kind must be client or replies\n`);
    return 2;
  }
  const t0 = 1_767_225_600_000_000; // 2026-01-01, so replays are reproducible
  const packets: PcapPacket[] = frames.map((d, i) => ({ tsUs: t0 + i * 1000, data: d, origLen: d.length }));
  writeFileSync(out, buildPcap(LINKTYPE_ETHERNET, packets));
  process.stdout.write(`wrote ${frames.length} frames to ${out}\n`);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
