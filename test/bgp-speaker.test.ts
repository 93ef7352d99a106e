// The MUX's BGP speaker runtime (mux/bgp/speaker.ts) against a scripted peer on loopback (no root
// needed): the session comes up, routes are announced and withdrawn as differences, a graceful stop
// withdraws and sends Cease; a malformed OPEN or UPDATE from the peer gets the NOTIFICATION RFC 4271 6
// names (or, for RFC 7606 treat-as-withdraw, none), never a crash; a dropped session reconnects.
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type Server, type Socket } from 'node:net';
import { ip } from '../shared/addr.js';
import {
  BGP_TYPE_KEEPALIVE,
  BGP_TYPE_NOTIFICATION,
  BGP_TYPE_OPEN,
  BGP_TYPE_UPDATE,
  encodeBgpKeepalive,
  newBgpHeader,
  newBgpNotification,
  parseBgpHeader,
  parseBgpNotification,
  parseBgpShutdownData,
} from '../shared/bgp-message.js';
import { BGP_IPV4_UNICAST, BGP_IPV6_UNICAST, encodeBgpOpen, newBgpOpen, newBgpOpenRecord, parseBgpOpen } from '../shared/bgp-open.js';
import {
  bgpAsPathAttr,
  bgpNextHopAttr,
  bgpOriginAttr,
  BGP_AS_SEQUENCE,
  encodeBgpUpdate,
  formatBgpPrefix,
  hostPrefix,
  isBgpEndOfRib,
  newBgpUpdate,
  parseBgpUpdate,
} from '../shared/bgp-update.js';
import { BgpSpeaker, type BgpRoute } from '../mux/bgp/speaker.js';

interface Msg {
  type: number;
  bytes: Buffer;
}

/** A scripted BGP peer: accepts connections, splits what it receives into messages. */
class FakePeer {
  server: Server;
  conns: Socket[] = [];
  msgs: Msg[][] = [];
  closed: boolean[] = [];
  port = 0;
  private waiters: (() => void)[] = [];
  constructor() {
    this.server = createServer((s) => {
      const i = this.conns.length;
      this.conns.push(s);
      this.msgs.push([]);
      this.closed.push(false);
      let buf = Buffer.alloc(0);
      s.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        for (;;) {
          const h = newBgpHeader();
          if (parseBgpHeader(buf, 0, h) < 0 || buf.length < h.length) break;
          this.msgs[i]!.push({ type: h.type, bytes: buf.subarray(0, h.length) });
          buf = buf.subarray(h.length);
        }
        this.wake();
      });
      s.on('close', () => {
        this.closed[i] = true;
        this.wake();
      });
      s.on('error', () => {});
      this.wake();
    });
  }
  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
  async listen(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as { port: number }).port;
  }
  /** Resolves when cond() holds (checked on every event), or rejects after ms. */
  until(cond: () => boolean, ms = 3000, what = 'condition'): Promise<void> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timeout waiting for ${what}`)), ms);
      const check = () => {
        if (cond()) {
          clearTimeout(t);
          resolve();
        } else this.waiters.push(check);
      };
      check();
    });
  }
  of(conn: number, type: number): Msg[] {
    return (this.msgs[conn] ?? []).filter((m) => m.type === type);
  }
  send(conn: number, b: Uint8Array): void {
    this.conns[conn]!.write(b);
  }
  async close(): Promise<void> {
    for (const s of this.conns) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const peerOpen = (o: Partial<{ asn: number; holdTimeS: number; bgpId: number }> = {}) =>
  encodeBgpOpen(
    newBgpOpen({
      asn: o.asn ?? 65000,
      holdTimeS: o.holdTimeS ?? 3,
      bgpId: o.bgpId ?? ip('198.18.0.1').words[0]!,
      families: [BGP_IPV4_UNICAST, BGP_IPV6_UNICAST],
    }),
  );
const routes: BgpRoute[] = [
  { prefix: hostPrefix(ip('203.0.113.10')), nextHop: ip('198.18.0.11') },
  { prefix: hostPrefix(ip('2001:db8:ff::10')), nextHop: ip('2001:db8:f::11') },
];
const notif = (m: Msg) => {
  const n = newBgpNotification();
  parseBgpNotification(m.bytes, 0, n);
  return n;
};
const upd = (m: Msg) => {
  const u = newBgpUpdate();
  parseBgpUpdate(m.bytes, 0, u);
  return u;
};

let peer: FakePeer;
let speaker: BgpSpeaker;
let logs: { event: string; fields: Record<string, unknown> }[];

async function setup(o: { holdTimeS?: number } = {}): Promise<void> {
  peer = new FakePeer();
  await peer.listen();
  logs = [];
  speaker = new BgpSpeaker({
    peerAddress: '127.0.0.1',
    peerPort: peer.port,
    peerAs: 65000,
    localAddress: '127.0.0.1',
    asn: 65001,
    bgpId: ip('198.18.0.11').words[0]!,
    holdTimeS: o.holdTimeS ?? 3,
    keepaliveS: 1,
    reconnectMinMs: 100,
    reconnectMaxMs: 400,
    families: [BGP_IPV4_UNICAST, BGP_IPV6_UNICAST],
    shutdownMessage: 'unit test stop',
    log: (_l, event, fields) => logs.push({ event, fields }),
  });
  speaker.setRoutes(routes);
  speaker.start();
  await peer.until(() => peer.of(0, BGP_TYPE_OPEN).length === 1, 3000, "the speaker's OPEN");
}

async function establish(conn = 0): Promise<void> {
  peer.send(conn, peerOpen());
  peer.send(conn, encodeBgpKeepalive());
  await peer.until(() => speaker.state === 'Established', 3000, 'Established');
  await peer.until(() => peer.of(conn, BGP_TYPE_UPDATE).length >= 4, 3000, 'announcements and End-of-RIB');
}

afterEach(async () => {
  await speaker?.stop();
  await peer?.close();
});

describe('BGP speaker against a scripted peer on loopback', () => {
  it('opens with AS, hold time and capabilities; announces each VIP once Established, then End-of-RIB', async () => {
    await setup();
    const o = newBgpOpenRecord();
    expect(parseBgpOpen(peer.of(0, BGP_TYPE_OPEN)[0]!.bytes, 0, o)).toBeGreaterThan(0);
    expect([o.myAs, o.as4, o.holdTimeS, o.families.length]).toEqual([65001, 65001, 3, 2]);
    expect(speaker.state).toBe('OpenSent');
    await establish();
    const ups = peer.of(0, BGP_TYPE_UPDATE).map(upd);
    expect(ups.flatMap((u) => u.nlri.map(formatBgpPrefix))).toEqual(['203.0.113.10/32']);
    expect(ups.flatMap((u) => u.mpReach?.nlri?.map(formatBgpPrefix) ?? [])).toEqual(['2001:db8:ff::10/128']);
    expect(ups.find((u) => u.nlri.length > 0)!.asPath).toEqual([{ type: BGP_AS_SEQUENCE, asns: [65001] }]);
    expect(ups.filter(isBgpEndOfRib).length).toBe(2);
    expect(peer.of(0, BGP_TYPE_KEEPALIVE).length).toBeGreaterThanOrEqual(1);
    expect(logs.some((l) => l.event === 'bgp_state' && l.fields.to === 'Established')).toBe(true);
  });

  it('sends only differences: a withdrawn VIP, a re-announced one; a graceful stop withdraws all and sends Cease', async () => {
    await setup();
    await establish();
    const before = peer.of(0, BGP_TYPE_UPDATE).length;
    speaker.setRoutes([routes[1]!]);
    speaker.setRoutes([routes[1]!]); // the same again: nothing to send
    await peer.until(() => peer.of(0, BGP_TYPE_UPDATE).length === before + 1, 2000, 'the withdrawal');
    expect(upd(peer.of(0, BGP_TYPE_UPDATE)[before]!).withdrawn.map(formatBgpPrefix)).toEqual(['203.0.113.10/32']);
    speaker.setRoutes(routes);
    await peer.until(() => peer.of(0, BGP_TYPE_UPDATE).length === before + 2, 2000, 'the re-announcement');
    await speaker.stop();
    await peer.until(() => peer.closed[0] === true, 2000, 'the close');
    const ups = peer
      .of(0, BGP_TYPE_UPDATE)
      .slice(before + 2)
      .map(upd);
    expect(
      ups
        .flatMap((u) => [...u.withdrawn, ...(u.mpUnreach?.withdrawn ?? [])])
        .map(formatBgpPrefix)
        .sort(),
    ).toEqual(['2001:db8:ff::10/128', '203.0.113.10/32']);
    const n = notif(peer.of(0, BGP_TYPE_NOTIFICATION)[0]!);
    expect([n.code, n.subcode, parseBgpShutdownData(n.data)]).toEqual([6, 2, 'unit test stop']);
    // the NOTIFICATION comes after the withdrawals
    const all = peer.msgs[0]!;
    expect(all.findIndex((m) => m.type === BGP_TYPE_NOTIFICATION)).toBe(all.length - 1);
  });

  // [what, what the peer sends instead of its OPEN (or after Established), expected code/subcode, data hex]
  const bad: [string, () => Uint8Array, boolean, number, number, string][] = [
    [
      'OPEN with version 3',
      () => {
        const b = Buffer.from(peerOpen());
        b[19] = 3;
        return b;
      },
      false,
      2,
      1,
      '0004',
    ],
    ['OPEN from the wrong AS', () => peerOpen({ asn: 65002 }), false, 2, 2, ''],
    ['OPEN with hold time 2', () => peerOpen({ holdTimeS: 2 }), false, 2, 6, ''],
    ['OPEN with BGP Identifier 0', () => peerOpen({ bgpId: 0 }), false, 2, 3, ''],
    [
      'a message with a broken marker',
      () => {
        const b = Buffer.from(peerOpen());
        b[0] = 0;
        return b;
      },
      false,
      1,
      1,
      '',
    ],
    [
      'a message of type 9',
      () => {
        const b = Buffer.from(encodeBgpKeepalive());
        b[18] = 9;
        return b;
      },
      false,
      1,
      3,
      '09',
    ],
    ['an UPDATE before the OPEN', () => encodeBgpUpdate({ withdrawn: [], attributes: [], nlri: [] }), false, 5, 1, ''],
    [
      'an UPDATE with a 33-bit NLRI prefix',
      () => {
        const b = Buffer.from(
          encodeBgpUpdate({
            withdrawn: [],
            attributes: [bgpOriginAttr(0), bgpAsPathAttr([{ type: 2, asns: [65000] }], 4), bgpNextHopAttr(ip('198.18.0.1'))],
            nlri: [hostPrefix(ip('198.51.100.0'))],
          }),
        );
        b[b.length - 5] = 33;
        return b;
      },
      true,
      3,
      10,
      '',
    ],
    [
      'an UPDATE with an unrecognized well-known attribute',
      () => encodeBgpUpdate({ withdrawn: [], attributes: [{ flags: 0x40, type: 77, value: Uint8Array.of(1) }], nlri: [] }),
      true,
      3,
      2,
      '404d0101',
    ],
    ['an OPEN when Established', () => peerOpen(), true, 5, 3, ''],
  ];
  it.each(bad)(
    'answers %s with the NOTIFICATION RFC 4271 names, closes, and reconnects',
    async (_what, msg, afterUp, code, subcode, data) => {
      await setup();
      if (afterUp) await establish();
      peer.send(0, msg());
      await peer.until(() => peer.closed[0] === true, 3000, 'the close');
      const ns = peer.of(0, BGP_TYPE_NOTIFICATION).map(notif);
      expect(ns.length).toBe(1);
      expect([ns[0]!.code, ns[0]!.subcode, Buffer.from(ns[0]!.data).toString('hex')]).toEqual([code, subcode, data]);
      expect(logs.some((l) => l.event === 'bgp_notification_sent' && l.fields.code === code)).toBe(true);
      // back-off, then a new connection with a new OPEN
      await peer.until(() => peer.of(1, BGP_TYPE_OPEN).length === 1, 3000, 'the reconnection');
    },
  );

  it('treat-as-withdraw (RFC 7606): a malformed ORIGIN is logged, no NOTIFICATION, the session stays up', async () => {
    await setup();
    await establish();
    peer.send(
      0,
      encodeBgpUpdate({
        withdrawn: [],
        attributes: [
          { flags: 0x40, type: 1, value: Uint8Array.of(7) },
          bgpAsPathAttr([{ type: 2, asns: [65000] }], 4),
          bgpNextHopAttr(ip('198.18.0.1')),
        ],
        nlri: [hostPrefix(ip('198.51.100.7'))],
      }),
    );
    await peer.until(() => logs.some((l) => l.event === 'bgp_update_error'), 2000, 'the log line');
    const l = logs.find((x) => x.event === 'bgp_update_error')!;
    expect(l.fields).toMatchObject({
      error: 'invalid_origin_attribute',
      handling: 'treat-as-withdraw',
      rfc4271: 'UPDATE Message Error / Invalid ORIGIN Attribute',
    });
    peer.send(0, encodeBgpKeepalive());
    await new Promise((r) => setTimeout(r, 300));
    expect(speaker.state).toBe('Established');
    expect(peer.of(0, BGP_TYPE_NOTIFICATION).length).toBe(0);
    expect(peer.closed[0]).toBe(false);
  });

  it('a peer that goes silent is dropped at the hold time with Hold Timer Expired', async () => {
    await setup({ holdTimeS: 3 });
    await establish();
    const t0 = Date.now();
    await peer.until(() => peer.closed[0] === true, 5000, 'the hold timer');
    const took = Date.now() - t0;
    expect(took).toBeGreaterThan(2500);
    expect(took).toBeLessThan(3600);
    expect(notif(peer.of(0, BGP_TYPE_NOTIFICATION)[0]!).code).toBe(4);
  }, 10_000);

  it('a peer that closes the connection: the session goes down and comes back after the back-off', async () => {
    await setup();
    await establish();
    peer.conns[0]!.destroy();
    await peer.until(() => peer.of(1, BGP_TYPE_OPEN).length === 1, 3000, 'the reconnection');
    await establish(1);
    expect(
      peer
        .of(1, BGP_TYPE_UPDATE)
        .map(upd)
        .flatMap((u) => u.nlri.map(formatBgpPrefix)),
    ).toEqual(['203.0.113.10/32']);
    expect(logs.filter((l) => l.event === 'bgp_state' && l.fields.to === 'Established').length).toBe(2);
  });
});
