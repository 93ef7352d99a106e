// The BGP-4 codec (shared/bgp-*.ts): golden vectors from a real session between two BIRD 2 daemons
// (test/fixtures/make-bgp-golden.sh wrote bgp-golden.pcap and tshark's decode bgp-golden.tsv), round
// trips byte for byte, non-zero offsets, the NOTIFICATION code/subcode RFC 4271 6 names and the RFC 7606
// handling for malformed messages, and random bytes (never a throw).
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ip } from '../shared/addr.js';
import { ERR_TRUNCATED } from '../shared/codec-error.js';
import { readPcap } from '../shared/pcap-file.js';
import { dissect } from '../shared/dissect.js';
import {
  BGP_ERR_ATTRIBUTE_FLAGS,
  BGP_ERR_ATTRIBUTE_LENGTH,
  BGP_ERR_BAD_BGP_ID,
  BGP_ERR_BAD_MESSAGE_LENGTH,
  BGP_ERR_BAD_MESSAGE_TYPE,
  BGP_ERR_BAD_PEER_AS,
  BGP_ERR_INVALID_NETWORK_FIELD,
  BGP_ERR_INVALID_NEXT_HOP,
  BGP_ERR_INVALID_ORIGIN,
  BGP_ERR_MALFORMED_AS_PATH,
  BGP_ERR_MALFORMED_ATTRIBUTE_LIST,
  BGP_ERR_MISSING_WELL_KNOWN,
  BGP_ERR_NOT_SYNCHRONIZED,
  BGP_ERR_OPEN_MALFORMED,
  BGP_ERR_OPTIONAL_ATTRIBUTE,
  BGP_ERR_UNACCEPTABLE_HOLD_TIME,
  BGP_ERR_UNRECOGNIZED_WELL_KNOWN,
  BGP_ERR_UNSUPPORTED_OPT_PARAM,
  BGP_ERR_UNSUPPORTED_VERSION,
  BGP_TYPE_KEEPALIVE,
  BGP_TYPE_NOTIFICATION,
  BGP_TYPE_OPEN,
  BGP_TYPE_UPDATE,
  bgpErrorName,
  bgpErrorNotification,
  bgpHeaderErrorData,
  bgpNotificationName,
  bgpShutdownData,
  encodeBgpKeepalive,
  encodeBgpNotification,
  newBgpHeader,
  newBgpNotification,
  parseBgpHeader,
  parseBgpNotification,
  parseBgpShutdownData,
  writeBgpNotification,
} from '../shared/bgp-message.js';
import {
  BGP_AS_TRANS,
  BGP_IPV4_UNICAST,
  BGP_IPV6_UNICAST,
  bgpOpenErrorData,
  bgpOpenPeerAs,
  checkBgpOpen,
  commonFamilies,
  encodeBgpOpen,
  negotiateHoldTime,
  newBgpOpen,
  newBgpOpenRecord,
  parseBgpOpen,
  writeBgpOpen,
} from '../shared/bgp-open.js';
import {
  BGP_ATTR_AS_PATH,
  BGP_ATTR_MP_REACH_NLRI,
  BGP_ATTR_NEXT_HOP,
  BGP_ATTR_ORIGIN,
  BGP_AS_SEQUENCE,
  BGP_ORIGIN_IGP,
  bgpAsPathAttr,
  bgpMpReachAttr,
  bgpNextHopAttr,
  bgpOriginAttr,
  buildBgpAnnouncements,
  buildBgpEndOfRib,
  buildBgpWithdrawals,
  encodeBgpUpdate,
  formatBgpPrefix,
  hostPrefix,
  isBgpEndOfRib,
  newBgpUpdate,
  parseAsPath,
  parseBgpUpdate,
  writeBgpUpdate,
  type BgpAttribute,
  type BgpUpdate,
} from '../shared/bgp-update.js';
import { Rng, mutate } from './helpers/random.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const unhex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ''), 'hex'));

interface GoldenMessage {
  frame: number;
  src: string;
  bytes: Uint8Array;
}

/** The BGP messages of the golden capture, each with the frame in which it completed (as tshark counts). */
function goldenMessages(): GoldenMessage[] {
  const file = readPcap(readFileSync(fixture('bgp-golden.pcap')));
  if (typeof file === 'number') throw new Error('bgp-golden.pcap is not a pcap');
  const streams = new Map<string, { buf: Buffer; nextSeq: number | null }>();
  const out: GoldenMessage[] = [];
  file.packets.forEach((p, i) => {
    const d = dissect(p.data, file.linkType);
    const ipl = d.layers.find((l) => l.layer === 'ipv4') as { src: string; dst: string } | undefined;
    const tcp = d.first('tcp');
    if (ipl === undefined || tcp === undefined || tcp.payloadLen === 0) return;
    const key = `${ipl.src}:${tcp.srcPort}>${ipl.dst}:${tcp.dstPort}`;
    const s = streams.get(key) ?? { buf: Buffer.alloc(0), nextSeq: null };
    if (s.nextSeq !== null && tcp.seq !== s.nextSeq) return; // a retransmission: already have it
    s.nextSeq = (tcp.seq + tcp.payloadLen) >>> 0;
    s.buf = Buffer.concat([s.buf, p.data.subarray(tcp.payloadOff, tcp.payloadOff + tcp.payloadLen)]);
    for (;;) {
      const h = newBgpHeader();
      const r = parseBgpHeader(s.buf, 0, h);
      if (r < 0 || s.buf.length < h.length) break;
      out.push({ frame: i + 1, src: ipl.src, bytes: Uint8Array.from(s.buf.subarray(0, h.length)) });
      s.buf = s.buf.subarray(h.length);
    }
    streams.set(key, s);
  });
  return out;
}

function tsv(): Map<number, Record<string, string>> {
  const lines = readFileSync(fixture('bgp-golden.tsv'), 'utf8').trimEnd().split('\n');
  const cols = lines[0]!.split('\t');
  const rows = new Map<number, Record<string, string>>();
  for (const l of lines.slice(1)) {
    const f = l.split('\t');
    rows.set(Number(f[0]), Object.fromEntries(cols.map((c, i) => [c, f[i] ?? ''])));
  }
  return rows;
}

const typeOf = (m: Uint8Array) => m[18]!;
const parseU = (m: Uint8Array, opts = { as4: true }) => {
  const u = newBgpUpdate();
  const r = parseBgpUpdate(m, 0, u, m.length, opts);
  return { r, u };
};

describe('golden: a BIRD 2 session captured by tcpdump, decoded like tshark does', () => {
  const msgs = goldenMessages();
  const rows = tsv();

  it('finds every BGP message tshark found, in the same frames, with the same types and lengths', () => {
    expect(msgs.length).toBeGreaterThan(15);
    const byFrame = new Map<number, GoldenMessage[]>();
    for (const m of msgs) byFrame.set(m.frame, [...(byFrame.get(m.frame) ?? []), m]);
    expect([...byFrame.keys()]).toEqual([...rows.keys()]);
    for (const [frame, list] of byFrame) {
      const row = rows.get(frame)!;
      expect(list.map((m) => typeOf(m.bytes)).join(','), `frame ${frame}`).toBe(row['bgp.type']);
      expect(list.map((m) => m.bytes.length).join(','), `frame ${frame}`).toBe(row['bgp.length']);
      expect(list[0]!.src).toBe(row['ip.src']);
    }
    const kinds = new Set(msgs.map((m) => typeOf(m.bytes)));
    for (const t of [BGP_TYPE_OPEN, BGP_TYPE_UPDATE, BGP_TYPE_NOTIFICATION, BGP_TYPE_KEEPALIVE]) expect(kinds).toContain(t);
  });

  it('OPEN: My AS, hold time, identifier, capabilities (multiprotocol IPv4/IPv6, 4-octet AS) as tshark reads them', () => {
    const opens = msgs.filter((m) => typeOf(m.bytes) === BGP_TYPE_OPEN);
    expect(opens.length).toBe(2);
    for (const m of opens) {
      const row = rows.get(m.frame)!;
      const o = newBgpOpenRecord();
      expect(parseBgpOpen(m.bytes, 0, o)).toBe(m.bytes.length);
      expect(String(o.myAs)).toBe(row['bgp.open.myas']);
      expect(String(o.holdTimeS)).toBe(row['bgp.open.holdtime']);
      expect(ip(row['bgp.open.identifier']!).words[0]).toBe(o.bgpId);
      expect(o.capabilities.map((c) => c.code).join(',')).toBe(row['bgp.cap.type']);
      expect(String(o.as4)).toBe(row['bgp.cap.4as']);
      expect(o.families.map((f) => f.afi).join(',')).toBe(row['bgp.cap.mp.afi']);
      expect(checkBgpOpen(o, { peerAs: o.as4! })).toBe(0);
      expect(commonFamilies([BGP_IPV4_UNICAST, BGP_IPV6_UNICAST], o)).toEqual([BGP_IPV4_UNICAST, BGP_IPV6_UNICAST]);
    }
  });

  it('UPDATE: attributes, AS path, next hops, MED, communities, NLRI, MP_REACH/MP_UNREACH, withdrawals as tshark reads them', () => {
    const byFrame = new Map<number, BgpUpdate[]>();
    for (const m of msgs.filter((x) => typeOf(x.bytes) === BGP_TYPE_UPDATE)) {
      const { r, u } = parseU(m.bytes);
      expect(r, `frame ${m.frame}`).toBe(m.bytes.length);
      expect(u.error).toBeNull();
      byFrame.set(m.frame, [...(byFrame.get(m.frame) ?? []), u]);
    }
    let sawV4 = 0;
    let sawV6 = 0;
    let sawW4 = 0;
    let sawW6 = 0;
    for (const [frame, us] of byFrame) {
      const row = rows.get(frame)!;
      const all = <T>(f: (u: BgpUpdate) => T[]) => us.flatMap(f);
      expect(all((u) => u.attributes.map((a) => a.type)).join(','), `frame ${frame}`).toBe(row['bgp.update.path_attribute.type_code']);
      expect(all((u) => (u.origin === null ? [] : [u.origin])).join(',')).toBe(row['bgp.update.path_attribute.origin']);
      expect(all((u) => (u.asPath ?? []).flatMap((s) => s.asns)).join(',')).toBe(row['bgp.update.path_attribute.as_path_segment.as4']);
      expect(all((u) => (u.nextHop === null ? [] : [u.nextHop.text])).join(',')).toBe(row['bgp.update.path_attribute.next_hop']);
      expect(all((u) => (u.med === null ? [] : [u.med])).join(',')).toBe(row['bgp.update.path_attribute.multi_exit_disc']);
      expect(all((u) => u.nlri.map((p) => p.addr.text)).join(',')).toBe(row['bgp.nlri_prefix']);
      expect(all((u) => u.withdrawn.map((p) => p.addr.text)).join(',')).toBe(row['bgp.withdrawn_prefix']);
      expect(all((u) => (u.mpReach?.nextHops[0] ? [u.mpReach.nextHops[0].text] : [])).join(',')).toBe(
        row['bgp.update.path_attribute.mp_reach_nlri.next_hop.ipv6'],
      );
      expect(all((u) => (u.mpReach?.nextHops[1] ? [u.mpReach.nextHops[1].text] : [])).join(',')).toBe(
        row['bgp.update.path_attribute.mp_reach_nlri.next_hop.ipv6.link_local'],
      );
      expect(all((u) => (u.mpReach?.nlri ?? []).map((p) => p.addr.text)).join(',')).toBe(row['bgp.mp_reach_nlri_ipv6_prefix']);
      expect(all((u) => (u.mpUnreach?.withdrawn ?? []).map((p) => p.addr.text)).join(',')).toBe(row['bgp.mp_unreach_nlri_ipv6_prefix']);
      const comm = all((u) => u.attributes.filter((a) => a.type === 8).flatMap((a) => [(a.value[0]! << 8) | a.value[1]!]));
      expect(comm.join(',')).toBe(row['bgp.update.path_attribute.community_as']);
      sawV4 += all((u) => u.nlri).length;
      sawV6 += all((u) => u.mpReach?.nlri ?? []).length;
      sawW4 += all((u) => u.withdrawn).length;
      sawW6 += all((u) => u.mpUnreach?.withdrawn ?? []).length;
    }
    expect([sawV4, sawV6, sawW4, sawW6]).toEqual([3, 2, 3, 2]);
  });

  it("NOTIFICATION: Cease / Administrative Shutdown with BIRD's shutdown communication (RFC 9003)", () => {
    const m = msgs.find((x) => typeOf(x.bytes) === BGP_TYPE_NOTIFICATION)!;
    const row = rows.get(m.frame)!;
    const n = newBgpNotification();
    expect(parseBgpNotification(m.bytes, 0, n)).toBe(m.bytes.length);
    expect(String(n.code)).toBe(row['bgp.notify.major_error']);
    expect(String(n.subcode)).toBe(row['bgp.notify.minor_error_cease']);
    expect(parseBgpShutdownData(n.data)).toBe(row['bgp.notify.communication']);
    expect(bgpNotificationName(n.code, n.subcode)).toBe('Cease / Administrative Shutdown');
    // our encoder writes the same bytes for the same message
    expect(hex(encodeBgpNotification({ code: 6, subcode: 2, data: bgpShutdownData(row['bgp.notify.communication']!) }))).toBe(hex(m.bytes));
  });

  it('every message writes back byte for byte from what was parsed', () => {
    for (const m of msgs) {
      const b = m.bytes;
      const out = new Uint8Array(b.length + 10);
      let n: number;
      switch (typeOf(b)) {
        case BGP_TYPE_OPEN: {
          const o = newBgpOpenRecord();
          parseBgpOpen(b, 0, o);
          n = writeBgpOpen(o, out, 3);
          break;
        }
        case BGP_TYPE_UPDATE: {
          const { u } = parseU(b);
          n = writeBgpUpdate(u, out, 3);
          break;
        }
        case BGP_TYPE_NOTIFICATION: {
          const x = newBgpNotification();
          parseBgpNotification(b, 0, x);
          n = writeBgpNotification(x, out, 3);
          break;
        }
        default:
          n = encodeBgpKeepalive().length;
          out.set(encodeBgpKeepalive(), 3);
      }
      expect(n, `frame ${m.frame}`).toBe(b.length);
      expect(hex(out.subarray(3, 3 + n)), `frame ${m.frame} type ${typeOf(b)}`).toBe(hex(b));
    }
  });

  it('our End-of-RIB markers and KEEPALIVE are the bytes BIRD sends', () => {
    const eor4 = msgs.find((m) => typeOf(m.bytes) === BGP_TYPE_UPDATE && m.bytes.length === 23)!;
    const eor6 = msgs.find(
      (m) => typeOf(m.bytes) === BGP_TYPE_UPDATE && m.bytes.length === 29 && parseU(m.bytes).u.mpUnreach?.withdrawn?.length === 0,
    )!;
    expect(hex(buildBgpEndOfRib(4))).toBe(hex(eor4.bytes));
    expect(hex(buildBgpEndOfRib(6))).toBe(hex(eor6.bytes));
    expect(isBgpEndOfRib(parseU(eor4.bytes).u)).toBe(true);
    expect(isBgpEndOfRib(parseU(eor6.bytes).u)).toBe(true);
    const ka = msgs.find((m) => typeOf(m.bytes) === BGP_TYPE_KEEPALIVE)!;
    expect(hex(encodeBgpKeepalive())).toBe(hex(ka.bytes));
  });

  it('parses every message at a non-zero offset inside a larger buffer, bounded by `end`', () => {
    for (const m of msgs) {
      const big = new Uint8Array(m.bytes.length + 40).fill(0xff);
      big.set(m.bytes, 17);
      const end = 17 + m.bytes.length;
      const h = newBgpHeader();
      expect(parseBgpHeader(big, 17, h, end)).toBe(19);
      expect(h.length).toBe(m.bytes.length);
      if (typeOf(m.bytes) === BGP_TYPE_UPDATE) {
        const a = newBgpUpdate();
        const b = newBgpUpdate();
        expect(parseBgpUpdate(big, 17, a, end)).toBe(m.bytes.length);
        parseBgpUpdate(m.bytes, 0, b);
        expect(a).toEqual(b);
        expect(parseBgpUpdate(big, 17, newBgpUpdate(), end - 1)).toBe(ERR_TRUNCATED);
      }
      if (typeOf(m.bytes) === BGP_TYPE_OPEN) {
        const a = newBgpOpenRecord();
        expect(parseBgpOpen(big, 17, a, end)).toBe(m.bytes.length);
        expect(parseBgpOpen(big, 17, newBgpOpenRecord(), end - 1)).toBe(ERR_TRUNCATED);
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe('what slbx sends', () => {
  it('OPEN: version 4, hold time, identifier, multiprotocol per family and 4-octet AS; AS_TRANS for a 4-octet AS', () => {
    const o = newBgpOpen({ asn: 65001, holdTimeS: 3, bgpId: ip('198.18.0.11').words[0]!, families: [BGP_IPV4_UNICAST, BGP_IPV6_UNICAST] });
    const b = encodeBgpOpen(o);
    expect(hex(b)).toBe(
      `${'ff'.repeat(16)}0031 01 04 fde9 0003 c612000b 14 0212 0104 00010001 0104 00020001 4104 0000fde9`.replace(/ /g, ''),
    );
    const p = newBgpOpenRecord();
    expect(parseBgpOpen(b, 0, p)).toBe(b.length);
    expect([p.myAs, p.as4, p.holdTimeS, bgpOpenPeerAs(p)]).toEqual([65001, 65001, 3, 65001]);
    const big = newBgpOpen({ asn: 4200000001, holdTimeS: 9, bgpId: 1, families: [BGP_IPV4_UNICAST] });
    expect(big.myAs).toBe(BGP_AS_TRANS);
    const q = newBgpOpenRecord();
    parseBgpOpen(encodeBgpOpen(big), 0, q);
    expect(bgpOpenPeerAs(q)).toBe(4200000001);
    expect(checkBgpOpen(q, { peerAs: 4200000001 })).toBe(0);
    expect(negotiateHoldTime(3, 90)).toBe(3);
  });

  it('announcements: IPv4 in NLRI with ORIGIN IGP, AS_PATH [asn], NEXT_HOP; IPv6 in MP_REACH_NLRI first (RFC 7606 5.1)', () => {
    const [v4] = buildBgpAnnouncements(4, [hostPrefix(ip('203.0.113.10'))], [ip('198.18.0.11')], {
      origin: BGP_ORIGIN_IGP,
      asPath: [65001],
      as4: true,
    });
    expect(hex(v4!)).toBe(
      `${'ff'.repeat(16)}0030 02 0000 0014 400101 00 400206 0201 0000fde9 400304 c612000b 20cb00710a`.replace(/ /g, ''),
    );
    const { r, u } = parseU(v4!);
    expect(r).toBe(v4!.length);
    expect([u.origin, u.asPath, u.nextHop?.text, u.nlri.map(formatBgpPrefix), u.error]).toEqual([
      0,
      [{ type: BGP_AS_SEQUENCE, asns: [65001] }],
      '198.18.0.11',
      ['203.0.113.10/32'],
      null,
    ]);
    const [v6] = buildBgpAnnouncements(6, [hostPrefix(ip('2001:db8:ff::10'))], [ip('2001:db8:f::11')], {
      origin: BGP_ORIGIN_IGP,
      asPath: [65001],
      as4: true,
    });
    const p6 = parseU(v6!);
    expect(p6.u.attributes.map((a) => a.type)).toEqual([BGP_ATTR_MP_REACH_NLRI, BGP_ATTR_ORIGIN, BGP_ATTR_AS_PATH]);
    expect(p6.u.mpReach?.nextHops.map((a) => a.text)).toEqual(['2001:db8:f::11']);
    expect(p6.u.mpReach?.nlri?.map(formatBgpPrefix)).toEqual(['2001:db8:ff::10/128']);
    expect(p6.u.error).toBeNull();
    // a 2-octet-AS peer gets AS_TRANS in AS_PATH and the real path in AS4_PATH (RFC 6793 4.2.2)
    const [old] = buildBgpAnnouncements(4, [hostPrefix(ip('203.0.113.10'))], [ip('198.18.0.11')], {
      origin: BGP_ORIGIN_IGP,
      asPath: [4200000001],
      as4: false,
    });
    const po = parseU(old!, { as4: false });
    expect(po.u.asPath).toEqual([{ type: BGP_AS_SEQUENCE, asns: [BGP_AS_TRANS] }]);
    expect(parseAsPath(po.u.attributes.find((a) => a.type === 17)!.value, 4)).toEqual([{ type: BGP_AS_SEQUENCE, asns: [4200000001] }]);
  });

  it('splits many VIPs into UPDATEs of at most 4096 bytes, and withdraws them the same way', () => {
    const v4 = Array.from({ length: 2000 }, (_, i) => hostPrefix(ip(`198.19.${i >> 8}.${i & 255}`)));
    const ann = buildBgpAnnouncements(4, v4, [ip('198.18.0.11')], { origin: 0, asPath: [65001], as4: true });
    expect(ann.length).toBeGreaterThan(1);
    const back = ann.flatMap((m) => {
      expect(m.length).toBeLessThanOrEqual(4096);
      return parseU(m).u.nlri.map(formatBgpPrefix);
    });
    expect(back).toEqual(v4.map(formatBgpPrefix));
    const v6 = Array.from({ length: 600 }, (_, i) => hostPrefix(ip(`2001:db8:ff::${i.toString(16)}`)));
    const ann6 = buildBgpAnnouncements(6, v6, [ip('2001:db8:f::11')], { origin: 0, asPath: [65001], as4: true });
    expect(
      ann6.flatMap((m) => {
        expect(m.length).toBeLessThanOrEqual(4096);
        return parseU(m).u.mpReach!.nlri!.map(formatBgpPrefix);
      }),
    ).toEqual(v6.map(formatBgpPrefix));
    const wd = buildBgpWithdrawals(6, v6);
    expect(wd.flatMap((m) => parseU(m).u.mpUnreach!.withdrawn!.map(formatBgpPrefix))).toEqual(v6.map(formatBgpPrefix));
    const wd4 = buildBgpWithdrawals(4, v4);
    expect(wd4.flatMap((m) => parseU(m).u.withdrawn.map(formatBgpPrefix))).toEqual(v4.map(formatBgpPrefix));
  });
});

// ---------------------------------------------------------------------------------------------
// Malformed input: the NOTIFICATION RFC 4271 section 6 names, and RFC 7606's handling

const K = () => encodeBgpKeepalive();
/** An UPDATE from attributes and IPv4 NLRI. */
const upd = (attributes: BgpAttribute[], nlri = [hostPrefix(ip('203.0.113.10'))], withdrawn: ReturnType<typeof hostPrefix>[] = []) =>
  encodeBgpUpdate({ withdrawn, attributes, nlri });
const good = () => [bgpOriginAttr(0), bgpAsPathAttr([{ type: BGP_AS_SEQUENCE, asns: [65000] }], 4), bgpNextHopAttr(ip('198.18.0.1'))];
const raw = (flags: number, type: number, value: number[]): BgpAttribute => ({ flags, type, value: Uint8Array.from(value) });
const replace = (type: number, a: BgpAttribute) => good().map((x) => (x.type === type ? a : x));
/** An UPDATE from raw attribute and NLRI bytes (lengths computed, contents as given). */
function rawUpdate(attrs: Uint8Array | number[], nlri: Uint8Array | number[]): Uint8Array {
  const a = Uint8Array.from(attrs);
  const n = Uint8Array.from(nlri);
  const b = new Uint8Array(23 + a.length + n.length).fill(0xff, 0, 16);
  b[16] = b.length >> 8;
  b[17] = b.length & 255;
  b[18] = 2;
  b[19] = 0;
  b[20] = 0;
  b[21] = a.length >> 8;
  b[22] = a.length & 255;
  b.set(a, 23);
  b.set(n, 23 + a.length);
  return b;
}
/** The attribute bytes of good(). */
const goodBytes = () => {
  const m = upd(good(), []);
  return m.subarray(23);
};

describe('malformed messages: the NOTIFICATION RFC 4271 6 names, handled as RFC 7606 says', () => {
  it('message header (6.1): marker, length, type; the data carries the bad length or type', () => {
    const k = K();
    const cases: [string, (b: Uint8Array) => void, number, string][] = [
      [
        'marker not all ones',
        (b) => {
          b[3] = 0;
        },
        BGP_ERR_NOT_SYNCHRONIZED,
        '',
      ],
      [
        'length 18',
        (b) => {
          b[17] = 18;
        },
        BGP_ERR_BAD_MESSAGE_LENGTH,
        '0012',
      ],
      [
        'length 4097',
        (b) => {
          b[16] = 0x10;
          b[17] = 1;
        },
        BGP_ERR_BAD_MESSAGE_LENGTH,
        '1001',
      ],
      [
        'KEEPALIVE of 20 bytes',
        (b) => {
          b[17] = 20;
        },
        BGP_ERR_BAD_MESSAGE_LENGTH,
        '0014',
      ],
      [
        'type 7',
        (b) => {
          b[18] = 7;
        },
        BGP_ERR_BAD_MESSAGE_TYPE,
        '07',
      ],
      [
        'OPEN shorter than 29',
        (b) => {
          b[18] = 1;
        },
        BGP_ERR_BAD_MESSAGE_LENGTH,
        '0013',
      ],
    ];
    for (const [what, edit, err, data] of cases) {
      const b = Uint8Array.from(k);
      edit(b);
      const r = parseBgpHeader(b, 0, newBgpHeader());
      expect(r, what).toBe(err);
      expect(bgpErrorNotification(r)?.code, what).toBe(1);
      expect(hex(bgpHeaderErrorData(r, b, 0)), what).toBe(data);
    }
    expect(parseBgpHeader(k.subarray(0, 18), 0, newBgpHeader())).toBe(ERR_TRUNCATED);
  });

  it('OPEN (6.2): version, optional parameters, capabilities; then peer AS, identifier, hold time', () => {
    const base = encodeBgpOpen(newBgpOpen({ asn: 65000, holdTimeS: 3, bgpId: ip('198.18.0.1').words[0]!, families: [BGP_IPV4_UNICAST] }));
    const edit = (f: (b: Uint8Array) => void) => {
      const b = Uint8Array.from(base);
      f(b);
      return b;
    };
    const parse = (b: Uint8Array) => {
      const o = newBgpOpenRecord();
      const r = parseBgpOpen(b, 0, o);
      return { r, o };
    };
    expect(
      parse(
        edit((b) => {
          b[19] = 3;
        }),
      ).r,
    ).toBe(BGP_ERR_UNSUPPORTED_VERSION);
    expect(hex(bgpOpenErrorData(BGP_ERR_UNSUPPORTED_VERSION))).toBe('0004');
    expect(
      parse(
        edit((b) => {
          b[29] = 1;
        }),
      ).r,
    ).toBe(BGP_ERR_UNSUPPORTED_OPT_PARAM); // an authentication parameter
    expect(
      parse(
        edit((b) => {
          b[30] = 200;
        }),
      ).r,
    ).toBe(BGP_ERR_OPEN_MALFORMED); // parameter overruns
    expect(
      parse(
        edit((b) => {
          b[32] = 3;
        }),
      ).r,
    ).toBe(BGP_ERR_OPEN_MALFORMED); // MP capability of 3 bytes
    expect(
      parse(
        edit((b) => {
          b[28] = b[28]! - 1;
        }),
      ).r,
    ).toBe(BGP_ERR_OPEN_MALFORMED); // optional parameters length != the rest
    const ok = parse(base);
    expect(ok.r).toBe(base.length);
    const check = (f: (o: ReturnType<typeof newBgpOpenRecord>) => void, peerAs = 65000) => {
      const o = structuredClone(ok.o);
      f(o);
      return checkBgpOpen(o, { peerAs });
    };
    expect(check(() => {}, 65000)).toBe(0);
    expect(check(() => {}, 65002)).toBe(BGP_ERR_BAD_PEER_AS);
    expect(
      check((o) => {
        o.myAs = 65003;
      }),
    ).toBe(BGP_ERR_BAD_PEER_AS); // contradicts the 4-octet AS capability
    expect(
      check((o) => {
        o.as4 = 0;
        o.myAs = 0;
      }, 0),
    ).toBe(BGP_ERR_BAD_PEER_AS);
    expect(
      check((o) => {
        o.bgpId = 0;
      }),
    ).toBe(BGP_ERR_BAD_BGP_ID);
    expect(
      check((o) => {
        o.holdTimeS = 2;
      }),
    ).toBe(BGP_ERR_UNACCEPTABLE_HOLD_TIME);
    expect(
      check((o) => {
        o.holdTimeS = 0;
      }),
    ).toBe(0);
    for (const e of [
      BGP_ERR_UNSUPPORTED_VERSION,
      BGP_ERR_BAD_PEER_AS,
      BGP_ERR_BAD_BGP_ID,
      BGP_ERR_UNACCEPTABLE_HOLD_TIME,
      BGP_ERR_UNSUPPORTED_OPT_PARAM,
      BGP_ERR_OPEN_MALFORMED,
    ]) {
      expect(bgpErrorNotification(e)?.code).toBe(2);
    }
    expect([bgpErrorNotification(BGP_ERR_BAD_PEER_AS), bgpErrorName(BGP_ERR_UNACCEPTABLE_HOLD_TIME)]).toEqual([
      { code: 2, subcode: 2 },
      'unacceptable_hold_time',
    ]);
  });

  // [what, message, expected error, handling, attrType, data (hex) or undefined]
  const update: [string, Uint8Array, number, string, number | null, string | undefined][] = [
    [
      'withdrawn routes length overruns the message',
      (() => {
        const b = upd(good());
        b[20] = 0xff;
        return b;
      })(),
      BGP_ERR_MALFORMED_ATTRIBUTE_LIST,
      'session-reset',
      null,
      '',
    ],
    [
      'total attribute length overruns the message',
      (() => {
        const b = upd(good());
        b[22] = 0xf0;
        return b;
      })(),
      BGP_ERR_MALFORMED_ATTRIBUTE_LIST,
      'session-reset',
      null,
      '',
    ],
    [
      'an NLRI prefix of 33 bits',
      (() => {
        const b = upd(good());
        b[b.length - 5] = 33;
        return b;
      })(),
      BGP_ERR_INVALID_NETWORK_FIELD,
      'session-reset',
      null,
      '',
    ],
    [
      'an NLRI prefix overrunning the message',
      rawUpdate(goodBytes(), [32, 203, 0, 113]),
      BGP_ERR_INVALID_NETWORK_FIELD,
      'session-reset',
      null,
      '',
    ],
    [
      'a withdrawn prefix of 40 bits',
      upd([], [], [{ addr: ip('203.0.113.10'), len: 40 }]),
      BGP_ERR_INVALID_NETWORK_FIELD,
      'session-reset',
      null,
      '',
    ],
    [
      'an unrecognized well-known attribute',
      upd([...good(), raw(0x40, 99, [1, 2])]),
      BGP_ERR_UNRECOGNIZED_WELL_KNOWN,
      'session-reset',
      99,
      '40630201 02',
    ],
    [
      'MP_REACH_NLRI with a 15-byte next hop',
      upd([raw(0x80, 14, [0, 2, 1, 15, ...new Array(15).fill(0), 0]), ...good().slice(0, 2)], []),
      BGP_ERR_OPTIONAL_ATTRIBUTE,
      'session-reset',
      14,
      undefined,
    ],
    [
      'MP_REACH_NLRI with a 129-bit prefix',
      upd([bgpMpReachAttr(6, [ip('2001:db8:f::11')], [{ addr: ip('2001:db8:ff::10'), len: 129 }]), ...good().slice(0, 2)], []),
      BGP_ERR_OPTIONAL_ATTRIBUTE,
      'session-reset',
      14,
      undefined,
    ],
    [
      'MP_REACH_NLRI twice',
      upd([bgpMpReachAttr(6, [ip('2001:db8:f::11')], []), bgpMpReachAttr(6, [ip('2001:db8:f::11')], []), ...good().slice(0, 2)], []),
      BGP_ERR_MALFORMED_ATTRIBUTE_LIST,
      'session-reset',
      14,
      '',
    ],
    ['MP_UNREACH_NLRI of 2 bytes', upd([raw(0x80, 15, [0, 2])], []), BGP_ERR_OPTIONAL_ATTRIBUTE, 'session-reset', 15, '800f020002'],
    [
      'MP_REACH_NLRI marked transitive',
      upd([{ ...bgpMpReachAttr(6, [ip('2001:db8:f::11')], []), flags: 0xc0 }, ...good().slice(0, 2)], []),
      BGP_ERR_ATTRIBUTE_FLAGS,
      'session-reset',
      14,
      undefined,
    ],
    ['ORIGIN 3', upd(replace(BGP_ATTR_ORIGIN, raw(0x40, 1, [3]))), BGP_ERR_INVALID_ORIGIN, 'treat-as-withdraw', 1, '40010103'],
    [
      'ORIGIN of 2 bytes',
      upd(replace(BGP_ATTR_ORIGIN, raw(0x40, 1, [0, 0]))),
      BGP_ERR_ATTRIBUTE_LENGTH,
      'treat-as-withdraw',
      1,
      '4001020000',
    ],
    [
      'ORIGIN marked optional',
      upd(replace(BGP_ATTR_ORIGIN, raw(0xc0, 1, [0]))),
      BGP_ERR_ATTRIBUTE_FLAGS,
      'treat-as-withdraw',
      1,
      'c0010100',
    ],
    [
      'AS_PATH segment overrunning',
      upd(replace(BGP_ATTR_AS_PATH, raw(0x40, 2, [2, 2, 0, 0, 0xfd, 0xe8]))),
      BGP_ERR_MALFORMED_AS_PATH,
      'treat-as-withdraw',
      2,
      undefined,
    ],
    [
      'AS_PATH segment of type 9',
      upd(replace(BGP_ATTR_AS_PATH, raw(0x40, 2, [9, 1, 0, 0, 0xfd, 0xe8]))),
      BGP_ERR_MALFORMED_AS_PATH,
      'treat-as-withdraw',
      2,
      undefined,
    ],
    [
      'AS_PATH segment of zero length',
      upd(replace(BGP_ATTR_AS_PATH, raw(0x40, 2, [2, 0]))),
      BGP_ERR_MALFORMED_AS_PATH,
      'treat-as-withdraw',
      2,
      undefined,
    ],
    [
      'NEXT_HOP of 5 bytes',
      upd(replace(BGP_ATTR_NEXT_HOP, raw(0x40, 3, [198, 18, 0, 1, 0]))),
      BGP_ERR_ATTRIBUTE_LENGTH,
      'treat-as-withdraw',
      3,
      undefined,
    ],
    [
      'NEXT_HOP 0.0.0.0',
      upd(replace(BGP_ATTR_NEXT_HOP, raw(0x40, 3, [0, 0, 0, 0]))),
      BGP_ERR_INVALID_NEXT_HOP,
      'treat-as-withdraw',
      3,
      '4003040000 0000',
    ],
    [
      'NEXT_HOP multicast',
      upd(replace(BGP_ATTR_NEXT_HOP, raw(0x40, 3, [224, 0, 0, 1]))),
      BGP_ERR_INVALID_NEXT_HOP,
      'treat-as-withdraw',
      3,
      undefined,
    ],
    ['no NEXT_HOP for IPv4 NLRI', upd(good().slice(0, 2)), BGP_ERR_MISSING_WELL_KNOWN, 'treat-as-withdraw', 3, '03'],
    ['no ORIGIN', upd(good().slice(1)), BGP_ERR_MISSING_WELL_KNOWN, 'treat-as-withdraw', 1, '01'],
    [
      'no AS_PATH for IPv6 NLRI',
      upd([bgpMpReachAttr(6, [ip('2001:db8:f::11')], [hostPrefix(ip('2001:db8:ff::10'))]), bgpOriginAttr(0)], []),
      BGP_ERR_MISSING_WELL_KNOWN,
      'treat-as-withdraw',
      2,
      '02',
    ],
    ['MULTI_EXIT_DISC of 3 bytes', upd([...good(), raw(0x80, 4, [0, 0, 1])]), BGP_ERR_ATTRIBUTE_LENGTH, 'treat-as-withdraw', 4, undefined],
    [
      'COMMUNITIES of 5 bytes',
      upd([...good(), raw(0xc0, 8, [0, 1, 0, 2, 3])]),
      BGP_ERR_ATTRIBUTE_LENGTH,
      'treat-as-withdraw',
      8,
      undefined,
    ],
    [
      'LARGE_COMMUNITY of 8 bytes',
      upd([...good(), raw(0xc0, 32, [0, 0, 0, 1, 0, 0, 0, 2])]),
      BGP_ERR_ATTRIBUTE_LENGTH,
      'treat-as-withdraw',
      32,
      undefined,
    ],
    [
      'an attribute overrunning the list',
      rawUpdate([...goodBytes(), 0xc0, 8, 9, 0, 1, 0, 2], [24, 203, 0, 113]),
      BGP_ERR_ATTRIBUTE_LENGTH,
      'treat-as-withdraw',
      8,
      'c00809000100 02',
    ],
    [
      'two bytes left in the list',
      rawUpdate([...goodBytes(), 0x40, 9], [24, 203, 0, 113]),
      BGP_ERR_MALFORMED_ATTRIBUTE_LIST,
      'treat-as-withdraw',
      null,
      '',
    ],
    ['ATOMIC_AGGREGATE of 1 byte', upd([...good(), raw(0x40, 6, [1])]), BGP_ERR_ATTRIBUTE_LENGTH, 'attribute-discard', 6, undefined],
    ['AGGREGATOR of 5 bytes', upd([...good(), raw(0xc0, 7, [0, 0, 0, 1, 2])]), BGP_ERR_ATTRIBUTE_LENGTH, 'attribute-discard', 7, undefined],
    ['AS4_PATH malformed', upd([...good(), raw(0xc0, 17, [2, 5, 0])]), BGP_ERR_MALFORMED_AS_PATH, 'attribute-discard', 17, undefined],
    ['ORIGIN twice', upd([...good(), bgpOriginAttr(1)]), BGP_ERR_MALFORMED_ATTRIBUTE_LIST, 'attribute-discard', 1, ''],
  ];
  it.each(update)('UPDATE (6.3): %s', (_what, msg, err, handling, attrType, data) => {
    const u = newBgpUpdate();
    const r = parseBgpUpdate(msg, 0, u);
    if (handling === 'session-reset') expect(r).toBe(err);
    else expect(r).toBe(msg.length);
    expect(u.error).not.toBeNull();
    expect(bgpErrorName(u.error!.error)).toBe(bgpErrorName(err));
    expect(u.error!.handling).toBe(handling);
    expect(u.error!.attrType).toBe(attrType);
    if (data !== undefined) expect(hex(u.error!.data)).toBe(data.replace(/ /g, ''));
    expect(bgpErrorNotification(err)?.code).toBe(3);
    if (handling === 'attribute-discard') expect(u.attributes.filter((a) => a.type === attrType).length).toBeLessThanOrEqual(1);
  });

  it('optional attributes slbx does not know are carried through untouched; a valid UPDATE has no error', () => {
    const msg = upd([...good(), raw(0xc0, 99, [1, 2, 3]), raw(0xe0, 200, [])]);
    const { r, u } = parseU(msg);
    expect(r).toBe(msg.length);
    expect(u.error).toBeNull();
    expect(u.attributes.map((a) => [a.flags, a.type])).toEqual([
      [0x40, 1],
      [0x40, 2],
      [0x40, 3],
      [0xc0, 99],
      [0xe0, 200],
    ]);
    expect(hex(encodeBgpUpdate(u))).toBe(hex(msg));
    // a pure withdrawal needs no attributes
    expect(parseU(upd([], [], [hostPrefix(ip('203.0.113.10'))])).u.error).toBeNull();
  });
});

describe('random bytes never make a BGP parser throw', () => {
  const rng = new Rng(0xb6b);
  const golden = goldenMessages().map((m) => m.bytes);
  const parsers: [string, (b: Uint8Array, off: number) => number][] = [
    ['header', (b, o) => parseBgpHeader(b, o, newBgpHeader())],
    [
      'open',
      (b, o) => {
        const x = newBgpOpenRecord();
        const r = parseBgpOpen(b, o, x);
        if (r >= 0) checkBgpOpen(x, { peerAs: 65000 });
        return r;
      },
    ],
    ['update (4-octet AS)', (b, o) => parseBgpUpdate(b, o, newBgpUpdate(), b.length, { as4: true })],
    ['update (2-octet AS)', (b, o) => parseBgpUpdate(b, o, newBgpUpdate(), b.length, { as4: false })],
    [
      'notification',
      (b, o) => {
        const n = newBgpNotification();
        const r = parseBgpNotification(b, o, n);
        parseBgpShutdownData(n.data);
        return r;
      },
    ],
  ];
  it.each(parsers)('%s: 20,000 random and mutated messages, results are lengths or named BGP errors', (_n, parse) => {
    for (let i = 0; i < 20_000; i++) {
      let b: Uint8Array;
      if (i % 2 === 0) {
        b = mutate(rng, rng.pick(golden));
        if (b.length >= 19 && rng.int(2) === 0) b.fill(0xff, 0, 16); // keep the marker, so the body gets parsed
      } else {
        b = rng.bytes(rng.int(200));
        b.fill(0xff, 0, Math.min(16, b.length));
        if (b.length > 18) {
          b[16] = 0;
          b[17] = b.length;
          b[18] = 1 + rng.int(4);
        }
      }
      const off = rng.int(3);
      const r = parse(b, off);
      expect(Number.isInteger(r)).toBe(true);
      if (r < 0) expect(bgpErrorName(r)).not.toMatch(/^bgp_error_/);
      else expect(r).toBeLessThanOrEqual(b.length - off);
    }
  });
});
