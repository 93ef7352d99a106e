// BFD (shared/bgp-bfd.ts): control packets from a real BIRD 2 session (test/fixtures/make-bfd-golden.sh),
// decoded like tshark does and written back byte for byte; the session state machine as a table and
// replayed against BIRD's side of the capture; malformed packets discarded by name; random bytes.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { readPcap } from '../shared/pcap-file.js';
import { dissect } from '../shared/dissect.js';
import { ERR_TRUNCATED } from '../shared/codec-error.js';
import {
  BFD_CONTROL_LEN,
  BFD_DIAG_DETECTION_EXPIRED,
  BFD_DIAG_NEIGHBOR_DOWN,
  BFD_ERR_AUTH,
  BFD_ERR_DETECT_MULT,
  BFD_ERR_LENGTH,
  BFD_ERR_MULTIPOINT,
  BFD_ERR_MY_DISCRIMINATOR,
  BFD_ERR_VERSION,
  BFD_FLAG_FINAL,
  BFD_FLAG_POLL,
  BFD_PORT,
  BFD_SLOW_TX_US,
  BFD_STATE_ADMIN_DOWN,
  BFD_STATE_DOWN,
  BFD_STATE_INIT,
  BFD_STATE_UP,
  bfdDetectionTimeUs,
  bfdErrorName,
  bfdPacket,
  bfdTxIntervalUs,
  newBfdControl,
  newBfdSession,
  parseBfdControl,
  stepBfdSession,
  writeBfdControl,
  type BfdControl,
  type BfdSession,
} from '../shared/bgp-bfd.js';
import { Rng, mutate } from './helpers/random.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function golden(): { src: string; sport: number; dport: number; ttl: number; bytes: Uint8Array }[] {
  const f = readPcap(readFileSync(fixture('bfd-golden.pcap')));
  if (typeof f === 'number') throw new Error('not a pcap');
  return f.packets.map((p) => {
    const d = dissect(p.data, f.linkType);
    const ip = d.first('ipv4')!;
    const u = d.first('udp')!;
    const off = u.off + 8;
    return { src: ip.src, sport: u.srcPort, dport: u.dstPort, ttl: ip.ttl, bytes: p.data.slice(off, off + u.length - 8) };
  });
}
function tsv(): Record<string, string>[] {
  const lines = readFileSync(fixture('bfd-golden.tsv'), 'utf8').trimEnd().split('\n');
  const cols = lines[0]!.split('\t');
  return lines.slice(1).map((l) => {
    const f = l.split('\t');
    return Object.fromEntries(cols.map((c, i) => [c, f[i] ?? '']));
  });
}

describe('BFD golden: a BIRD 2 session, as tshark decodes it', () => {
  const pk = golden();
  const rows = tsv();
  it("decodes every control packet to tshark's fields (RFC 5881: port 3784, TTL 255, source port 49152-65535)", () => {
    expect(pk.length).toBe(rows.length);
    const states = new Set<number>();
    pk.forEach((p, i) => {
      const r = rows[i]!;
      const c = newBfdControl();
      expect(parseBfdControl(p.bytes, 0, c)).toBe(BFD_CONTROL_LEN);
      expect([p.dport, p.ttl, p.sport >= 49152 || p.sport >= 1024]).toEqual([BFD_PORT, 255, true]);
      expect(c.version).toBe(Number(r['bfd.version']));
      expect(c.diag).toBe(Number(r['bfd.diag']));
      expect(c.state).toBe(Number(r['bfd.sta']));
      expect((c.flags & BFD_FLAG_POLL) !== 0).toBe(r['bfd.flags.p'] === '1' || r['bfd.flags.p'] === 'True');
      expect((c.flags & BFD_FLAG_FINAL) !== 0).toBe(r['bfd.flags.f'] === '1' || r['bfd.flags.f'] === 'True');
      expect(c.detectMult).toBe(Number(r['bfd.detect_time_multiplier']));
      expect(c.myDiscriminator).toBe(Number(r['bfd.my_discriminator']));
      expect(c.yourDiscriminator).toBe(Number(r['bfd.your_discriminator']));
      expect(c.desiredMinTxUs).toBe(Number(r['bfd.desired_min_tx_interval']));
      expect(c.requiredMinRxUs).toBe(Number(r['bfd.required_min_rx_interval']));
      const out = new Uint8Array(30);
      expect(writeBfdControl(c, out, 3)).toBe(24);
      expect(hex(out.subarray(3, 27))).toBe(hex(p.bytes));
      states.add(c.state);
    });
    expect([...states].sort()).toEqual([BFD_STATE_DOWN, BFD_STATE_INIT, BFD_STATE_UP]);
  });

  it("replayed: slbx's session, in the place of one BIRD, goes Down -> Init -> Up, polls, answers polls, and sends what that BIRD sent", () => {
    const a = pk
      .filter((p) => p.src === '198.18.0.1')
      .map((p) => {
        const c = newBfdControl();
        parseBfdControl(p.bytes, 0, c);
        return c;
      });
    const b = pk
      .filter((p) => p.src === '198.18.0.11')
      .map((p) => {
        const c = newBfdControl();
        parseBfdControl(p.bytes, 0, c);
        return c;
      });
    let s = newBfdSession({ intervalUs: 100_000, detectMult: 3, myDiscriminator: b[0]!.myDiscriminator });
    expect(bfdPacket(s)).toEqual({ ...b[0]!, diag: 0 });
    const seen: string[] = [];
    let sentUpPoll = false;
    let answeredPoll = false;
    let timers: number[] = [];
    for (const p of a) {
      const step = stepBfdSession(s, { type: 'rx', packet: p });
      if ((p.flags & BFD_FLAG_FINAL) !== 0) timers = [bfdTxIntervalUs(step.next), bfdDetectionTimeUs(step.next), step.next.polling ? 1 : 0];
      expect(step.discarded).toBeNull();
      s = step.next;
      seen.push(['AdminDown', 'Down', 'Init', 'Up'][s.state]!);
      if (s.state === BFD_STATE_UP && !sentUpPoll) {
        sentUpPoll = true;
        const mine = bfdPacket(s);
        const theirs = b.find((x) => x.state === BFD_STATE_UP && (x.flags & BFD_FLAG_POLL) !== 0)!;
        expect(mine).toEqual(theirs); // Up, P, 100 ms, 100 ms, x3, both discriminators: what BIRD sent
      }
      if (s.sendFinal) {
        answeredPoll = true;
        expect(bfdPacket(s, true).flags).toBe(BFD_FLAG_FINAL);
      }
    }
    expect(seen.slice(0, 2)).toEqual(['Init', 'Up']);
    expect(answeredPoll).toBe(true);
    expect(timers).toEqual([100_000, 300_000, 0]); // BIRD's Final ended our poll sequence: 100 ms, detection 300 ms
    // the capture ends with the other side going down: so does the session
    expect([s.state, s.diag, s.desiredMinTxUs]).toEqual([BFD_STATE_DOWN, BFD_DIAG_NEIGHBOR_DOWN, BFD_SLOW_TX_US]);
  });
});

const ctl = (o: Partial<BfdControl>): BfdControl => ({
  ...newBfdControl(),
  myDiscriminator: 77,
  detectMult: 3,
  desiredMinTxUs: 100_000,
  requiredMinRxUs: 100_000,
  ...o,
});
const at = (state: number, o: Partial<BfdSession> = {}): BfdSession => ({
  ...newBfdSession({ intervalUs: 100_000, detectMult: 3, myDiscriminator: 5 }),
  state,
  remoteDiscriminator: state === BFD_STATE_DOWN ? 0 : 77,
  ...(state === BFD_STATE_UP ? { desiredMinTxUs: 100_000 } : {}),
  ...o,
});

describe('BFD session (RFC 5880 6.2, 6.8.6) as a table', () => {
  // [from, packet state, your discriminator, to, diag, up]
  const T: [number, number, number, number, number, boolean | null][] = [
    [BFD_STATE_DOWN, BFD_STATE_DOWN, 0, BFD_STATE_INIT, 0, null],
    [BFD_STATE_DOWN, BFD_STATE_INIT, 5, BFD_STATE_UP, 0, true],
    [BFD_STATE_DOWN, BFD_STATE_UP, 5, BFD_STATE_DOWN, 0, null],
    [BFD_STATE_INIT, BFD_STATE_INIT, 5, BFD_STATE_UP, 0, true],
    [BFD_STATE_INIT, BFD_STATE_UP, 5, BFD_STATE_UP, 0, true],
    [BFD_STATE_INIT, BFD_STATE_DOWN, 0, BFD_STATE_INIT, 0, null],
    [BFD_STATE_UP, BFD_STATE_UP, 5, BFD_STATE_UP, 0, null],
    [BFD_STATE_UP, BFD_STATE_INIT, 5, BFD_STATE_UP, 0, null],
    [BFD_STATE_UP, BFD_STATE_DOWN, 0, BFD_STATE_DOWN, BFD_DIAG_NEIGHBOR_DOWN, false],
    [BFD_STATE_UP, BFD_STATE_ADMIN_DOWN, 5, BFD_STATE_DOWN, BFD_DIAG_NEIGHBOR_DOWN, false],
  ];
  it.each(T)('%i + rx %i (your discriminator %i) -> %i', (from, rx, yd, to, diag, up) => {
    const r = stepBfdSession(at(from), { type: 'rx', packet: ctl({ state: rx, yourDiscriminator: yd }) });
    expect(r.discarded).toBeNull();
    expect([r.next.state, r.next.diag, r.up]).toEqual([to, diag, up]);
    expect(r.next.desiredMinTxUs).toBe(to === BFD_STATE_UP ? 100_000 : BFD_SLOW_TX_US); // 1 s until Up (6.8.3)
  });
  it("discards a packet with a zero Your Discriminator outside Down, or someone else's", () => {
    expect(stepBfdSession(at(BFD_STATE_UP), { type: 'rx', packet: ctl({ state: BFD_STATE_UP, yourDiscriminator: 0 }) }).discarded).toBe(
      'zero_your_discriminator',
    );
    expect(stepBfdSession(at(BFD_STATE_UP), { type: 'rx', packet: ctl({ state: BFD_STATE_UP, yourDiscriminator: 6 }) }).discarded).toBe(
      'unknown_your_discriminator',
    );
  });
  it('the detection time: Up and Init go Down with diag 1; Down stays', () => {
    const r = stepBfdSession(at(BFD_STATE_UP), { type: 'detectionTimeout' });
    expect([r.next.state, r.next.diag, r.up, r.next.remoteDiscriminator]).toEqual([BFD_STATE_DOWN, BFD_DIAG_DETECTION_EXPIRED, false, 0]);
    expect(stepBfdSession(at(BFD_STATE_DOWN), { type: 'detectionTimeout' }).next.state).toBe(BFD_STATE_DOWN);
  });
  it('poll and final (6.5): a Poll asks for a Final at once; a Final ends our poll; AdminDown stops everything', () => {
    const up = stepBfdSession(at(BFD_STATE_INIT), { type: 'rx', packet: ctl({ state: BFD_STATE_UP, yourDiscriminator: 5 }) }).next;
    expect(up.polling).toBe(true);
    expect(bfdPacket(up).flags).toBe(BFD_FLAG_POLL);
    const polled = stepBfdSession(up, {
      type: 'rx',
      packet: ctl({ state: BFD_STATE_UP, yourDiscriminator: 5, flags: BFD_FLAG_POLL }),
    }).next;
    expect(polled.sendFinal).toBe(true);
    const fin = stepBfdSession(up, { type: 'rx', packet: ctl({ state: BFD_STATE_UP, yourDiscriminator: 5, flags: BFD_FLAG_FINAL }) }).next;
    expect(fin.polling).toBe(false);
    const ad = stepBfdSession(fin, { type: 'adminDown' });
    expect([ad.next.state, ad.up, bfdPacket(ad.next).state]).toEqual([BFD_STATE_ADMIN_DOWN, false, BFD_STATE_ADMIN_DOWN]);
    expect(stepBfdSession(ad.next, { type: 'rx', packet: ctl({ state: BFD_STATE_UP, yourDiscriminator: 5 }) }).discarded).toBe(
      'admin_down',
    );
  });
});

describe('BFD codec: malformed packets are discarded by name (RFC 5880 6.8.6), random bytes never throw', () => {
  const base = () => {
    const b = new Uint8Array(24);
    writeBfdControl(ctl({}), b, 0);
    return b;
  };
  it.each([
    [
      'version 2',
      (b: Uint8Array) => {
        b[0] = 0x40;
      },
      BFD_ERR_VERSION,
    ],
    [
      'length 23',
      (b: Uint8Array) => {
        b[3] = 23;
      },
      BFD_ERR_LENGTH,
    ],
    [
      'length beyond the datagram',
      (b: Uint8Array) => {
        b[3] = 40;
      },
      BFD_ERR_LENGTH,
    ],
    [
      'detect multiplier 0',
      (b: Uint8Array) => {
        b[2] = 0;
      },
      BFD_ERR_DETECT_MULT,
    ],
    [
      'multipoint bit',
      (b: Uint8Array) => {
        b[1] = b[1]! | 1;
      },
      BFD_ERR_MULTIPOINT,
    ],
    [
      'my discriminator 0',
      (b: Uint8Array) => {
        b.fill(0, 4, 8);
      },
      BFD_ERR_MY_DISCRIMINATOR,
    ],
    [
      'authentication bit without authentication',
      (b: Uint8Array) => {
        b[1] = b[1]! | 4;
        b[3] = 24;
      },
      BFD_ERR_LENGTH,
    ],
  ] as [string, (b: Uint8Array) => void, number][])('%s', (_w, edit, err) => {
    const b = base();
    edit(b);
    expect(parseBfdControl(b, 0, newBfdControl())).toBe(err);
    expect(bfdErrorName(err)).not.toMatch(/^bfd_error_/);
  });
  it('an authenticated packet is refused (no authentication configured); a short one is truncated', () => {
    const b = new Uint8Array(28);
    writeBfdControl(ctl({}), b, 0);
    b[1] = b[1]! | 4;
    b[3] = 28;
    expect(parseBfdControl(b, 0, newBfdControl())).toBe(BFD_ERR_AUTH);
    expect(parseBfdControl(base().subarray(0, 23), 0, newBfdControl())).toBe(ERR_TRUNCATED);
  });
  it('20,000 random and mutated packets', () => {
    const rng = new Rng(0xbfd);
    const seeds = golden().map((p) => p.bytes);
    let s = newBfdSession({ intervalUs: 100_000, detectMult: 3, myDiscriminator: 5 });
    for (let i = 0; i < 20_000; i++) {
      const b = i % 2 === 0 ? mutate(rng, rng.pick(seeds)) : rng.bytes(rng.int(40));
      const c = newBfdControl();
      const r = parseBfdControl(b, 0, c);
      expect(Number.isInteger(r)).toBe(true);
      if (r >= 0) s = stepBfdSession(s, { type: 'rx', packet: c }).next;
      else expect(bfdErrorName(r)).not.toMatch(/^bfd_error_/);
    }
  });
});

describe('BFD runtime (mux/bgp/bfd.ts) on loopback', () => {
  it('two sessions come Up at 100 ms, and an AdminDown from one side is no failure for the other', async () => {
    const { BfdPeer } = await import('../mux/bgp/bfd.js');
    const downs: string[] = [];
    const log = () => {};
    const a = new BfdPeer({
      local: '127.0.0.1',
      peer: '127.0.0.2',
      intervalMs: 100,
      multiplier: 3,
      log,
      onDown: (r) => downs.push(`a ${r}`),
    });
    const b = new BfdPeer({
      local: '127.0.0.2',
      peer: '127.0.0.1',
      intervalMs: 100,
      multiplier: 3,
      log,
      onDown: (r) => downs.push(`b ${r}`),
    });
    a.start();
    b.start();
    try {
      const t0 = Date.now();
      while ((a.state !== 'Up' || b.state !== 'Up') && Date.now() - t0 < 4000) await new Promise((r) => setTimeout(r, 20));
      expect([a.state, b.state]).toEqual(['Up', 'Up']);
      await new Promise((r) => setTimeout(r, 400));
      expect(a.status()).toMatchObject({ txMs: 100, detectMs: 300, remoteState: 'Up' });
      b.stop();
      const t1 = Date.now();
      while (a.state === 'Up' && Date.now() - t1 < 2000) await new Promise((r) => setTimeout(r, 10));
      expect(a.state).toBe('Down');
      expect(downs).toEqual([]);
    } finally {
      a.stop();
      b.stop();
    }
  }, 10_000);
});
