import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ip, mac, formatIpv4, formatIpv6, inPrefix, parseIpAddr, formatMac } from '../shared/addr.js';
import { BlockList } from 'node:net';
import * as E from '../shared/codec-error.js';
import {
  sumBytes,
  finishChecksum,
  ipv4HeaderChecksum,
  verifyIpv4HeaderChecksum,
  l4Checksum,
  verifyL4Checksum,
  updateChecksum16,
  updateChecksum32,
  updateChecksumBytes,
  pseudoSumV4,
  pseudoSumV6Bytes,
} from '../shared/checksum.js';
import {
  parseEthernet,
  writeEthernet,
  newEthernetHeader,
  ETHERTYPE_IPV4,
  ETHERTYPE_VLAN,
  VLAN_NONE,
  ETH_HEADER_LEN,
} from '../shared/ethernet.js';
import { parseArp, writeArp, newArpPacket, ARP_OP_REPLY, ARP_LEN } from '../shared/arp.js';
import {
  parseIpv4,
  writeIpv4,
  newIpv4Header,
  IPV4_FLAG_DF,
  IPV4_FLAG_MF,
  isIpv4Fragment,
  IPPROTO_UDP,
  IPPROTO_TCP,
} from '../shared/ipv4.js';
import { parseIpv6, writeIpv6, newIpv6Header, IPV6_MAX_EXT_HEADERS, isIpv6Fragment } from '../shared/ipv6.js';
import { parseTcp, writeTcp, newTcpHeader, TCP_SYN, TCP_ACK } from '../shared/tcp.js';
import { parseUdp, writeUdp, newUdpHeader } from '../shared/udp.js';
import { parseIcmp, writeIcmp, newIcmpHeader, ICMP_DEST_UNREACH } from '../shared/icmp.js';
import { parseNd, newNdMessage, writeNdBody, ND_OPT_TARGET_LL, ICMPV6_NEIGHBOR_ADVERT } from '../shared/icmpv6.js';
import { parseVxlan, writeVxlan, newVxlanHeader, VXLAN_HEADER_LEN } from '../shared/vxlan.js';
import { readPcap, buildPcap, LINKTYPE_ETHERNET, parsePcapHeader, newPcapHeader } from '../shared/pcap-file.js';
import { dissect } from '../shared/dissect.js';
import { pkt } from '../shared/packet-builder.js';
import { Rng } from './helpers/random.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const hex = (s: string) =>
  Uint8Array.from(
    s
      .replace(/\s+/g, '')
      .match(/../g)!
      .map((h) => parseInt(h, 16)),
  );

describe('golden capture written by the Linux kernel, decoded like tshark does', () => {
  const file = readPcap(readFileSync(fixture('golden.pcap')));
  if (typeof file === 'number') throw new Error(E.codecErrorName(file));
  const lines = readFileSync(fixture('golden.tsv'), 'utf8').trim().split('\n');
  const cols = lines[0]!.split('\t');
  const rows = lines.slice(1).map((l) => l.split('\t'));

  it('holds every kind of packet we decode', () => {
    expect(file.linkType).toBe(LINKTYPE_ETHERNET);
    expect(file.packets.length).toBe(rows.length);
    const kinds = new Set(file.packets.flatMap((p) => dissect(p.data).layers.map((l) => l.layer)));
    for (const k of ['eth', 'arp', 'ipv4', 'ipv6', 'tcp', 'udp', 'icmp', 'icmpv6', 'vxlan']) expect(kinds).toContain(k);
  });

  it.each(rows.map((r, i) => [i + 1, r] as const))('frame %i matches tshark field by field', (n, row) => {
    const d = dissect(file.packets[n - 1]!.data);
    expect(d.error).toBeUndefined();
    const join = (xs: (string | number)[]) => xs.join(',');
    const h4 = (v: number) => `0x${v.toString(16).padStart(4, '0')}`;
    const ours: Record<string, string> = {
      'frame.number': String(n),
      'eth.type': join(d.all('eth').map((l) => h4(l.type))),
      'arp.opcode': join(d.all('arp').map((l) => l.op)),
      'arp.src.proto_ipv4': join(d.all('arp').map((l) => l.senderIp)),
      'arp.dst.proto_ipv4': join(d.all('arp').map((l) => l.targetIp)),
      'ip.src': join(d.all('ipv4').map((l) => l.src)),
      'ip.dst': join(d.all('ipv4').map((l) => l.dst)),
      'ip.proto': join(d.all('ipv4').map((l) => l.protocol)),
      'ip.hdr_len': join(d.all('ipv4').map((l) => l.headerLen)),
      'ip.len': join(d.all('ipv4').map((l) => l.totalLength)),
      'ip.ttl': join(d.all('ipv4').map((l) => l.ttl)),
      'ipv6.src': join(d.all('ipv6').map((l) => l.src)),
      'ipv6.dst': join(d.all('ipv6').map((l) => l.dst)),
      'ipv6.nxt': join(d.all('ipv6').map((l) => l.nextHeader)),
      'ipv6.plen': join(d.all('ipv6').map((l) => l.payloadLength)),
      'tcp.srcport': join(d.all('tcp').map((l) => l.srcPort)),
      'tcp.dstport': join(d.all('tcp').map((l) => l.dstPort)),
      'tcp.flags': join(d.all('tcp').map((l) => h4(l.flags))),
      'tcp.hdr_len': join(d.all('tcp').map((l) => l.headerLen)),
      'udp.srcport': join(d.all('udp').map((l) => l.srcPort)),
      'udp.dstport': join(d.all('udp').map((l) => l.dstPort)),
      'udp.length': join(d.all('udp').map((l) => l.length)),
      'icmp.type': join(d.all('icmp').map((l) => l.type)),
      'icmpv6.type': join(d.all('icmpv6').map((l) => l.type)),
      'vxlan.vni': join(d.all('vxlan').map((l) => l.vni)),
    };
    const theirs = Object.fromEntries(cols.map((c, i) => [c, row[i] ?? '']));
    expect(ours).toEqual(theirs);
  });

  it('verifies every checksum the kernel wrote (outer and encapsulated packets)', () => {
    let checked = 0;
    for (const p of file.packets) {
      for (const l of dissect(p.data).layers) {
        if ('checksumOk' in l && !('quoted' in l && l.quoted)) {
          if (l.checksumOk !== null) {
            expect(l.checksumOk).toBe(true);
            checked++;
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(40);
  });

  it("re-encodes the kernel's UDP, TCP SYN, ARP and VXLAN frames byte for byte with the builder", () => {
    const find = (pred: (d: ReturnType<typeof dissect>) => boolean) => file.packets.map((p) => p.data).find((b) => pred(dissect(b)))!;
    // UDP over IPv4 ("hello" to port 7)
    const udp = find((d) => d.all('ipv4').length === 1 && d.first('udp')?.dstPort === 7);
    const du = dissect(udp);
    const i4 = du.first('ipv4')!;
    const eth = du.first('eth')!;
    const u = du.first('udp')!;
    expect(
      pkt()
        .eth({ src: eth.src, dst: eth.dst })
        .ipv4({ src: i4.src, dst: i4.dst, id: i4.id, flags: i4.flags, ttl: i4.ttl })
        .udp({ sport: u.srcPort, dport: u.dstPort })
        .payload('hello')
        .build(),
    ).toEqual(Buffer.from(udp));
    // TCP SYN with options
    const syn = find((d) => d.first('tcp')?.flags === TCP_SYN);
    const ds = dissect(syn);
    const t = ds.first('tcp')!;
    const s4 = ds.first('ipv4')!;
    const tcpOff = t.off;
    expect(
      pkt()
        .eth({ src: ds.first('eth')!.src, dst: ds.first('eth')!.dst })
        .ipv4({ src: s4.src, dst: s4.dst, id: s4.id, flags: s4.flags, ttl: s4.ttl, tos: s4.tos })
        .tcp({
          sport: t.srcPort,
          dport: t.dstPort,
          seq: t.seq,
          ack: t.ack,
          flags: t.flags,
          window: t.window,
          options: syn.subarray(tcpOff + 20, tcpOff + t.headerLen),
        })
        .build(),
    ).toEqual(Buffer.from(syn));
    // ARP request
    const arp = find((d) => d.first('arp')?.op === 1);
    const a = dissect(arp).first('arp')!;
    expect(
      pkt()
        .eth({ src: a.senderMac, dst: 'ff:ff:ff:ff:ff:ff' })
        .arp({ op: 1, senderMac: a.senderMac, senderIp: a.senderIp, targetMac: a.targetMac, targetIp: a.targetIp })
        .build(),
    ).toEqual(Buffer.from(arp));
    // VXLAN from the kernel's vxlan device, inner UDP "vxlan-inner"
    const vx = find((d) => d.all('ipv4').length === 2 && d.first('vxlan') !== undefined && d.all('icmp').length === 0);
    const dv = dissect(vx);
    const [o4, n4] = dv.all('ipv4');
    const [ou, nu] = dv.all('udp');
    const [oe, ne] = dv.all('eth');
    const rebuilt = pkt()
      .eth({ src: oe!.src, dst: oe!.dst })
      .ipv4({ src: o4!.src, dst: o4!.dst, id: o4!.id, flags: o4!.flags, ttl: o4!.ttl, tos: o4!.tos })
      .udp({ sport: ou!.srcPort, dport: ou!.dstPort })
      .vxlan({ vni: dv.first('vxlan')!.vni })
      .eth({ src: ne!.src, dst: ne!.dst })
      .ipv4({ src: n4!.src, dst: n4!.dst, id: n4!.id, flags: n4!.flags, ttl: n4!.ttl, tos: n4!.tos })
      .udp({ sport: nu!.srcPort, dport: nu!.dstPort })
      .payload('vxlan-inner')
      .build();
    expect(rebuilt).toEqual(Buffer.from(vx));
    expect(dv.first('vxlan')!.vni).toBe(5001);
  });
});

describe('checksum', () => {
  it('computes the classic IPv4 header example (checksum 0xb861)', () => {
    const h = hex('4500 0073 0000 4000 4011 0000 c0a8 0001 c0a8 00c7');
    expect(ipv4HeaderChecksum(h, 0, 20)).toBe(0xb861);
    h[10] = 0xb8;
    h[11] = 0x61;
    expect(verifyIpv4HeaderChecksum(h, 0, 20)).toBe(true);
    h[15] = h[15]! ^ 1;
    expect(verifyIpv4HeaderChecksum(h, 0, 20)).toBe(false);
  });

  it('sums the RFC 1071 section 3 example bytes to 0xddf2', () => {
    const b = hex('0001 f203 f4f5 f6f7');
    expect(finishChecksum(sumBytes(b, 0, 8, 0))).toBe(~0xddf2 & 0xffff);
  });

  it('pads an odd final byte with zero', () => {
    expect(sumBytes(Uint8Array.of(0xab), 0, 1, 0)).toBe(0xab00);
  });

  it('RFC 1624: incremental updates equal a full recompute for random IPv4 and IPv6 rewrites', () => {
    const rng = new Rng(1624);
    for (let k = 0; k < 2000; k++) {
      const v6 = k % 2 === 1;
      const b = v6
        ? pkt()
            .ipv6({ src: formatIpv6(Uint32Array.from([rng.u32(), rng.u32(), rng.u32(), rng.u32()])), dst: '2001:db8:ff::10' })
            .tcp({ sport: rng.int(65536), dport: 80 })
            .payload(rng.int(200))
            .build()
        : pkt()
            .ipv4({ src: formatIpv4(rng.u32()), dst: '203.0.113.10' })
            .tcp({ sport: rng.int(65536), dport: 80 })
            .payload(rng.int(200))
            .build();
      const l4 = v6 ? 40 : 20;
      const csumOff = l4 + 16;
      let csum = (b[csumOff]! << 8) | b[csumOff + 1]!;
      // rewrite destination address and port, as the host agent does
      if (v6) {
        const nd = ip(formatIpv6(Uint32Array.from([0x20010db8, 0xd, 0, rng.u32()])));
        const nb = new Uint8Array(16);
        for (let w = 0; w < 4; w++) for (let j = 0; j < 4; j++) nb[w * 4 + j] = (nd.words[w]! >>> (24 - 8 * j)) & 0xff;
        csum = updateChecksumBytes(csum, b, 24, nb, 0, 16);
        b.set(nb, 24);
      } else {
        const old = ((b[16]! << 24) | (b[17]! << 16) | (b[18]! << 8) | b[19]!) >>> 0;
        const nw = rng.u32();
        csum = updateChecksum32(csum, old, nw);
        b[16] = nw >>> 24;
        b[17] = (nw >>> 16) & 0xff;
        b[18] = (nw >>> 8) & 0xff;
        b[19] = nw & 0xff;
        let ic = (b[10]! << 8) | b[11]!;
        ic = updateChecksum32(ic, old, nw);
        b[10] = ic >>> 8;
        b[11] = ic & 0xff;
        expect(verifyIpv4HeaderChecksum(b, 0, 20)).toBe(true);
      }
      const oldPort = (b[l4 + 2]! << 8) | b[l4 + 3]!;
      const np = rng.int(65536);
      csum = updateChecksum16(csum, oldPort, np);
      b[l4 + 2] = np >>> 8;
      b[l4 + 3] = np & 0xff;
      b[csumOff] = csum >>> 8;
      b[csumOff + 1] = csum & 0xff;
      const len = b.length - l4;
      const pseudo = v6 ? pseudoSumV6Bytes(b, 8, 24, IPPROTO_TCP, len) : pseudoSumV4Bytes4(b, len);
      expect(verifyL4Checksum(b, l4, len, pseudo)).toBe(true);
      expect(csum).toBe(l4Checksum(b, l4, len, 16, pseudo));
    }
  });
});

function pseudoSumV4Bytes4(b: Uint8Array, len: number): number {
  const src = ((b[12]! << 24) | (b[13]! << 16) | (b[14]! << 8) | b[15]!) >>> 0;
  const dst = ((b[16]! << 24) | (b[17]! << 16) | (b[18]! << 8) | b[19]!) >>> 0;
  return pseudoSumV4(src, dst, IPPROTO_TCP, len);
}

describe('ethernet', () => {
  it('round-trips untagged and 802.1Q-tagged headers at a non-zero offset', () => {
    for (const vlan of [VLAN_NONE, 0, 100, 4095]) {
      const h = newEthernetHeader();
      h.dst.set(mac('02:00:00:00:00:02'));
      h.src.set(mac('02:00:00:00:00:01'));
      h.etherType = ETHERTYPE_IPV4;
      h.vlanId = vlan;
      h.vlanPcp = vlan === VLAN_NONE ? 0 : 5;
      const buf = new Uint8Array(40);
      const w = writeEthernet(h, buf, 7);
      const out = newEthernetHeader();
      expect(parseEthernet(buf, 7, out)).toBe(w);
      expect(out).toEqual(h);
      expect(w).toBe(vlan === VLAN_NONE ? 14 : 18);
    }
  });
  it('golden: tagged frame bytes', () => {
    const b = pkt()
      .eth({ src: '02:00:00:00:00:01', dst: 'ff:ff:ff:ff:ff:ff', vlan: 10, pcp: 3 })
      .ipv4({ src: '192.0.2.1', dst: '192.0.2.2' })
      .build();
    expect([...b.subarray(12, 18)]).toEqual([0x81, 0x00, 0x60, 0x0a, 0x08, 0x00]);
  });
  it('refuses short frames and double tags', () => {
    const out = newEthernetHeader();
    expect(parseEthernet(new Uint8Array(13), 0, out)).toBe(E.ERR_TRUNCATED);
    const qinq = hex('ffffffffffff 020000000001 8100 000a 8100 0014 0800');
    expect(parseEthernet(qinq, 0, out)).toBe(E.ERR_BAD_VLAN);
    expect(parseEthernet(hex('ffffffffffff 020000000001 8100 000a'), 0, out)).toBe(E.ERR_TRUNCATED);
  });
});

describe('arp', () => {
  it('round-trips at an offset and refuses non-Ethernet/IPv4 ARP', () => {
    const p = newArpPacket();
    p.op = ARP_OP_REPLY;
    p.senderMac.set(mac('02:00:00:00:00:0b'));
    p.senderIp = ip('198.18.0.2').words[0]!;
    p.targetMac.set(mac('02:00:00:00:00:0a'));
    p.targetIp = ip('198.18.0.1').words[0]!;
    const buf = new Uint8Array(ARP_LEN + 3);
    expect(writeArp(p, buf, 3)).toBe(ARP_LEN);
    const out = newArpPacket();
    expect(parseArp(buf, 3, out)).toBe(ARP_LEN);
    expect(out).toEqual(p);
    const bad = Uint8Array.from(buf.subarray(3));
    bad[1] = 6; // hardware type 6
    expect(parseArp(bad, 0, out)).toBe(E.ERR_BAD_ARP);
    expect(parseArp(buf, 4, out)).toBe(E.ERR_TRUNCATED);
  });
});

describe('ipv4', () => {
  it('round-trips a header at an offset and reads the fragment fields', () => {
    const h = newIpv4Header();
    Object.assign(h, {
      tos: 0xb8,
      totalLength: 60,
      id: 0xbeef,
      flags: IPV4_FLAG_MF,
      fragOffset: 185,
      ttl: 7,
      protocol: IPPROTO_UDP,
      src: ip('198.51.100.10').words[0]!,
      dst: ip('203.0.113.10').words[0]!,
    });
    const buf = new Uint8Array(80);
    expect(writeIpv4(h, buf, 5)).toBe(20);
    const out = newIpv4Header();
    expect(parseIpv4(buf, 5, out)).toBe(20);
    expect(out).toEqual(h);
    expect(verifyIpv4HeaderChecksum(buf, 5, 20)).toBe(true);
    expect(isIpv4Fragment(out)).toBe(true);
  });
  it('skips options by IHL', () => {
    const b = pkt()
      .ipv4({ src: '192.0.2.1', dst: '192.0.2.2', options: Uint8Array.of(0x94, 4, 0, 0, 1, 1, 1, 0) })
      .udp({ sport: 1, dport: 2 })
      .build();
    const out = newIpv4Header();
    expect(parseIpv4(b, 0, out)).toBe(28);
    const u = newUdpHeader();
    expect(parseUdp(b, 28, u)).toBe(8);
    expect(u.dstPort).toBe(2);
    expect(dissect(b, 101).first('udp')!.checksumOk).toBe(true);
  });
  it.each([
    ['truncated', new Uint8Array(19), E.ERR_TRUNCATED],
    ['version 6 in an IPv4 parser', pkt().ipv4({ src: '192.0.2.1', dst: '192.0.2.2', version: 6 }).build(), E.ERR_BAD_VERSION],
    ['IHL 4', pkt().ipv4({ src: '192.0.2.1', dst: '192.0.2.2', ihl: 4 }).payload(8).build(), E.ERR_BAD_IHL],
    ['IHL 15 beyond the buffer', pkt().ipv4({ src: '192.0.2.1', dst: '192.0.2.2', ihl: 15 }).payload(8).build(), E.ERR_BAD_IHL],
    [
      'total length beyond the buffer',
      pkt().ipv4({ src: '192.0.2.1', dst: '192.0.2.2', totalLength: 100 }).payload(8).build(),
      E.ERR_BAD_TOTAL_LENGTH,
    ],
    [
      'total length below IHL',
      pkt().ipv4({ src: '192.0.2.1', dst: '192.0.2.2', totalLength: 19 }).payload(8).build(),
      E.ERR_BAD_TOTAL_LENGTH,
    ],
  ])('refuses %s', (_n, b, code) => {
    expect(parseIpv4(b, 0, newIpv4Header())).toBe(code);
  });
  it('accepts Ethernet padding after the packet', () => {
    const b = pkt().ipv4({ src: '192.0.2.1', dst: '192.0.2.2' }).udp({ sport: 1, dport: 2 }).build();
    const padded = new Uint8Array(b.length + 18);
    padded.set(b);
    const out = newIpv4Header();
    expect(parseIpv4(padded, 0, out)).toBe(20);
    expect(out.totalLength).toBe(28);
  });
});

describe('ipv6', () => {
  it('round-trips the fixed header at an offset', () => {
    const h = newIpv6Header();
    h.trafficClass = 0x2e;
    h.flowLabel = 0xabcde;
    h.payloadLength = 0;
    h.nextHeader = 59;
    h.hopLimit = 3;
    h.src.set(ip('2001:db8:c::10').words);
    h.dst.set(ip('2001:db8:ff::10').words);
    const buf = new Uint8Array(50);
    expect(writeIpv6(h, buf, 9)).toBe(40);
    const out = newIpv6Header();
    expect(parseIpv6(buf, 9, out)).toBe(40);
    expect(out).toEqual({ ...h, protocol: 59, headerLen: 40, extCount: 0 });
  });
  it('walks hop-by-hop, routing, destination options and fragment headers to the upper layer', () => {
    const b = pkt()
      .ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' })
      .ext6({ type: 'hop' })
      .ext6({ type: 'routing', len8: 1 })
      .ext6({ type: 'fragment', offset8: 0, more: true, id: 77 })
      .ext6({ type: 'dest', len8: 2 })
      .tcp({ sport: 40000, dport: 80 })
      .payload(10)
      .build();
    const out = newIpv6Header();
    const n = parseIpv6(b, 0, out);
    expect(n).toBe(40 + 8 + 16 + 8 + 24);
    expect(out.protocol).toBe(IPPROTO_TCP);
    expect(out.extCount).toBe(4);
    expect(out.hasFragment && out.moreFragments && out.fragOffset === 0 && out.fragId === 77).toBe(true);
    expect(isIpv6Fragment(out)).toBe(true);
    const t = newTcpHeader();
    expect(parseTcp(b, n, t)).toBe(20);
    expect(t.dstPort).toBe(80);
    // the pseudo-header uses the upper-layer length, not the extension headers
    expect(dissect(b, 101).first('tcp')!.checksumOk).toBe(null); // a fragment: not checkable alone
  });
  it('stops at the fragment header of a later fragment', () => {
    const b = pkt()
      .ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' })
      .ext6({ type: 'fragment', offset8: 100 })
      .udp({ sport: 1, dport: 2 })
      .build();
    const out = newIpv6Header();
    expect(parseIpv6(b, 0, out)).toBe(48);
    expect(out.protocol).toBe(IPPROTO_UDP);
    expect(out.fragOffset).toBe(100);
  });
  it.each([
    ['truncated', new Uint8Array(39), E.ERR_TRUNCATED],
    ['version 4', pkt().ipv6({ src: '::1', dst: '::2', version: 4 }).build(), E.ERR_BAD_VERSION],
    [
      'payload length beyond the buffer',
      pkt().ipv6({ src: '::1', dst: '::2', payloadLength: 9 }).payload(8).build(),
      E.ERR_BAD_PAYLOAD_LENGTH,
    ],
    [
      'hop-by-hop not first',
      pkt().ipv6({ src: '::1', dst: '::2' }).ext6({ type: 'dest' }).ext6({ type: 'hop' }).udp({ sport: 1, dport: 2 }).build(),
      E.ERR_BAD_EXT_HEADER,
    ],
    [
      'two fragment headers',
      pkt()
        .ipv6({ src: '::1', dst: '::2' })
        .ext6({ type: 'fragment', more: true })
        .ext6({ type: 'fragment', more: true })
        .udp({ sport: 1, dport: 2 })
        .build(),
      E.ERR_BAD_EXT_HEADER,
    ],
    [
      'an extension header cut short',
      pkt().ipv6({ src: '::1', dst: '::2', payloadLength: 8 }).ext6({ type: 'dest', len8: 3 }).build().subarray(0, 48),
      E.ERR_TRUNCATED,
    ],
  ])('refuses %s', (_n, b, code) => {
    expect(parseIpv6(b, 0, newIpv6Header())).toBe(code);
  });
  it(`refuses more than ${IPV6_MAX_EXT_HEADERS} extension headers`, () => {
    let p = pkt().ipv6({ src: '::1', dst: '::2' });
    for (let i = 0; i <= IPV6_MAX_EXT_HEADERS; i++) p = p.ext6({ type: 'dest' });
    expect(parseIpv6(p.udp({ sport: 1, dport: 2 }).build(), 0, newIpv6Header())).toBe(E.ERR_TOO_MANY_EXT_HEADERS);
  });
});

describe('tcp, udp, icmp, vxlan', () => {
  it('tcp round-trips at an offset; refuses bad data offsets', () => {
    const h = newTcpHeader();
    Object.assign(h, {
      srcPort: 40000,
      dstPort: 80,
      seq: 0xdeadbeef,
      ack: 0x01020304,
      flags: TCP_SYN | TCP_ACK,
      window: 1024,
      checksum: 0x1234,
      urgent: 0,
    });
    const buf = new Uint8Array(30);
    expect(writeTcp(h, buf, 4)).toBe(20);
    const out = newTcpHeader();
    expect(parseTcp(buf, 4, out)).toBe(20);
    expect(out).toEqual(h);
    buf[16] = 4 << 4;
    expect(parseTcp(buf, 4, out)).toBe(E.ERR_BAD_DATA_OFFSET);
    buf[16] = 8 << 4; // 32 bytes > 26 available
    expect(parseTcp(buf, 4, out)).toBe(E.ERR_BAD_DATA_OFFSET);
    expect(parseTcp(buf, 4, out, 20)).toBe(E.ERR_TRUNCATED);
  });
  it('udp round-trips; refuses bad lengths', () => {
    const h = newUdpHeader();
    Object.assign(h, { srcPort: 5353, dstPort: 7, length: 12, checksum: 0xabcd });
    const buf = new Uint8Array(14);
    expect(writeUdp(h, buf, 2)).toBe(8);
    const out = newUdpHeader();
    expect(parseUdp(buf, 2, out)).toBe(8);
    expect(out).toEqual(h);
    buf[6] = 0;
    buf[7] = 7;
    expect(parseUdp(buf, 2, out)).toBe(E.ERR_BAD_UDP_LENGTH);
    buf[7] = 13;
    expect(parseUdp(buf, 2, out)).toBe(E.ERR_BAD_UDP_LENGTH);
    expect(parseUdp(buf, 2, out, 9)).toBe(E.ERR_TRUNCATED);
  });
  it('icmp round-trips; the builder writes correct ICMP and ICMPv6 checksums', () => {
    const h = newIcmpHeader();
    Object.assign(h, { type: ICMP_DEST_UNREACH, code: 4, checksum: 0xffff, rest: 1450 });
    const buf = new Uint8Array(12);
    expect(writeIcmp(h, buf, 3)).toBe(8);
    const out = newIcmpHeader();
    expect(parseIcmp(buf, 3, out)).toBe(8);
    expect(out).toEqual(h);
    expect(parseIcmp(buf, 5, out)).toBe(E.ERR_TRUNCATED);
    const e = pkt().ipv4({ src: '192.0.2.1', dst: '192.0.2.2' }).icmp({ type: 8, rest: 0x00010001 }).payload(32).build();
    expect(dissect(e, 101).first('icmp')!.checksumOk).toBe(true);
    const e6 = pkt().ipv6({ src: '2001:db8::1', dst: '2001:db8::2' }).icmpv6({ type: 128, rest: 7 }).payload(32).build();
    expect(dissect(e6, 101).first('icmpv6')!.checksumOk).toBe(true);
  });
  it('neighbour discovery bodies round-trip and zero-length options are refused', () => {
    const buf = new Uint8Array(32 + 6);
    buf[3 + 0] = ICMPV6_NEIGHBOR_ADVERT;
    const tgt = ip('2001:db8:d::1').words;
    expect(writeNdBody(tgt, ND_OPT_TARGET_LL, mac('02:00:00:00:00:0b'), buf, 3)).toBe(32);
    const nd = newNdMessage();
    expect(parseNd(buf, 3, nd, 35)).toBe(32);
    expect([...nd.target]).toEqual([...tgt]);
    expect(nd.hasLinkAddr).toBe(true);
    expect(formatMac(nd.linkAddr)).toBe('02:00:00:00:00:0b');
    buf[3 + 25] = 0;
    expect(parseNd(buf, 3, nd, 35)).toBe(E.ERR_TRUNCATED);
  });
  it('vxlan round-trips (RFC 7348 layout) and requires the I flag', () => {
    const buf = new Uint8Array(VXLAN_HEADER_LEN + 2);
    expect(writeVxlan({ flags: 0x08, vni: 0xabcdef }, buf, 2)).toBe(8);
    expect([...buf.subarray(2)]).toEqual([0x08, 0, 0, 0, 0xab, 0xcd, 0xef, 0]);
    const out = newVxlanHeader();
    expect(parseVxlan(buf, 2, out)).toBe(8);
    expect(out.vni).toBe(0xabcdef);
    buf[2] = 0x00;
    expect(parseVxlan(buf, 2, out)).toBe(E.ERR_BAD_VXLAN_FLAGS);
    buf[2] = 0x0c; // a reserved bit set: ignored on receipt
    expect(parseVxlan(buf, 2, out)).toBe(8);
    expect(parseVxlan(buf, 3, out)).toBe(E.ERR_TRUNCATED);
  });
});

describe('addresses', () => {
  it("inPrefix agrees with the kernel-style prefix match of Node's net.BlockList", () => {
    const rng = new Rng(7);
    const nets: [string, number][] = [
      ['203.0.113.0', 24],
      ['198.18.0.0', 15],
      ['0.0.0.0', 0],
      ['192.0.2.10', 32],
      ['192.0.2.8', 29],
      ['2001:db8:ff::', 48],
      ['2001:db8::', 32],
      ['2001:db8:f::11', 128],
      ['2001:db8:c::', 63],
      ['::', 0],
      ['2001:db8:ff:8000::', 49],
    ];
    let inside = 0;
    for (const [n, len] of nets) {
      const family = n.includes(':') ? 'ipv6' : 'ipv4';
      const bl = new BlockList();
      bl.addSubnet(n, len, family);
      const base = ip(n);
      for (let k = 0; k < 400; k++) {
        // addresses near the network (a few low bits flipped around the prefix boundary) and random ones
        const w = Array.from(base.words, (x) => x);
        const bit = Math.max(0, Math.min(w.length * 32 - 1, len - 3 + rng.int(6)));
        if (rng.int(4) > 0) w[bit >>> 5] = (w[bit >>> 5]! ^ (0x80000000 >>> (bit & 31))) >>> 0;
        else for (let i = 0; i < w.length; i++) w[i] = rng.int(0x100000000) >>> 0;
        const text = family === 'ipv4' ? formatIpv4(w[0]!) : formatIpv6(w);
        const want = bl.check(text, family);
        if (want) inside++;
        expect(inPrefix(ip(text), base, len), `${text} in ${n}/${len}`).toBe(want);
      }
    }
    expect(inPrefix(ip('203.0.113.10'), ip('2001:db8::'), 0)).toBe(false); // never across families
    expect(inside).toBeGreaterThan(1000); // both answers well exercised
  });

  it('parse and format IPv4, IPv6 (RFC 5952) and MACs', () => {
    expect(ip('203.0.113.10').words[0]).toBe(0xcb00710a);
    expect(ip('2001:DB8:0:0:0:0:0:10').text).toBe('2001:db8::10');
    expect(formatIpv6(ip('2001:db8:0:0:1:0:0:1').words)).toBe('2001:db8::1:0:0:1');
    expect(formatIpv6(ip('::').words)).toBe('::');
    expect(formatIpv6(ip('2001:db8:1:1:1:1:0:1').words)).toBe('2001:db8:1:1:1:1:0:1');
    expect(parseIpAddr('1.2.3')).toBeNull();
    expect(parseIpAddr('192.0.2.1/24')).toBeNull();
    expect(parseIpAddr('01.2.3.4')).toBeNull();
    expect(parseIpAddr('256.1.1.1')).toBeNull();
    expect(formatMac(mac('02-00-5E-10-00-01'))).toBe('02:00:5e:10:00:01');
  });
});

describe('pcap files', () => {
  it('round-trip and refuse pcapng', () => {
    const frames = [pkt().eth().ipv4({ src: '192.0.2.1', dst: '192.0.2.2' }).udp({ sport: 1, dport: 2 }).payload(5).build()];
    const file = buildPcap(
      LINKTYPE_ETHERNET,
      frames.map((d, i) => ({ tsUs: 1_700_000_000_123_456 + i, data: d, origLen: d.length })),
    );
    const r = readPcap(file);
    if (typeof r === 'number') throw new Error('bad');
    expect(r.packets[0]!.tsUs).toBe(1_700_000_000_123_456);
    expect(Buffer.from(r.packets[0]!.data)).toEqual(frames[0]);
    expect(parsePcapHeader(hex('0a0d0d0a 1c000000 4d3c2b1a 01000000 ffffffff ffffffff'), 0, newPcapHeader())).toBe(E.ERR_BAD_PCAP);
    const cut = readPcap(file.subarray(0, file.length - 3));
    expect(typeof cut !== 'number' && cut.truncated).toBe(true);
  });
});

describe('random bytes never make a parser throw', () => {
  const rng = new Rng(0xfeed);
  const parsers: [string, (b: Uint8Array, off: number) => number][] = [
    ['ethernet', (b, o) => parseEthernet(b, o, newEthernetHeader())],
    ['arp', (b, o) => parseArp(b, o, newArpPacket())],
    ['ipv4', (b, o) => parseIpv4(b, o, newIpv4Header())],
    ['ipv6', (b, o) => parseIpv6(b, o, newIpv6Header())],
    ['tcp', (b, o) => parseTcp(b, o, newTcpHeader())],
    ['udp', (b, o) => parseUdp(b, o, newUdpHeader())],
    ['icmp', (b, o) => parseIcmp(b, o, newIcmpHeader())],
    ['nd', (b, o) => parseNd(b, o, newNdMessage())],
    ['vxlan', (b, o) => parseVxlan(b, o, newVxlanHeader())],
    ['pcap', (b, o) => parsePcapHeader(b, o, newPcapHeader())],
    ['dissect', (b) => (dissect(b).layers.length >= 0 ? 0 : -1)],
  ];
  it('each error code has the name its constant says (the drop counters carry these names)', () => {
    const byConstant = Object.entries(E)
      .filter(([k, v]) => k.startsWith('ERR_') && typeof v === 'number')
      .map(([k, v]) => [E.codecErrorName(v as number), k.slice(4).toLowerCase()]);
    expect(byConstant.length).toBe(13);
    for (const [name, fromConstant] of byConstant) expect(name).toBe(fromConstant);
    expect(E.codecErrorName(-14)).toBe('error_14');
  });
  it.each(parsers)('%s: 20,000 random buffers, results are lengths or named errors', (_n, parse) => {
    const names = new Set<string>(E.CODEC_ERROR_NAMES);
    for (let i = 0; i < 20_000; i++) {
      const b = rng.bytes(rng.int(120));
      if (i % 3 === 0 && b.length > 0) b[0] = rng.pick([0x45, 0x46, 0x4f, 0x60, 0x08]);
      const off = rng.int(4);
      const r = parse(b, off);
      expect(Number.isInteger(r)).toBe(true);
      if (r < 0) expect(names.has(E.codecErrorName(r))).toBe(true);
      else expect(r).toBeLessThanOrEqual(b.length);
    }
  });
});
