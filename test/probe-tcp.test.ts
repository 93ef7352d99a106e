// The probe TCP client (host-agent/probe-tcp.ts) against fixtures, without namespaces: what it sends is
// compared with frames built from scratch by the packet builder (full checksums), and what the backend
// "answers" is built by the packet builder too: SYN-ACK, RST, HTTP 200 and 503, out-of-order and
// duplicate data, FIN, late segments, bad checksums, timeouts. tshark cross-checks one whole exchange.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ip, mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { dissect } from '../shared/dissect.js';
import { skipBecause } from './helpers/prerequisite.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../shared/pcap-file.js';
import { IPV4_FLAG_DF } from '../shared/ipv4.js';
import { TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import {
  ProbeTcp,
  buildProbeRequest,
  parseStatusLine,
  PROBE_PORT_MAX,
  PROBE_PORT_MIN,
  type ProbeOutcome,
  type ProbeSpec,
} from '../host-agent/probe-tcp.js';
import { expectFrame } from './helpers/frames.js';
import { Rng, mutate } from './helpers/random.js';

const PORT_MAC = '02:00:00:01:00:01';
const NIC_MAC = '02:00:c0:00:02:0a';
const GW = '192.0.2.1';
const DIP = '192.0.2.10';
const GW6 = '2001:db8:d::1';
const DIP6 = '2001:db8:d::10';
const IP_ID = 0x1234;
const PORT_SPAN = PROBE_PORT_MAX - PROBE_PORT_MIN + 1;
const LPORT = PROBE_PORT_MIN + 100;
const ISS = 0x01020304;
const ISS1 = ISS + 1;

/** A probe client with a manual clock and timers, deterministic random numbers and a sent-frame log. */
function harness(o: { sendOk?: boolean } = {}) {
  let now = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  let nextTimer = 1;
  const sent: { nic: string; frame: Buffer }[] = [];
  const probe = new ProbeTcp({
    send: (nic, frame, len) => {
      sent.push({ nic, frame: Buffer.from(frame.subarray(0, len)) });
      return o.sendOk ?? true;
    },
    macs: (nic) => (nic === 'h1vm1' ? { src: mac(PORT_MAC), dst: mac(NIC_MAC) } : null),
    now: () => now,
    setTimer: (fn, ms) => {
      const id = nextTimer++;
      timers.set(id, { at: now + ms, fn });
      return id;
    },
    clearTimer: (id) => {
      timers.delete(id as number);
    },
    randomInt: (n) => (n === 0x10000 ? IP_ID : n === PORT_SPAN ? 100 : ISS),
  });
  const advance = (ms: number) => {
    now += ms;
    for (const [id, t] of [...timers])
      if (t.at <= now) {
        timers.delete(id);
        t.fn();
      }
  };
  const outcomes: ProbeOutcome[] = [];
  const start = (spec: Partial<ProbeSpec> = {}) => probe.start({ ...spec4(), ...spec }, (r) => outcomes.push(r));
  /** Feeds an IP packet (no Ethernet) as the data plane hands it over, at a non-zero offset in a larger buffer. */
  const feed = (ipPacket: Buffer, nic = 'h1vm1') => {
    const buf = Buffer.alloc(ipPacket.length + 30, 0xee);
    ipPacket.copy(buf, 14);
    probe.onPacket(nic, buf, 14, ipPacket.length);
  };
  return {
    probe,
    sent,
    outcomes,
    advance,
    start,
    feed,
    timers,
    setNow: (t: number) => {
      now = t;
    },
  };
}

function spec4(): ProbeSpec {
  return { nic: 'h1vm1', srcMac: mac(PORT_MAC), dstMac: mac(NIC_MAC), src: ip(GW), dst: ip(DIP), dstPort: 80, http: null, timeoutMs: 1000 };
}
function spec6(path: string | null): Partial<ProbeSpec> {
  return { src: ip(GW6), dst: ip(DIP6), http: path === null ? null : { path } };
}

// what the prober must send (IPv4: DF, TTL 64, id from IP_ID on; window 65535, 0 on RSTs)
const out4 = (id: number, tcp: { seq: number; ack?: number; flags: number; window?: number }, payload?: Uint8Array) => {
  const b = pkt()
    .eth({ src: PORT_MAC, dst: NIC_MAC })
    .ipv4({ src: GW, dst: DIP, id, flags: IPV4_FLAG_DF, ttl: 64 })
    .tcp({
      sport: LPORT,
      dport: 80,
      seq: tcp.seq,
      ack: tcp.ack ?? 0,
      flags: tcp.flags,
      window: tcp.window ?? (tcp.flags & TCP_RST ? 0 : 65535),
    });
  return (payload ? b.payload(payload) : b).build();
};
const out6 = (tcp: { seq: number; ack?: number; flags: number }, payload?: Uint8Array) => {
  const b = pkt()
    .eth({ src: PORT_MAC, dst: NIC_MAC })
    .ipv6({ src: GW6, dst: DIP6, hopLimit: 64 })
    .tcp({ sport: LPORT, dport: 80, seq: tcp.seq, ack: tcp.ack ?? 0, flags: tcp.flags, window: tcp.flags & TCP_RST ? 0 : 65535 });
  return (payload ? b.payload(payload) : b).build();
};
// what the backend answers (an IP packet, as VERDICT_LOCAL hands it over)
const in4 = (tcp: { seq: number; ack?: number; flags: number; dport?: number; sport?: number; checksum?: 'bad' }, data?: string) => {
  const b = pkt()
    .ipv4({ src: DIP, dst: GW, flags: IPV4_FLAG_DF })
    .tcp({
      sport: tcp.sport ?? 80,
      dport: tcp.dport ?? LPORT,
      seq: tcp.seq,
      ack: tcp.ack ?? 0,
      flags: tcp.flags,
      ...(tcp.checksum ? { checksum: tcp.checksum } : {}),
    });
  return (data !== undefined ? b.payload(data) : b).build();
};
const in6 = (tcp: { seq: number; ack?: number; flags: number }, data?: string) => {
  const b = pkt()
    .ipv6({ src: DIP6, dst: GW6 })
    .tcp({ sport: 80, dport: LPORT, seq: tcp.seq, ack: tcp.ack ?? 0, flags: tcp.flags });
  return (data !== undefined ? b.payload(data) : b).build();
};

const SRV = 7000; // the backend's ISN
const REQ = (path: string, dst = DIP) => buildProbeRequest(path, ip(dst), 80);

describe('probe TCP client: tcp probes', () => {
  it('SYN from the gateway and the port MAC to the nic; SYN-ACK is a success, then RST', () => {
    const h = harness();
    h.start();
    expect(h.sent).toHaveLength(1);
    expectFrame(h.sent[0]!.frame, out4(IP_ID, { seq: ISS, flags: TCP_SYN }));
    const d = dissect(h.sent[0]!.frame);
    expect(d.all('ipv4')[0]!.checksumOk).toBe(true);
    expect(d.all('tcp')[0]!.checksumOk).toBe(true);
    h.advance(3);
    h.feed(in4({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }));
    expect(h.outcomes).toEqual([{ ok: true, detail: 'syn-ack', rttMs: 3, connectMs: 3 }]);
    expect(h.sent).toHaveLength(2);
    expectFrame(h.sent[1]!.frame, out4(IP_ID + 1, { seq: ISS1, flags: TCP_RST }));
    expect(h.probe.active).toBe(0);
    expect(h.timers.size).toBe(0);
  });

  it('RST to the SYN (closed port) is a failure: refused', () => {
    const h = harness();
    h.start();
    h.feed(in4({ seq: 0, ack: ISS1, flags: TCP_RST | TCP_ACK }));
    expect(h.outcomes).toEqual([{ ok: false, detail: 'refused', rttMs: 0, connectMs: null }]);
    expect(h.sent).toHaveLength(1); // an RST is never answered
  });

  it('no answer within the timeout is a failure; a late SYN-ACK then gets an RST', () => {
    const h = harness();
    h.start({ timeoutMs: 500 });
    h.advance(499);
    expect(h.outcomes).toEqual([]);
    h.advance(1);
    expect(h.outcomes).toEqual([{ ok: false, detail: 'timeout (no syn-ack)', rttMs: 500, connectMs: null }]);
    h.feed(in4({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }));
    // RFC 9293 3.10.7.1: the segment has an ACK, so the RST takes its sequence number from it
    expectFrame(h.sent[1]!.frame, out4(IP_ID + 1, { seq: ISS1, flags: TCP_RST }));
    expect(h.probe.counters.get('segments_no_connection')).toBe(1);
  });

  it('an RST with an unacceptable ACK is ignored; a SYN-ACK acking the wrong number gets an RST', () => {
    const h = harness();
    h.start();
    h.feed(in4({ seq: 0, ack: ISS + 99, flags: TCP_RST | TCP_ACK }));
    h.feed(in4({ seq: SRV, ack: ISS + 99, flags: TCP_SYN | TCP_ACK }));
    expect(h.outcomes).toEqual([]);
    expectFrame(h.sent[1]!.frame, out4(IP_ID + 1, { seq: ISS + 99, flags: TCP_RST }));
    h.feed(in4({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }));
    expect(h.outcomes[0]).toMatchObject({ ok: true, detail: 'syn-ack' });
  });

  it('a segment with a bad checksum is dropped; the timeout then says so', () => {
    const h = harness();
    h.start();
    h.feed(in4({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK, checksum: 'bad' }));
    expect(h.sent).toHaveLength(1);
    h.advance(1000);
    expect(h.outcomes[0]!.detail).toMatch(/^timeout \(no syn-ack\) \(1 segments with a bad TCP checksum: checksum offload/);
    expect(h.probe.counters.get('segments_bad_checksum')).toBe(1);
  });

  it('a frame that cannot be sent fails the probe at once', () => {
    const h = harness({ sendOk: false });
    h.start();
    expect(h.outcomes).toEqual([{ ok: false, detail: 'send failed (port not open?)', rttMs: 0, connectMs: null }]);
    expect(h.probe.active).toBe(0);
    expect(h.timers.size).toBe(0);
  });

  it('IPv6: the same exchange', () => {
    const h = harness();
    h.start(spec6(null));
    expectFrame(h.sent[0]!.frame, out6({ seq: ISS, flags: TCP_SYN }));
    expect(dissect(h.sent[0]!.frame).all('tcp')[0]!.checksumOk).toBe(true);
    h.feed(in6({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }));
    expect(h.outcomes[0]).toMatchObject({ ok: true, detail: 'syn-ack' });
    expectFrame(h.sent[1]!.frame, out6({ seq: ISS1, flags: TCP_RST }));
  });

  it('concurrent probes on one nic use distinct local ports; each answer finds its own connection', () => {
    const h = harness();
    h.start();
    h.start({ dstPort: 8000 });
    h.start(spec6(null));
    const ports = h.sent.map((s) => dissect(s.frame).all('tcp')[0]!.srcPort);
    expect(ports).toEqual([LPORT, LPORT + 1, LPORT + 2]);
    // the answer to the second probe (port 8000) only
    h.feed(in4({ sport: 8000, dport: LPORT + 1, seq: SRV, ack: ISS1, flags: TCP_RST | TCP_ACK }));
    expect(h.outcomes).toEqual([{ ok: false, detail: 'refused', rttMs: 0, connectMs: null }]);
    // a SYN-ACK from the right port but for the wrong local port is not theirs: it gets an RST
    h.feed(in4({ sport: 80, dport: LPORT + 2, seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }));
    expect(h.outcomes).toHaveLength(1);
    expect(h.probe.counters.get('segments_no_connection')).toBe(1);
    expect(h.probe.active).toBe(2);
  });

  it('local ports wrap from 65535 to 49152 and skip ports in use', () => {
    const sent: number[] = [];
    const p = new ProbeTcp({
      send: (_n, f, len) => {
        sent.push(dissect(f.subarray(0, len)).all('tcp')[0]!.srcPort);
        return true;
      },
      macs: () => null,
      setTimer: () => 0,
      clearTimer: () => {},
      randomInt: (n) => (n === PORT_SPAN ? PORT_SPAN - 2 : 1),
    });
    for (let i = 0; i < 3; i++) p.start(spec4(), () => {});
    expect(sent).toEqual([65534, 65535, 49152]);
    // 65535 is answered (and freed), 65534 and 49152 are still in use: the next ones skip them
    p.onPacket('h1vm1', in4({ dport: 65535, seq: SRV, ack: 2, flags: TCP_RST | TCP_ACK }), 0, 40);
    for (let i = 0; i < 2; i++) p.start(spec4(), () => {});
    expect(sent.slice(3)).toEqual([49153, 49154]);
    expect(p.active).toBe(4);
  });
});

describe('probe TCP client: http probes', () => {
  const OK = 'HTTP/1.1 200 OK\r\nx-backend: h1vm1\r\ncontent-length: 2\r\n\r\nok';

  function connect(h: ReturnType<typeof harness>, path = '/health') {
    h.start({ http: { path } });
    h.feed(in4({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }));
    return ISS1 + REQ(path).length; // our next sequence number after the request
  }

  it('handshake, one request segment, 200 in one segment: success, then RST', () => {
    const h = harness();
    const next = connect(h);
    const req = REQ('/health');
    expect(Buffer.from(req).toString()).toBe(
      'GET /health HTTP/1.1\r\nHost: 192.0.2.10\r\nConnection: close\r\nUser-Agent: slbx-probe\r\n\r\n',
    );
    expectFrame(h.sent[1]!.frame, out4(IP_ID + 1, { seq: ISS1, ack: SRV + 1, flags: TCP_ACK | TCP_PSH }, req));
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK })); // the ACK of the request: nothing to do
    expect(h.sent).toHaveLength(2);
    h.advance(2);
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK | TCP_PSH }, OK));
    // the SYN-ACK came at 0 (connect), the status line at 2: one round trip vs the whole exchange
    expect(h.outcomes).toEqual([{ ok: true, detail: 'http 200', rttMs: 2, connectMs: 0 }]);
    expectFrame(h.sent[2]!.frame, out4(IP_ID + 2, { seq: next, flags: TCP_RST }));
    expect(h.probe.active).toBe(0);
  });

  it('segments that crossed our RST are dropped quietly for 3 s, then answered with an RST again', () => {
    const h = harness();
    const next = connect(h);
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK | TCP_PSH }, OK));
    expect(h.sent).toHaveLength(3);
    h.feed(in4({ seq: SRV + 1 + OK.length, ack: next, flags: TCP_ACK | TCP_FIN }));
    expect(h.sent).toHaveLength(3);
    expect(h.probe.counters.get('segments_late')).toBe(1);
    h.advance(3000);
    h.feed(in4({ seq: SRV + 1 + OK.length, ack: next, flags: TCP_ACK | TCP_FIN }));
    expectFrame(h.sent[3]!.frame, out4(IP_ID + 3, { seq: next, flags: TCP_RST }));
  });

  it('503 is a failure named after the status', () => {
    const h = harness();
    const next = connect(h);
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK | TCP_PSH | TCP_FIN }, 'HTTP/1.1 503 Service Unavailable\r\n\r\n'));
    expect(h.outcomes).toEqual([{ ok: false, detail: 'http 503', rttMs: 0, connectMs: 0 }]);
    expectFrame(h.sent[2]!.frame, out4(IP_ID + 2, { seq: next, flags: TCP_RST }));
  });

  it('a status line over several segments: each in-order segment is acknowledged until it is complete', () => {
    const h = harness();
    const next = connect(h);
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK }, 'HTTP/1.1 2'));
    expectFrame(h.sent[2]!.frame, out4(IP_ID + 2, { seq: next, ack: SRV + 11, flags: TCP_ACK }));
    h.feed(in4({ seq: SRV + 11, ack: next, flags: TCP_ACK }, '00 OK\r'));
    expectFrame(h.sent[3]!.frame, out4(IP_ID + 3, { seq: next, ack: SRV + 17, flags: TCP_ACK }));
    expect(h.outcomes).toEqual([]);
    h.feed(in4({ seq: SRV + 17, ack: next, flags: TCP_ACK }, '\nx: y\r\n'));
    expect(h.outcomes[0]).toMatchObject({ ok: true, detail: 'http 200' });
  });

  it('out-of-order data is dropped with a duplicate ACK; the retransmission completes the line', () => {
    const h = harness();
    const next = connect(h);
    h.feed(in4({ seq: SRV + 11, ack: next, flags: TCP_ACK }, '00 OK\r\n'));
    expectFrame(h.sent[2]!.frame, out4(IP_ID + 2, { seq: next, ack: SRV + 1, flags: TCP_ACK }));
    expect(h.probe.counters.get('segments_out_of_order')).toBe(1);
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK }, 'HTTP/1.1 2'));
    expect(h.outcomes).toEqual([]);
    // a duplicate of what we have: acknowledged again, nothing added
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK }, 'HTTP/1.1 2'));
    expectFrame(h.sent[4]!.frame, out4(IP_ID + 4, { seq: next, ack: SRV + 11, flags: TCP_ACK }));
    expect(h.probe.counters.get('segments_duplicate')).toBe(1);
    // a retransmission overlapping what we have: only the new bytes count
    h.feed(in4({ seq: SRV + 6, ack: next, flags: TCP_ACK }, '1.1 200 OK\r\n'));
    expect(h.outcomes[0]).toMatchObject({ ok: true, detail: 'http 200' });
  });

  it('FIN before the status line is complete: a failure', () => {
    const h = harness();
    const next = connect(h);
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK | TCP_FIN }, 'HTTP/1.1'));
    expect(h.outcomes[0]).toMatchObject({ ok: false, detail: 'closed before the status line' });
  });

  it('RST after the handshake: a failure "reset"; an RST out of the window only gets a challenge ACK', () => {
    const h = harness();
    const next = connect(h);
    h.feed(in4({ seq: SRV + 500, flags: TCP_RST }));
    expect(h.outcomes).toEqual([]);
    expectFrame(h.sent[2]!.frame, out4(IP_ID + 2, { seq: next, ack: SRV + 1, flags: TCP_ACK }));
    h.feed(in4({ seq: SRV + 1, flags: TCP_RST }));
    expect(h.outcomes[0]).toMatchObject({ ok: false, detail: 'reset' });
  });

  it('no status line within the timeout: a failure, and the half-open connection is reset', () => {
    const h = harness();
    const next = connect(h);
    h.advance(1000);
    expect(h.outcomes[0]).toMatchObject({ ok: false, detail: 'timeout (no status line)' });
    expectFrame(h.sent[2]!.frame, out4(IP_ID + 2, { seq: next, flags: TCP_RST }));
  });

  it('a retransmitted SYN-ACK (our ACK was lost) gets the request again', () => {
    const h = harness();
    connect(h);
    h.feed(in4({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }));
    expectFrame(h.sent[2]!.frame, out4(IP_ID + 2, { seq: ISS1, ack: SRV + 1, flags: TCP_ACK | TCP_PSH }, REQ('/health')));
  });

  it('a malformed status line is a failure', () => {
    const h = harness();
    const next = connect(h);
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK }, 'SSH-2.0-OpenSSH_9.2\r\n'));
    expect(h.outcomes[0]).toMatchObject({ ok: false, detail: 'bad status line' });
  });

  it('IPv6: Host in brackets, 200 is a success', () => {
    const h = harness();
    h.start({ ...spec6('/health') });
    h.feed(in6({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }));
    const req = REQ('/health', DIP6);
    expect(Buffer.from(req).toString()).toContain('\r\nHost: [2001:db8:d::10]\r\n');
    expectFrame(h.sent[1]!.frame, out6({ seq: ISS1, ack: SRV + 1, flags: TCP_ACK | TCP_PSH }, req));
    h.feed(in6({ seq: SRV + 1, ack: ISS1 + req.length, flags: TCP_ACK | TCP_PSH }, OK));
    expect(h.outcomes[0]).toMatchObject({ ok: true, detail: 'http 200' });
    expectFrame(h.sent[2]!.frame, out6({ seq: ISS1 + req.length, flags: TCP_RST }));
  });

  it('tshark decodes the exchange: checksums good, one GET of the path, the RST', (ctx) => {
    const h = harness();
    const next = connect(h);
    h.feed(in4({ seq: SRV + 1, ack: next, flags: TCP_ACK | TCP_PSH }, OK));
    const dir = mkdtempSync(join(tmpdir(), 'slbx-probe-'));
    try {
      const file = join(dir, 'probe.pcap');
      writeFileSync(
        file,
        buildPcap(
          LINKTYPE_ETHERNET,
          h.sent.map((s, i) => ({ tsUs: i * 1000, data: s.frame, origLen: s.frame.length })),
        ),
      );
      const r = spawnSync(
        'tshark',
        [
          '-r',
          file,
          '-o',
          'tcp.check_checksum:TRUE',
          '-o',
          'ip.check_checksum:TRUE',
          '-T',
          'fields',
          '-e',
          'ip.checksum.status',
          '-e',
          'tcp.checksum.status',
          '-e',
          'tcp.flags.str',
          '-e',
          'http.request.method',
          '-e',
          'http.request.uri',
        ],
        { encoding: 'utf8' },
      );
      if (r.error) skipBecause(ctx, 'tshark is not installed (apt-get install tshark)'); // under CI a failure
      expect(r.status).toBe(0);
      const rows = r.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      expect(rows.map((x) => [x[0], x[1]])).toEqual([
        ['1', '1'],
        ['1', '1'],
        ['1', '1'],
      ]); // 1 = good
      expect(rows[1]!.slice(3)).toEqual(['GET', '/health']);
      expect(rows[2]![2]).toMatch(/R/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('probe TCP client: segments for no connection', () => {
  it('a SYN to the gateway gets RST+ACK acknowledging it; an RST gets nothing; unknown nics get nothing', () => {
    const h = harness();
    h.feed(in4({ sport: 40000, dport: 22, seq: 99, flags: TCP_SYN }));
    expectFrame(
      h.sent[0]!.frame,
      pkt()
        .eth({ src: PORT_MAC, dst: NIC_MAC })
        .ipv4({ src: GW, dst: DIP, id: IP_ID, flags: IPV4_FLAG_DF })
        .tcp({ sport: 22, dport: 40000, seq: 0, ack: 100, flags: TCP_RST | TCP_ACK, window: 0 })
        .build(),
    );
    h.feed(in4({ sport: 40000, dport: 22, seq: 99, flags: TCP_RST }));
    h.feed(in4({ sport: 40000, dport: 22, seq: 99, flags: TCP_SYN }), 'h9vm9');
    expect(h.sent).toHaveLength(1);
  });

  it('non-TCP, fragments and malformed packets are counted, never answered', () => {
    const h = harness();
    h.feed(pkt().ipv4({ src: DIP, dst: GW }).icmp({ type: 8 }).build());
    h.feed(pkt().ipv4({ src: DIP, dst: GW, flags: 1 }).tcp({ sport: 80, dport: LPORT, flags: TCP_ACK }).build());
    h.feed(Buffer.from([0x45, 0, 0]));
    expect(h.sent).toHaveLength(0);
    expect(h.probe.counters.snapshot()).toMatchObject({ local_not_tcp: 1, local_fragment: 1, local_malformed: 1 });
  });

  it('random and mutated packets never throw', () => {
    const h = harness();
    const rng = new Rng(0x5eed);
    h.start({ http: { path: '/health' } });
    const seeds = [
      in4({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }),
      in4({ seq: SRV + 1, ack: ISS1, flags: TCP_ACK }, 'HTTP/1.1 200 OK\r\n'),
      in6({ seq: SRV, ack: ISS1, flags: TCP_SYN | TCP_ACK }),
    ];
    for (let i = 0; i < 5000; i++) {
      const b = i % 3 === 0 ? rng.bytes(rng.int(120)) : mutate(rng, rng.pick(seeds));
      expect(() => h.probe.onPacket('h1vm1', b, 0, b.length)).not.toThrow();
    }
  });
});

describe('status line parsing', () => {
  const t = (s: string) => parseStatusLine(Buffer.from(s, 'latin1'), Buffer.byteLength(s, 'latin1'));
  it.each([
    ['HTTP/1.1 200 OK\r\n', 200],
    ['HTTP/1.0 404 Not Found\r\n', 404],
    ['HTTP/1.1 200\r\n', 200],
    ['HTTP/1.1 503 x\n', 503],
    ['HTTP/1.1 200 OK', -1],
    ['', -1],
    ['HTTP/2 200\r\n', -2],
    ['HTTP/1.1 20 OK\r\n', -2],
    ['hello\r\n', -2],
  ] as const)('%j -> %i', (s, want) => expect(t(s)).toBe(want));
  it('gives up on a line longer than 4 KB', () => {
    expect(t('HTTP/1.1 200 '.padEnd(4096, 'x'))).toBe(-2);
  });
});
