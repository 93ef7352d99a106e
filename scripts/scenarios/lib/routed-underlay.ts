#!/usr/bin/env node
// Scenario 36 (routed-underlay, issue 18): VXLAN crosses routers, BGP and BFD are multihop.
//
//   node dist/scripts/scenarios/lib/routed-underlay.js verify --run DIR --host host1 --leaf leaf1
//        --router-mac M --leaf-mac M --requests N
//     DIR/pcaps/vxlan-MUX.pcap   each MUX's fab0, VXLAN toward the host's PA (udp dst port 4789)
//     DIR/pcaps/rack-HOST.pcap   the leaf's port toward the host, VXLAN (udp dst port 4789)
//     DIR/client-http.json       the lab client's N requests to the VIP
//     DIR/bird-route.txt, DIR/bird-protocols.txt, DIR/bird-bfd.txt: birdc show route all / protocols all / bfd sessions
//
// Expected values come from the topology, not from the code under test: the MUX writes TTL 64 and two
// routers (the lab router, the leaf) decrement it, so the host receives 62; the outer destination MAC at
// the MUX is the lab router's (the plan's), the source MAC at the host is its leaf's (the rack gateway's).
// Each is read twice: with slbx's codecs and with tshark.
import { join } from 'node:path';
import { readFileSync, existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Checks, type CapturedPacket, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields } from './check.js';
import { readClientRecords } from './north-south.js';

/** The MUX's outer TTL (mux/data-plane.ts writes 64; RFC 1700's default) and the routers between MUX and host. */
export const MUX_OUTER_TTL = 64;
export const ROUTERS_ON_PATH = 2;

export function verifyRoutedUnderlay(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const host = need(f, 'host');
  const routerMac = need(f, 'router-mac').toLowerCase();
  const leafMac = need(f, 'leaf-mac').toLowerCase();
  const requests = Number(need(f, 'requests'));
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const hostPa = config.hosts.find((h) => h.name === host)!.address.text;
  const muxPas = new Map(config.muxes.map((m) => [m.address.text, m.name]));

  // 1. at each MUX: VXLAN to the host leaves with TTL 64 toward the lab router's MAC
  let atMux = 0;
  const innerAtMux = new Set<string>();
  for (const m of config.muxes) {
    const file = join(run, 'pcaps', `vxlan-${m.name}.pcap`);
    const pkts = loadCapture(file).filter((p) => p.d.first('vxlan') !== undefined && p.d.first('ipv4')?.dst === hostPa);
    const bad = pkts.filter((p) => p.d.first('ipv4')!.ttl !== MUX_OUTER_TTL || p.d.first('eth')!.dst.toLowerCase() !== routerMac);
    atMux += pkts.length;
    for (const p of pkts) innerAtMux.add(innerKey(p));
    c.check(
      pkts.length > 0 && bad.length === 0,
      `${m.name} sent VXLAN to ${host} (${hostPa}, another subnet) with outer TTL ${MUX_OUTER_TTL} to the router's MAC ${routerMac}`,
      `${pkts.length} frames; ${bad.length} otherwise (${fmtCounts(countBy(bad, (p) => `ttl ${p.d.first('ipv4')!.ttl} to ${p.d.first('eth')!.dst}`))})`,
    );
    const ts = tsharkFields(file, ['eth.dst', 'ip.ttl'], `vxlan && ip.dst == ${hostPa}`);
    if (ts !== null) {
      const tbad = ts.filter((r) => r[0]!.split(',')[0]!.toLowerCase() !== routerMac || Number(r[1]!.split(',')[0]) !== MUX_OUTER_TTL);
      c.check(
        ts.length === pkts.length && tbad.length === 0,
        `tshark agrees on ${m.name}'s capture`,
        `${ts.length} frames, ${tbad.length} otherwise`,
      );
    }
  }

  // 2. at the host's rack port: the same VXLAN, TTL decremented by each router, from the leaf's MAC
  const rack = join(run, 'pcaps', `rack-${host}.pcap`);
  const want = MUX_OUTER_TTL - ROUTERS_ON_PATH;
  const inRack = loadCapture(rack).filter((p) => p.d.first('vxlan') !== undefined && muxPas.has(p.d.first('ipv4')?.src ?? ''));
  const rbad = inRack.filter((p) => p.d.first('ipv4')!.ttl !== want || p.d.first('eth')!.src.toLowerCase() !== leafMac);
  c.check(
    inRack.length > 0 && rbad.length === 0,
    `${host} received the MUXes' VXLAN with outer TTL ${want} (${ROUTERS_ON_PATH} routers) from its leaf's MAC ${leafMac}`,
    `${inRack.length} frames (${fmtCounts(countBy(inRack, (p) => muxPas.get(p.d.first('ipv4')!.src)!))}); ${rbad.length} otherwise (${fmtCounts(countBy(rbad, (p) => `ttl ${p.d.first('ipv4')!.ttl} from ${p.d.first('eth')!.src}`))})`,
  );
  const matched = inRack.filter((p) => innerAtMux.has(innerKey(p))).length;
  c.check(
    matched > 0 && atMux > 0,
    "the frames at the rack are the MUXes' (same inner packets)",
    `${matched} of ${inRack.length} at the rack matched one of ${atMux} at the MUXes (captures under load may miss a few)`,
  );
  const rts = tsharkFields(rack, ['eth.src', 'ip.ttl'], 'vxlan');
  if (rts !== null) {
    const tbad = rts.filter((r) => r[0]!.split(',')[0]!.toLowerCase() !== leafMac || Number(r[1]!.split(',')[0]) !== want);
    c.check(
      rts.length === inRack.length && tbad.length === 0,
      `tshark agrees on the rack capture`,
      `${rts.length} frames, ${tbad.length} otherwise`,
    );
  }

  // 3. the requests
  const recs = readClientRecords(join(run, 'client-http.json'));
  const ok = recs.filter((r) => r.ok);
  c.check(
    recs.length === requests && ok.length === requests,
    `all ${requests} requests answered`,
    `${ok.length} of ${recs.length} ok (${fmtCounts(countBy(ok, (r) => r.backend ?? '?'))})`,
  );
  const backendsOnHost = config.nics.filter((n) => n.host === host).map((n) => n.name);
  c.check(
    ok.some((r) => backendsOnHost.includes(r.backend ?? '')),
    `some were answered by ${host}'s backends (${backendsOnHost.join(', ')}), across the routers`,
  );

  // 4. BIRD: the VIP over every MUX, each session multihop to the loopback, BFD multihop Up
  const route = readText(join(run, 'bird-route.txt'));
  for (const [pa, name] of muxPas) {
    c.check(
      new RegExp(`\\[${name} [^\\]]*\\][^\\n]*\\n\\s*via ${pa.replace(/\./g, '\\.')} on fab0`).test(route),
      `BIRD has ${name}'s path to the VIP via ${pa}`,
    );
  }
  const protocols = readText(join(run, 'bird-protocols.txt'));
  for (const name of muxPas.values()) {
    const block = protocols.split(/\n(?=\S)/).find((b) => b.startsWith(`${name} `)) ?? '';
    c.check(
      /Established/.test(block) && /Neighbor address:\s+\S+/.test(block) && /Source address:\s+198\.18\.255\.1/.test(block),
      `BIRD's session ${name} is Established with the router's loopback (198.18.255.1) as its address: not on a shared subnet`,
      (block.match(/(BGP state|Neighbor address|Source address):.*$/gm) ?? []).join('; '),
    );
  }
  const bfd = readText(join(run, 'bird-bfd.txt'));
  for (const pa of muxPas.keys()) {
    const line = bfd.split('\n').find((l) => l.startsWith(pa)) ?? '';
    c.check(/^\S+\s+---\s+Up\b/.test(line), `BFD to ${pa} is Up and multihop (no interface: RFC 5883)`, line.trim() || 'no session');
  }
  return c;
}

function innerKey(p: CapturedPacket): string {
  const ips = p.d.all('ipv4');
  const inner = ips[ips.length - 1]!;
  const t = p.d.all('tcp')[0];
  return `${inner.src}>${inner.dst} ${inner.id} ${t?.srcPort ?? '-'} ${t?.seq ?? '-'}`;
}

function readText(path: string): string {
  if (!existsSync(path)) throw new Error(`${path} is missing`);
  return readFileSync(path, 'utf8');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [cmd, ...rest] = process.argv.slice(2);
  if (cmd === '--help' || cmd === undefined) {
    process.stdout.write(
      'usage: node dist/scripts/scenarios/lib/routed-underlay.js verify --run DIR --host H --leaf L --router-mac M --leaf-mac M --requests N\n',
    );
    process.exit(cmd === undefined ? 2 : 0);
  }
  if (cmd !== 'verify') {
    process.stderr.write(`routed-underlay: unknown command ${cmd}\n`);
    process.exit(2);
  }
  try {
    verifyRoutedUnderlay(rest).exit();
  } catch (e) {
    process.stderr.write(`FAIL routed-underlay: ${(e as Error).message}\n`);
    process.exit(1);
  }
}
