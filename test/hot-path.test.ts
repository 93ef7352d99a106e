// The data planes' hot-path helpers (docs/performance.md, "Where the data plane's time goes"): each fast
// form is checked against the plain one it replaces, on every length and offset that matters.
import { describe, expect, it } from 'vitest';
import { setFlagsFromString } from 'node:v8';
import { Counters } from '../shared/counters.js';
import { HOST_COUNTER_NAMES } from '../host-agent/data-plane.js';
import { copyPayload, WORD_COPY_MAX_LEN } from '../shared/hot-path.js';
import { Rng } from './helpers/random.js';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { ipv4HeaderChecksum } from '../shared/checksum.js';
import { readU16 } from '../shared/bytes.js';
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
      const config = labConfig((raw) => { for (const h of raw.hosts) h.address = ipv4(rng); });
      const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
      for (const h of tables.hosts.values()) { h.mac.set(mac('02:00:00:00:00:21')); h.macKnown = true; }
      const localPa4 = (rng.int(0x10000) * 0x10000 + rng.int(0x10000)) >>> 0;
      const ctx = newMuxContext({
        tables, localMac: mac('02:00:00:00:00:11'), localPa4, hashSeed: config.hashSeed, mtu: 9000, vxlanPort: config.fabric.vxlanPort, flowTable: config.flowTable,
      });
      for (let i = 0; i < 200; i++) {
        ctx.ipId = rng.int(0x10000); // wraps through 0xffff -> 0 too
        const f = pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).udp({ sport: 1000 + rng.int(60000), dport: 7 }).payload(rng.int(3000)).build();
        expect(processPacket(f, f.length, ctx)).toBe(VERDICT_FORWARD);
        expect(readU16(ctx.out, 24)).toBe(ipv4HeaderChecksum(ctx.out, 14, 20));
        checked++;
      }
    }
    expect(checked).toBe(4000);
  });
});
