// Latency routing (docs/latency.md): the echo's codec (golden bytes written by hand from the layout in
// shared/latency.ts), the smoothing, the host agent's data plane on an echo request, the MUX's meter on
// answers, and the MUX tables: pools without a latency section identical whatever a MUX measures.
import { describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { ERR_TRUNCATED } from '../shared/codec-error.js';
import {
  ERR_ECHO_BAD_ENTRY,
  ERR_ECHO_BAD_MAGIC,
  ERR_ECHO_BAD_TYPE,
  ERR_ECHO_BAD_VERSION,
  ERR_ECHO_TRAILING,
  PROBE_RTT_NONE,
  SampleWindow,
  medianOf,
  parseEchoAnswer,
  parseEchoRequest,
  writeEchoAnswer,
  writeEchoRequest,
  type EchoRequest,
} from '../shared/latency.js';
import { compileHostTables, macKey } from '../host-agent/tables.js';
import { newHostContext, processInbound, VERDICT_LOCAL, VERDICT_DROP } from '../host-agent/data-plane.js';
import { compileMuxTables, latencyBandChanged, type HealthView } from '../mux/tables.js';
import { LatencyMeter, planLatency } from '../mux/latency.js';
import { LAB_YAML_PATH, labConfig } from './helpers/lab-config.js';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { validateConfig } from '../shared/config.js';
import { selectCandidates } from '../shared/selection.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('echo request codec', () => {
  // magic 'SLBE', version 1, type 1, zero, nonce 0x01020304 0x05060708
  const golden = hex('534c4245 01 01 0000 01020304 05060708');

  it('writes the golden bytes and parses them back, at a non-zero offset too', () => {
    const b = Buffer.alloc(16);
    expect(writeEchoRequest({ nonceHi: 0x01020304, nonceLo: 0x05060708 }, b, 0)).toBe(16);
    expect(b).toEqual(golden);
    const big = Buffer.concat([Buffer.alloc(5, 0xee), golden, Buffer.alloc(3, 0xee)]);
    const out: EchoRequest = { nonceHi: 0, nonceLo: 0 };
    expect(parseEchoRequest(big, 5, out, 21)).toBe(16);
    expect(out).toEqual({ nonceHi: 0x01020304, nonceLo: 0x05060708 });
  });

  it.each([
    ['truncated', golden.subarray(0, 15), ERR_TRUNCATED],
    ['bad magic', hex('534c4246 01 01 0000 01020304 05060708'), ERR_ECHO_BAD_MAGIC],
    ['bad version', hex('534c4245 02 01 0000 01020304 05060708'), ERR_ECHO_BAD_VERSION],
    ['an answer where a request belongs', hex('534c4245 01 02 0000 01020304 05060708'), ERR_ECHO_BAD_TYPE],
    ['trailing bytes', Buffer.concat([golden, hex('00')]), ERR_ECHO_TRAILING],
  ])('%s is refused', (_n, bytes, err) => {
    expect(parseEchoRequest(bytes, 0, { nonceHi: 0, nonceLo: 0 })).toBe(err);
  });
});

describe('echo answer codec', () => {
  // magic, version 1, type 2, 2 entries, nonce; 'ab' 1500 us; 'c' none
  const golden = hex('534c4245 01 02 0002 0a0b0c0d 0e0f1011  02 6162 000005dc  01 63 ffffffff');

  it('writes the golden bytes and parses them back, at a non-zero offset too', () => {
    const h = {
      nonceHi: 0x0a0b0c0d,
      nonceLo: 0x0e0f1011,
      entries: [
        { nic: 'ab', probeRttUs: 1500 },
        { nic: 'c', probeRttUs: PROBE_RTT_NONE },
      ],
    };
    const b = Buffer.alloc(golden.length + 4);
    expect(writeEchoAnswer(h, b, 4)).toBe(golden.length);
    expect(b.subarray(4)).toEqual(golden);
    expect(parseEchoAnswer(b, 4)).toEqual(h);
  });

  it.each([
    ['truncated entry', golden.subarray(0, golden.length - 1), ERR_TRUNCATED],
    ['a name of length 0', hex('534c4245 01 02 0001 00000000 00000000 00 00000000'), ERR_ECHO_BAD_ENTRY],
    ['a name that is not printable ASCII', hex('534c4245 01 02 0001 00000000 00000000 01 0a 00000000'), ERR_ECHO_BAD_ENTRY],
    ['more entries than listed', Buffer.concat([golden, hex('01 64 00000001')]), ERR_ECHO_TRAILING],
    ['a request where an answer belongs', hex('534c4245 01 01 0000 00000000 00000000'), ERR_ECHO_BAD_TYPE],
  ])('%s is refused', (_n, bytes, err) => {
    expect(parseEchoAnswer(bytes, 0)).toBe(err);
  });
});

describe('smoothing', () => {
  it('median: the middle sample, or the mean of the two middle ones', () => {
    expect(medianOf([5, 1, 3])).toBe(3);
    expect(medianOf([4, 1, 3, 2])).toBe(2.5);
    expect(medianOf([])).toBeNaN();
  });

  it('one outlier in five samples does not move the median', () => {
    const w = new SampleWindow(5);
    for (const v of [10, 11, 10, 250, 12]) w.push(v);
    expect(w.median()).toBe(11);
    w.push(13); // 10 leaves: 11, 10, 250, 12, 13
    expect(w.values()).toEqual([11, 10, 250, 12, 13]);
    expect(w.median()).toBe(12);
    w.resize(2);
    expect(w.values()).toEqual([12, 13]);
  });

  it('the minimum of the window ignores what a busy machine adds', () => {
    const w = new SampleWindow(3);
    for (const v of [40, 12, 90, 55]) w.push(v); // 40 leaves
    expect(w.min()).toBe(12);
    expect(new SampleWindow(3).min()).toBeUndefined();
  });
});

describe('host agent data plane: the echo request passes the VXLAN source checks', () => {
  const config = labConfig();
  const MUX_MAC = '02:00:00:00:00:11';
  const request = hex('534c4245 01 01 0000 01020304 05060708');
  const frame = (src: string, vni: number) =>
    pkt()
      .eth({ src: MUX_MAC, dst: '02:00:00:00:00:21' })
      .ipv4({ src, dst: '198.18.0.21' })
      .udp({ sport: 40000, dport: 4789, checksum: 'zero' })
      .vxlan({ vni })
      .payload(request)
      .build();
  const ctx = () => {
    const c = newHostContext(compileHostTables(config, 'host1', 1), 4789, [mac('02:00:00:01:00:01'), mac('02:00:00:01:00:02')]);
    c.sourceMacCheck = true;
    const mux1 = c.tables.peers.find((p) => p.name === 'mux1' && p.address.family === 4)!;
    c.peerMacs[mux1.index] = macKey(mac(MUX_MAC), 0);
    return c;
  };

  it('VNI 0 from mux1 with mux1 MAC: VERDICT_LOCAL, in_latency_echo, the payload located', () => {
    const c = ctx();
    const f = frame('198.18.0.11', 0);
    expect(processInbound(f, f.length, c)).toBe(VERDICT_LOCAL);
    expect(c.counters.get('in_latency_echo')).toBe(1);
    expect(Buffer.from(c.outBuf.subarray(c.outOff, c.outOff + c.outLen))).toEqual(request);
    expect(c.tables.peers[c.lastPeer]!.name).toBe('mux1');
    expect(c.udp.srcPort).toBe(40000);
  });

  it('from a peer address with the wrong MAC: drop_in_spoofed_source, never answered', () => {
    const c = ctx();
    const f = frame('198.18.0.11', 0);
    f[6] = 0x06; // the source MAC's first byte
    expect(processInbound(f, f.length, c)).toBe(VERDICT_DROP);
    expect(c.counters.get('drop_in_spoofed_source')).toBe(1);
    expect(c.counters.get('in_latency_echo')).toBe(0);
  });

  it('from an address that is no peer: drop_in_unknown_source', () => {
    const c = ctx();
    const f = frame('198.18.0.99', 0);
    expect(processInbound(f, f.length, c)).toBe(VERDICT_DROP);
    expect(c.counters.get('drop_in_unknown_source')).toBe(1);
  });

  it('a VNI no network has, other than 0: still drop_in_unknown_vni', () => {
    const c = ctx();
    const f = frame('198.18.0.11', 77);
    expect(processInbound(f, f.length, c)).toBe(VERDICT_DROP);
    expect(c.counters.get('drop_in_unknown_vni')).toBe(1);
  });
});

/** The lab config with pool web in latency mode (sensitivity 20 ms, 3 samples, hysteresis 2 ms). */
function latencyConfig(sensitivityMs = 20) {
  return labConfig((raw) => {
    raw.pools[0].latencySensitivityMs = sensitivityMs;
    raw.pools[0].latency = { intervalMs: 500, samples: 3, hysteresisMs: 2 };
  });
}

describe('the MUX meter', () => {
  it('plans one echo per host of a latency pool, at the smallest interval, windows of the largest sample count', () => {
    const p = planLatency(latencyConfig());
    expect(p.hosts.map((h) => [h.name, h.address, h.intervalMs, h.nics])).toEqual([
      ['host1', '198.18.0.21', 500, ['h1vm1', 'h1vm2']],
      ['host2', '198.18.0.22', 500, ['h2vm1', 'h2vm2']],
    ]);
    expect(planLatency(labConfig()).hosts).toEqual([]);
  });

  it('an answer gives each nic of the host the round trip plus its probe round trip; the rest is counted', () => {
    let now = 1000;
    const m = new LatencyMeter({ config: latencyConfig(), localAddress: '198.18.0.11', onSamples: () => {}, now: () => now });
    const req = m.makeRequest('host1', now)!;
    expect(req.subarray(0, 8)).toEqual(hex('08000000 00000000')); // VXLAN, I flag, VNI 0
    const r: EchoRequest = { nonceHi: 0, nonceLo: 0 };
    expect(parseEchoRequest(req, 8, r)).toBe(16);
    const answer = (nonce: EchoRequest) => {
      const entries = [
        { nic: 'h1vm1', probeRttUs: 500 },
        { nic: 'h1vm2', probeRttUs: PROBE_RTT_NONE },
      ];
      const b = Buffer.alloc(64);
      return b.subarray(0, writeEchoAnswer({ ...nonce, entries }, b, 0));
    };
    now = 1012;
    m.onAnswer(answer(r), { address: '198.18.0.21' });
    // host round trip 12 ms; h1vm1's probe 0.5 ms; h1vm2 has no probe round trip
    expect(m.latencyMs('h1vm1')).toBe(12.5);
    expect(m.latencyMs('h1vm2')).toBe(12);
    expect(m.latencyMs('h2vm1')).toBeUndefined();
    // a second echo: 20 ms, h1vm1's probe 0.4 ms: the smallest of each, 12 + 0.4
    const r2: EchoRequest = { nonceHi: 0, nonceLo: 0 };
    parseEchoRequest(m.makeRequest('host1', now)!, 8, r2);
    now = 1032;
    const b2 = Buffer.alloc(64);
    m.onAnswer(b2.subarray(0, writeEchoAnswer({ ...r2, entries: [{ nic: 'h1vm1', probeRttUs: 400 }] }, b2, 0)), { address: '198.18.0.21' });
    expect(m.latencyMs('h1vm1')).toBeCloseTo(12.4, 9);
    expect(m.latencyMs('h1vm2')).toBe(12);
    // the same answer again: its request is answered already
    m.onAnswer(answer(r), { address: '198.18.0.21' });
    // from host2's address: no request to host2 has that nonce
    m.onAnswer(answer(r), { address: '198.18.0.22' });
    m.onAnswer(answer(r), { address: '198.18.0.99' });
    m.onAnswer(hex('534c4245 01 02 0001'), { address: '198.18.0.21' });
    // nine requests in flight: the first is given up (lost), and its answer is late
    const first = m.makeRequest('host1', now)!;
    for (let i = 0; i < 8; i++) m.makeRequest('host1', now);
    const f: EchoRequest = { nonceHi: 0, nonceLo: 0 };
    parseEchoRequest(first, 8, f);
    m.onAnswer(answer(f), { address: '198.18.0.21' });
    expect(m.counters).toMatchObject({
      latency_echo_sent: 11,
      latency_echo_answered: 2,
      latency_echo_unsolicited: 2,
      latency_echo_unknown_source: 1,
      latency_echo_bad: 1,
      latency_echo_lost: 1,
      latency_echo_late: 1,
    });
  });
});

describe('MUX tables with measured latency', () => {
  const healthy = (lat: Record<string, number>): HealthView => ({ isHealthy: () => true, latencyMs: (nic) => lat[nic] });

  it('a pool without a latency section: the same table whatever each MUX measures', () => {
    const config = labConfig();
    const a = compileMuxTables(config, healthy({ h1vm1: 5, h1vm2: 15, h2vm1: 40, h2vm2: 40 }), null, 1);
    const b = compileMuxTables(config, healthy({ h1vm1: 40, h1vm2: 40, h2vm1: 15, h2vm2: 5 }), null, 1);
    for (const [key, t] of a.poolTables) {
      expect(t.latency).toBeNull();
      expect(t.candidates).toEqual(['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2']);
      expect(Buffer.from(t.slots.buffer).equals(Buffer.from(b.poolTables.get(key)!.slots.buffer))).toBe(true);
    }
  });

  it("the document's example live: 15, 30, 60 ms with sensitivity 30 -> the 15 and 30 ms backends", () => {
    const config = latencyConfig(30);
    const t = compileMuxTables(config, healthy({ h1vm1: 15, h1vm2: 30, h2vm1: 60 }), null, 1).poolTables.get('web')!;
    // h2vm2 has no measurement: kept in the band (docs/latency.md)
    expect(t.candidates).toEqual(['h1vm1', 'h1vm2', 'h2vm2']);
    expect(t.latency!.backends.map((b) => [b.nic, b.inBand])).toEqual([
      ['h1vm1', true],
      ['h1vm2', true],
      ['h2vm1', false],
      ['h2vm2', true],
    ]);
  });

  it('the flap guard: a backend inside stays in up to hysteresisMs beyond the edge; outside, it needs the edge itself', () => {
    const config = latencyConfig(20); // hysteresis 2
    const lat = { h1vm1: 5, h1vm2: 25, h2vm1: 40, h2vm2: 40 };
    const t1 = compileMuxTables(config, healthy(lat), null, 1);
    expect(t1.poolTables.get('web')!.candidates).toEqual(['h1vm1', 'h1vm2']); // edge 5 + 20 = 25, inclusive
    // 26.5 ms: beyond the edge 25 but within 25 + 2: stays, and nothing to recompile
    const lat2 = { ...lat, h1vm2: 26.5 };
    expect(latencyBandChanged(config, healthy(lat2), t1)).toBe(false);
    // 27.5 ms: beyond 27: leaves
    const lat3 = { ...lat, h1vm2: 27.5 };
    expect(latencyBandChanged(config, healthy(lat3), t1)).toBe(true);
    const t3 = compileMuxTables(config, healthy(lat3), t1, 2);
    expect(t3.poolTables.get('web')!.candidates).toEqual(['h1vm1']);
    // back at 26.5 from outside: not yet (the edge is 25 for a backend outside)
    expect(latencyBandChanged(config, healthy(lat2), t3)).toBe(false);
    // 25: in again
    expect(latencyBandChanged(config, healthy(lat), t3)).toBe(true);
  });
});

describe('selection with the flap guard (shared/selection.ts), by hand', () => {
  const be = (id: string, latencyMs: number, wasInBand = false) => ({
    id,
    enabled: true,
    healthy: true,
    drained: false,
    priority: 1,
    weight: 50,
    latencyMs,
    wasInBand,
  });

  it('sensitivity 0, hysteresis 1: two backends 0.4 ms apart both stay once both were in; a newcomer must be the fastest', () => {
    // fastest 5.0; edge 5.0 for b unless it was in (then 6.0)
    expect(selectCandidates([be('a', 5), be('b', 5.4, true)], 0, 1).candidates).toEqual([0, 1]);
    expect(selectCandidates([be('a', 5), be('b', 5.4, false)], 0, 1).candidates).toEqual([0]);
    expect(selectCandidates([be('a', 5), be('b', 6.01, true)], 0, 1).candidates).toEqual([0]);
  });

  it('a negative or non-finite hysteresis is API misuse', () => {
    expect(() => selectCandidates([be('a', 1)], 0, -1)).toThrow(/latencyHysteresisMs/);
    expect(() => selectCandidates([be('a', 1)], 0, NaN)).toThrow(/latencyHysteresisMs/);
  });
});

describe('config: pools[].latency', () => {
  const validate = (latency: unknown) => {
    const raw = parseYaml(readFileSync(LAB_YAML_PATH, 'utf8'));
    raw.pools[0].latency = latency;
    return validateConfig(raw, 'x');
  };

  it('absent or null: no measurement; an empty mapping: every default', () => {
    const none = validate(null);
    expect(none.ok && none.config.pools[0]!.latency).toBeNull();
    const d = validate({});
    expect(d.ok && d.config.pools[0]!.latency).toEqual({ intervalMs: 1000, samples: 5, hysteresisMs: 2 });
  });

  it.each([
    [{ intervalMs: 50 }, 'pools[0].latency.intervalMs', 'integer 100..60000'],
    [{ samples: 0 }, 'pools[0].latency.samples', 'integer 1..100'],
    [{ hysteresisMs: -1 }, 'pools[0].latency.hysteresisMs', 'integer 0..10000'],
    [{ intervalMS: 500 }, 'pools[0].latency.intervalMS', "did you mean 'intervalMs'"],
    [5, 'pools[0].latency', 'must be a mapping'],
  ])('%j is refused at its field, saying what is allowed', (latency, path, message) => {
    const r = validate(latency);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path)).toEqual([path]);
    expect(r.errors[0]!.message).toContain(message);
  });
});
