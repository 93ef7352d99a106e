// Scenario 04's frames and their expected drops. `generate` writes two pcaps of bad frames (one aimed at
// a MUX, one at a host agent, with the lab's real MACs) and the counters each should move; `verify`
// compares the daemons' counters before and after.
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pkt } from '../../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../../shared/pcap-file.js';
import { TCP_SYN } from '../../../shared/tcp.js';
import { Checks, flagsOf, need, loadCapture } from './check.js';

export const COPIES = 5;

export function generateBadTraffic(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const out = need(f, 'out');
  const muxMac = need(f, 'mux-mac');
  const hostMac = need(f, 'host-mac');
  const routerMac = need(f, 'router-mac');
  const vip = need(f, 'vip');
  const muxPa = need(f, 'mux-pa');
  const hostPa = need(f, 'host-pa');
  const nicMac = need(f, 'nic-mac');
  const client = need(f, 'client');
  const toMux = () => pkt().eth({ src: routerMac, dst: muxMac });
  const mux: [string | null, () => Buffer][] = [
    ['drop_ipv4_bad_total_length', () => toMux().ipv4({ src: client, dst: vip, totalLength: 400 }).tcp({ sport: 1111, dport: 80 }).build()],
    ['drop_ipv4_bad_ihl', () => toMux().ipv4({ src: client, dst: vip, ihl: 3 }).tcp({ sport: 1112, dport: 80 }).build()],
    ['drop_ipv4_bad_checksum', () => toMux().ipv4({ src: client, dst: vip, checksum: 0xbad }).tcp({ sport: 1113, dport: 80 }).build()],
    ['drop_tcp_truncated', () => toMux().ipv4({ src: client, dst: vip, protocol: 6 }).payload(10).build()],
    ['drop_tcp_bad_data_offset', () => toMux().ipv4({ src: client, dst: vip }).tcp({ sport: 1114, dport: 80, dataOffset: 2 }).build()],
    [
      'drop_udp_bad_udp_length',
      () => toMux().ipv4({ src: client, dst: vip }).udp({ sport: 1115, dport: 7, length: 300 }).payload(4).build(),
    ],
    ['drop_no_rule', () => toMux().ipv4({ src: client, dst: vip }).tcp({ sport: 1116, dport: 443, flags: TCP_SYN }).build()],
    ['drop_no_rule', () => toMux().ipv4({ src: client, dst: vip }).icmp({ type: 8, rest: 0x00010001 }).payload(16).build()],
    // no VIP, but inside vipRanges: the MUX's capture filter takes the ranges (a VIP change never reopens
    // the capture), so the process sees it and counts it
    ['drop_not_vip', () => toMux().ipv4({ src: client, dst: '203.0.113.99' }).tcp({ sport: 1117, dport: 80, flags: TCP_SYN }).build()],
    // outside vipRanges: the capture filter keeps it out of the process; the kernel drops it silently
    [null, () => toMux().ipv4({ src: client, dst: '198.51.100.99' }).tcp({ sport: 1118, dport: 80, flags: TCP_SYN }).build()],
  ];
  const vx = (o: { src?: string; vni?: number; flags?: number; innerMac?: string; innerDst?: string; innerChecksum?: number }) =>
    // as mux1 would send it: the host agent takes a MUX's VXLAN only from that MUX's MAC (docs/security.md)
    pkt()
      .eth({ src: muxMac, dst: hostMac })
      .ipv4({ src: o.src ?? muxPa, dst: hostPa })
      .udp({ sport: 50001, dport: 4789, checksum: 'zero' })
      .vxlan({ vni: o.vni ?? 5001, ...(o.flags !== undefined ? { flags: o.flags } : {}) })
      .eth({ src: muxMac, dst: o.innerMac ?? nicMac })
      .ipv4({ src: client, dst: o.innerDst ?? vip, ...(o.innerChecksum !== undefined ? { checksum: o.innerChecksum } : {}) })
      .tcp({ sport: 1200, dport: 80, flags: TCP_SYN })
      .build();
  const host: [string, () => Buffer][] = [
    ['drop_in_unknown_source', () => vx({ src: '198.18.0.1' })],
    ['drop_in_vxlan_bad_vxlan_flags', () => vx({ flags: 0 })],
    ['drop_in_unknown_vni', () => vx({ vni: 5999 })],
    ['drop_in_unknown_mac', () => vx({ innerMac: '02:00:00:00:99:99' })],
    // another non-VIP than the MUX's (.99): these leave mux1's own port, whose capture must show no .99 in VXLAN
    ['drop_in_not_vip_of_vni', () => vx({ innerDst: '203.0.113.98' })],
    ['drop_in_inner_ipv4_bad_checksum', () => vx({ innerChecksum: 0x1 })],
    [
      'drop_in_vxlan_truncated',
      () =>
        pkt().eth({ src: muxMac, dst: hostMac }).ipv4({ src: muxPa, dst: hostPa }).udp({ sport: 50002, dport: 4789 }).payload(4).build(),
    ],
  ];
  const write = (name: string, list: [string | null, () => Buffer][]) => {
    const frames: Buffer[] = [];
    const expected: Record<string, number> = {};
    let ignored = 0;
    for (const [counter, build] of list) {
      for (let i = 0; i < COPIES; i++) frames.push(build());
      if (counter === null) ignored += COPIES;
      else expected[counter] = (expected[counter] ?? 0) + COPIES;
    }
    writeFileSync(
      join(out, `${name}.pcap`),
      buildPcap(
        LINKTYPE_ETHERNET,
        frames.map((d, i) => ({ tsUs: 1e15 + i, data: d, origLen: d.length })),
      ),
    );
    return { frames: frames.length, expected, filteredByKernel: ignored };
  };
  const summary = { mux: write('bad-to-mux', mux), host: write('bad-to-host', host) };
  writeFileSync(join(out, 'bad-expected.json'), `${JSON.stringify(summary, null, 2)}\n`);
}

/**
 * --expected bad-expected.json --mux-before F --mux-after F --host-before F --host-after F (each a
 * /counters JSON) --mux-capture PCAP (the MUX's fabric capture)
 */
export function verifyBadTraffic(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const c = new Checks();
  const exp = JSON.parse(readFileSync(need(f, 'expected'), 'utf8'));
  const read = (k: string) => JSON.parse(readFileSync(need(f, k), 'utf8')) as Record<string, number>;
  const delta = (before: Record<string, number>, after: Record<string, number>, k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  for (const [who, before, after] of [
    ['mux', read('mux-before'), read('mux-after')],
    ['host', read('host-before'), read('host-after')],
  ] as const) {
    const e = exp[who].expected as Record<string, number>;
    for (const [k, n] of Object.entries(e)) {
      c.check(
        delta(before, after, k) === n,
        `${who}: ${k} counted every injected frame`,
        `expected +${n}, got +${delta(before, after, k)}`,
      );
    }
    c.check(delta(before, after, 'drop_internal_error') === 0, `${who}: no internal error`);
    const otherDrops = Object.keys(after).filter((k) => k.startsWith('drop_') && !(k in e) && delta(before, after, k) !== 0);
    c.note(
      `${who}: other drop counters that moved during the run: ${otherDrops.map((k) => `${k} +${delta(before, after, k)}`).join(', ') || 'none'}`,
    );
  }
  // the non-VIP frames reached the MUX's interface (the capture shows them) and produced nothing
  const cap = loadCapture(need(f, 'mux-capture'));
  const nonVip = cap.filter((p) => p.d.first('ipv4')?.dst === '198.51.100.99' && p.d.first('vxlan') === undefined);
  const forwarded = cap.filter(
    (p) => p.d.first('vxlan') !== undefined && ['198.51.100.99', '203.0.113.99'].includes(p.d.all('ipv4')[1]?.dst ?? ''),
  );
  c.check(
    nonVip.length === exp.mux.filteredByKernel && forwarded.length === 0,
    "non-VIP frames reached the MUX's interface and went no further (its capture filter takes vipRanges only)",
    `${nonVip.length} arrived, ${forwarded.length} forwarded`,
  );
  return c;
}
