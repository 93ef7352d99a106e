// The data planes' hot-path helpers (docs/performance.md, "Where the data plane's time goes"): each fast
// form is checked against the plain one it replaces, on every length and offset that matters.
import { describe, expect, it } from 'vitest';
import { setFlagsFromString } from 'node:v8';
import { Counters } from '../shared/counters.js';
import { HOST_COUNTER_NAMES } from '../host-agent/data-plane.js';
import { copyPayload, ipv4ChecksumOk, ipv6Equal, newL4Ports, readEtherType, readL4Ports, WORD_COPY_MAX_LEN } from '../shared/hot-path.js';
import { newTcpHeader, parseTcp } from '../shared/tcp.js';
import { newUdpHeader, parseUdp } from '../shared/udp.js';
import { IPPROTO_TCP, IPPROTO_UDP } from '../shared/ipv4.js';
import { formatIpv6 } from '../shared/addr.js';
import { finishChecksum, ipv4HeaderChecksum, sumBytes, verifyIpv4HeaderChecksum } from '../shared/checksum.js';
import { newIpv4Header, parseIpv4 } from '../shared/ipv4.js';
import { ETHERTYPE_QINQ, ETHERTYPE_VLAN, newEthernetHeader, parseEthernet } from '../shared/ethernet.js';
import { Rng } from './helpers/random.js';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { readU16, writeU16 } from '../shared/bytes.js';
import { compileMuxTables, ALL_HEALTHY } from '../mux/tables.js';
import { MUX_COUNTER_NAMES, newMuxContext, processPacket, VERDICT_FORWARD } from '../mux/data-plane.js';
import { labConfig } from './helpers/lab-config.js';

setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;

describe('counters', () => {
  it('keep their index in fast mode (a field load per counter, not a dictionary probe)', () => {
    expect(hasFastProperties(new Counters(MUX_COUNTER_NAMES).index)).toBe(true);
    expect(hasFastProperties(new Counters(HOST_COUNTER_NAMES).index)).toBe(true);
  });

  it('index every name at its position', () => {
    const c = new Counters(HOST_COUNTER_NAMES);
    HOST_COUNTER_NAMES.forEach((n, i) => expect(c.index[n]).toBe(i));
    expect(Object.isFrozen(c.index)).toBe(true);
  });
});

describe('copyPayload', () => {
  const rng = new Rng(0xc0b1);
  const src = rng.bytes(512);
  // the destination is a view at an odd offset in a larger buffer, as a pooled Buffer may be
  const backing = new Uint8Array(1024);
  const dst = backing.subarray(3, 3 + 600);
  const view = new DataView(dst.buffer, dst.byteOffset, dst.byteLength);

  it('equals a byte copy at every length 0..200, at even and odd offsets on both sides', () => {
    for (let len = 0; len <= 200; len++) {
      for (const srcOff of [0, 1, 2, 3, 14, 17]) {
        for (const dstOff of [0, 1, 3, 64, 85]) {
          backing.fill(0xa5);
          const want = backing.slice();
          for (let i = 0; i < len; i++) want[3 + dstOff + i] = src[srcOff + i]!;
          copyPayload(src, srcOff, dst, view, dstOff, len);
          // Buffer.equals first: 6,030 toEqual calls on 600-byte arrays took 14 s idle and 90 s on a
          // busy machine (past the test's time limit); toEqual still reports the first mismatch in full
          if (!Buffer.from(backing.buffer, backing.byteOffset, backing.length).equals(want))
            expect(backing, `len ${len}, src ${srcOff}, dst ${dstOff}`).toEqual(want);
        }
      }
    }
  });

  it('switches to set() at WORD_COPY_MAX_LEN (both sides of it are covered above)', () => {
    expect(WORD_COPY_MAX_LEN).toBeGreaterThan(0);
    expect(WORD_COPY_MAX_LEN).toBeLessThan(200);
  });
});

describe('the MUX outer IPv4 checksum, summed in advance per host and per MUX', () => {
  const ipv4 = (rng: Rng) => `${1 + rng.int(223)}.${rng.int(256)}.${rng.int(256)}.${1 + rng.int(254)}`;

  it('equals a full computation over the header, for random addresses, ids and lengths', () => {
    const rng = new Rng(0x0c5);
    let checked = 0;
    for (let round = 0; round < 20; round++) {
      const config = labConfig((raw) => {
        for (const h of raw.hosts) h.address = ipv4(rng);
      });
      const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
      for (const h of tables.hosts.values()) {
        h.mac.set(mac('02:00:00:00:00:21'));
        h.macKnown = true;
      }
      const localPa4 = (rng.int(0x10000) * 0x10000 + rng.int(0x10000)) >>> 0;
      const ctx = newMuxContext({
        tables,
        localMac: mac('02:00:00:00:00:11'),
        localPa4,
        hashSeed: config.hashSeed,
        mtu: 9000,
        vxlanPort: config.fabric.vxlanPort,
        flowTable: config.flowTable,
      });
      for (let i = 0; i < 200; i++) {
        ctx.ipId = rng.int(0x10000); // wraps through 0xffff -> 0 too
        const f = pkt()
          .eth()
          .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
          .udp({ sport: 1000 + rng.int(60000), dport: 7 })
          .payload(rng.int(3000))
          .build();
        expect(processPacket(f, f.length, ctx)).toBe(VERDICT_FORWARD);
        expect(readU16(ctx.out, 24)).toBe(ipv4HeaderChecksum(ctx.out, 14, 20));
        checked++;
      }
    }
    expect(checked).toBe(4000);
  });
});

describe('readEtherType', () => {
  it('returns what parseEthernet returns, with the same EtherType and tag, on random frames at any offset and end', () => {
    const rng = new Rng(0xe7e);
    const a = newEthernetHeader();
    const b = newEthernetHeader();
    const tags = [ETHERTYPE_VLAN, ETHERTYPE_QINQ, 0x0800, 0x86dd, 0x0806];
    let tagged = 0;
    for (let i = 0; i < 20000; i++) {
      const buf = rng.bytes(rng.int(40));
      // often a tag, sometimes two (refused), so every branch is taken
      if (buf.length >= 14 && rng.int(2) === 0) {
        buf[12] = tags[rng.int(2)]! >>> 8;
        buf[13] = tags[rng.int(2)]! & 0xff;
      }
      if (buf.length >= 18 && rng.int(2) === 0) {
        const t = tags[rng.int(tags.length)]!;
        buf[16] = t >>> 8;
        buf[17] = t & 0xff;
      }
      const off = rng.int(4);
      const end = rng.int(3) === 0 ? rng.int(buf.length + 1) : buf.length;
      const want = parseEthernet(buf, off, a, end);
      const got = readEtherType(buf, off, b, end);
      expect(got).toBe(want);
      if (want > 0) {
        expect([b.etherType, b.vlanId, b.vlanPcp]).toEqual([a.etherType, a.vlanId, a.vlanPcp]);
        if (want === 18) tagged++;
      }
    }
    expect(tagged).toBeGreaterThan(100);
  });

  it('leaves the MAC fields alone', () => {
    const h = newEthernetHeader();
    h.dst.fill(7);
    expect(
      readEtherType(
        pkt().eth({ dst: '02:00:00:00:00:99' }).ipv4({ src: '192.0.2.1', dst: '192.0.2.2' }).udp({ sport: 1, dport: 2 }).build(),
        0,
        h,
        42,
      ),
    ).toBe(14);
    expect([...h.dst]).toEqual([7, 7, 7, 7, 7, 7]);
  });
});

describe('checksum sums', () => {
  // the plain forms they replace: 16-bit words one by one, and a fold loop
  const sum16 = (buf: Uint8Array, off: number, len: number, acc: number) => {
    let s = acc;
    let i = off;
    for (; i + 1 < off + len; i += 2) s += (buf[i]! << 8) | buf[i + 1]!;
    if (len & 1) s += buf[i]! << 8;
    return s;
  };
  const fold = (sum: number) => {
    let s = sum;
    while (s > 0xffff) s = (s & 0xffff) + Math.floor(s / 0x10000);
    return ~s & 0xffff;
  };

  it('sumBytes gives the exact sum of 16-bit words at every length 0..200 and 1400..1403, odd offsets included', () => {
    const rng = new Rng(0x5a5);
    const buf = rng.bytes(1500);
    const lens = [...Array.from({ length: 201 }, (_, i) => i), 1400, 1401, 1402, 1403];
    for (const len of lens) {
      for (const off of [0, 1, 2, 3, 14, 33]) {
        const acc = rng.int(1 << 20);
        expect(sumBytes(buf, off, len, acc), `len ${len}, off ${off}`).toBe(sum16(buf, off, len, acc));
      }
    }
    // all ones, the largest sums
    const ff = new Uint8Array(65535).fill(0xff);
    expect(sumBytes(ff, 0, 65535, 0)).toBe(sum16(ff, 0, 65535, 0));
  });

  it('finishChecksum folds like the loop, small sums and sums past 2^31 alike', () => {
    const rng = new Rng(0xf01d);
    const edges = [0, 1, 0xffff, 0x10000, 0x1fffe, 0x1ffff, 0x7fffffff, 0x80000000, 0xffffffff, 0x100000000, 2 ** 40 + 12345];
    for (const x of edges) expect(finishChecksum(x), String(x)).toBe(fold(x));
    for (let i = 0; i < 100000; i++) {
      const x = i % 2 === 0 ? rng.int(0x40000000) * 2 + rng.int(2) : rng.int(1 << 20) * 0x10000 + rng.int(0x10000);
      expect(finishChecksum(x)).toBe(fold(x));
    }
  });

  it('ipv4ChecksumOk answers as verifyIpv4HeaderChecksum, on random headers with and without options', () => {
    const rng = new Rng(0x1b4);
    const h = newIpv4Header();
    let good = 0;
    let bad = 0;
    for (let i = 0; i < 50000; i++) {
      const ihl = rng.int(3) === 0 ? 5 + rng.int(11) : 5;
      const hl = ihl * 4;
      const off = rng.int(4);
      const buf = rng.bytes(off + hl + rng.int(40));
      buf[off] = 0x40 | ihl;
      writeU16(buf, off + 2, hl + rng.int(buf.length - off - hl + 1));
      // half of them with the right checksum, some with one bit off
      if (rng.int(2) === 0) {
        writeU16(buf, off + 10, ipv4HeaderChecksum(buf, off, hl));
        if (rng.int(4) === 0) {
          const at = rng.int(hl - 3);
          buf[off + (at === 0 ? 1 : at + 3)]! ^= 1 << rng.int(8);
        } // not version, IHL or length
      }
      expect(parseIpv4(buf, off, h, buf.length)).toBe(hl);
      const want = verifyIpv4HeaderChecksum(buf, off, hl);
      expect(ipv4ChecksumOk(buf, off, h), `header ${Buffer.from(buf.subarray(off, off + hl)).toString('hex')}`).toBe(want);
      if (want) good++;
      else bad++;
    }
    expect(good).toBeGreaterThan(10000);
    expect(bad).toBeGreaterThan(10000);
  });
});

describe('readL4Ports', () => {
  // the plain form it replaces in both data planes: the TCP or UDP parser, and a first fragment's two
  // ports read after a bare 8-byte check
  const plain = (buf: Uint8Array, l4: number, end: number, proto: number, firstFragment: boolean): [number, number, number, number] => {
    if (proto === IPPROTO_TCP) {
      const t = newTcpHeader();
      const n = parseTcp(buf, l4, t, end);
      return n < 0 ? [n, 0, 0, 0] : [n, t.srcPort, t.dstPort, t.flags];
    }
    if (firstFragment) return end - l4 < 8 ? [-1, 0, 0, 0] : [8, (buf[l4]! << 8) | buf[l4 + 1]!, (buf[l4 + 2]! << 8) | buf[l4 + 3]!, 0];
    const u = newUdpHeader();
    const n = parseUdp(buf, l4, u, end);
    return n < 0 ? [n, 0, 0, 0] : [n, u.srcPort, u.dstPort, 0];
  };

  it('returns what the parsers return, with the same ports and TCP flags, on random headers at any offset and end, first fragments included', () => {
    const rng = new Rng(0x14b);
    const ports = newL4Ports();
    const seen = new Set<number>();
    let ok = 0;
    for (let i = 0; i < 50000; i++) {
      const buf = rng.bytes(rng.int(80));
      const l4 = rng.int(8);
      const proto = rng.int(2) === 0 ? IPPROTO_TCP : IPPROTO_UDP;
      // a plausible TCP data offset or UDP length half of the time, so the accepting branches are taken
      if (rng.int(2) === 0 && buf.length > l4 + 12) buf[l4 + 12] = (5 + rng.int(3)) << 4;
      if (rng.int(2) === 0 && buf.length > l4 + 5) writeU16(buf, l4 + 4, 8 + rng.int(Math.max(1, buf.length - l4 - 8)));
      const end = rng.int(3) === 0 ? rng.int(buf.length + 1) : buf.length;
      const frag = rng.int(3) === 0;
      ports.srcPort = -1;
      ports.dstPort = -1;
      ports.tcpFlags = -1;
      const got = readL4Ports(buf, l4, end, proto, frag, ports);
      const [n, sp, dp, flags] = plain(buf, l4, end, proto, frag);
      expect(got, `proto ${proto}, first fragment ${frag}, l4 ${l4}, end ${end}`).toBe(n);
      if (n >= 0) {
        expect([ports.srcPort, ports.dstPort, ports.tcpFlags]).toEqual([sp, dp, flags]);
        ok++;
      } else seen.add(n);
    }
    expect(ok).toBeGreaterThan(10000);
    expect(seen.size).toBeGreaterThanOrEqual(3); // truncated, bad data offset, bad UDP length
  });
});

describe('ipv6Equal', () => {
  it("answers as a comparison of the addresses' text, on random pairs that differ in one word or none", () => {
    const rng = new Rng(0x6e9);
    let same = 0;
    for (let i = 0; i < 20000; i++) {
      const a = Uint32Array.from({ length: 4 }, () => rng.u32());
      const b = Uint32Array.from(a);
      if (rng.int(2) === 0) b[rng.int(4)] = rng.int(2) === 0 ? rng.u32() : (b[rng.int(4)]! ^ (1 << rng.int(32))) >>> 0;
      const want = formatIpv6(a) === formatIpv6(b);
      expect(ipv6Equal(a, b)).toBe(want);
      if (want) same++;
    }
    expect(same).toBeGreaterThan(5000);
    expect(same).toBeLessThan(15000);
  });
});
