// The offline replay: the data planes over pcap files, checked with our own decoder and with tshark.
import { describe, expect, it, beforeAll } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPcap, readPcap, LINKTYPE_ETHERNET } from '../shared/pcap-file.js';
import { dissect } from '../shared/dissect.js';
import { parse as parseYaml } from 'yaml';
import { replay, main as replayMain, derivedMac, REPLAY_ROUTER_MAC } from '../cli/replay.js';
import { pkt } from '../shared/packet-builder.js';
import { formatMac } from '../shared/addr.js';
import { MuxDaemon } from '../mux/daemon.js';
import { muxContextKey } from '../mux/context.js';
import { processPacket, VERDICT_FORWARD } from '../mux/data-plane.js';
import { HostDaemon } from '../host-agent/daemon.js';
import { processInbound, VERDICT_FORWARD as HOST_FORWARD } from '../host-agent/data-plane.js';
import { macKey } from '../host-agent/tables.js';
import { clientFrames, replyFrames, main as genMain } from '../cli/gen-traffic.js';
import { labConfig, LAB_YAML_PATH } from './helpers/lab-config.js';
import { unmet } from './helpers/prerequisite.js';

const hasTshark = spawnSync('tshark', ['--version'], { stdio: 'ignore' }).status === 0;
const config = labConfig();
const toPcap = (frames: Buffer[]) =>
  buildPcap(
    LINKTYPE_ETHERNET,
    frames.map((d, i) => ({ tsUs: 1e15 + i, data: d, origLen: d.length })),
  );
const packetsOf = (b: Uint8Array) => {
  const r = readPcap(b);
  if (typeof r === 'number') throw new Error('bad pcap');
  return r.packets;
};

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'slbx-replay-'));
  return () => rmSync(dir, { recursive: true, force: true });
});

describe('replay mux: client frames -> VXLAN to the hosts', () => {
  const frames = clientFrames(config, 25, 5);
  const r = replay({ config, plane: 'mux', input: toPcap(frames) });

  it('forwards every frame, to both hosts, with the inner packet untouched', () => {
    expect(r.packetsIn).toBe(frames.length);
    expect(r.packetsOut).toBe(frames.length);
    expect(Object.keys(r.destinations).sort()).toEqual(['host1', 'host2']);
    const out = packetsOf(r.output);
    out.forEach((p, i) => {
      const d = dissect(p.data);
      expect(d.first('vxlan')!.vni).toBe(5001);
      const inner = d.all('eth')[1]!;
      // the inner IP packet is byte-identical to what the client sent
      expect(Buffer.from(p.data.subarray(inner.off + 14))).toEqual(frames[i]!.subarray(14));
    });
  });

  it.skipIf(unmet(hasTshark ? null : 'tshark is not installed (apt-get install tshark)', "tshark's decode"))(
    'tshark decodes it as VXLAN with VNI 5001 and the client packet inside',
    () => {
      if (!hasTshark) throw new Error('tshark is not installed: .ci/run installs it (apt-get install tshark)');
      const file = join(dir, 'fabric.pcap');
      writeFileSync(file, r.output);
      const text = execFileSync(
        'tshark',
        [
          '-r',
          file,
          '-d',
          'udp.port==4789,vxlan',
          '-T',
          'fields',
          '-E',
          'separator=/t',
          '-E',
          'occurrence=a',
          '-E',
          'aggregator=,',
          '-e',
          'vxlan.vni',
          '-e',
          'ip.src',
          '-e',
          'ip.dst',
          '-e',
          'ipv6.src',
          '-e',
          'ipv6.dst',
          '-e',
          'tcp.dstport',
          '-e',
          'udp.dstport',
        ],
        { encoding: 'utf8' },
      );
      const rows = text
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      expect(rows).toHaveLength(frames.length);
      rows.forEach((row, i) => {
        const client = dissect(frames[i]!);
        const ip = client.first('ipv4') ?? client.first('ipv6')!;
        expect(row[0]).toBe('5001');
        const outerSrc = row[1]!.split(',')[0];
        expect(outerSrc).toBe('198.18.0.11');
        if (client.first('ipv4')) expect(row[1]!.split(',')[1]).toBe(ip.src);
        else expect(row[3]).toBe(ip.src);
        if (client.first('ipv4')) expect(row[2]!.split(',')[1]).toBe(ip.dst);
        else expect(row[4]).toBe(ip.dst);
        const l4 = client.first('tcp') ?? client.first('udp')!;
        const ports = (client.first('tcp') ? row[5]! : row[6]!).split(',');
        expect(ports[ports.length - 1]).toBe(String(l4.dstPort));
      });
    },
  );

  it('host agents take it from there: every frame reaches a DIP on the right host, NATed', () => {
    let delivered = 0;
    for (const host of ['host1', 'host2']) {
      const h = replay({ config, plane: 'host-in', node: host, input: r.output });
      // frames for the other host are not addressed to this one
      expect(h.counters.drop_in_not_for_us ?? 0).toBe(r.destinations[host === 'host1' ? 'host2' : 'host1']);
      delivered += h.packetsOut;
      for (const p of packetsOf(h.output)) {
        const d = dissect(p.data);
        const ip = d.first('ipv4') ?? d.first('ipv6')!;
        expect(ip.dst.startsWith('192.0.2.') || ip.dst.startsWith('2001:db8:d::')).toBe(true);
        const l4 = d.first('tcp') ?? d.first('udp')!;
        expect(l4.checksumOk).toBe(true);
      }
    }
    expect(delivered).toBe(frames.length);
  });
});

describe('replay host-out: backend replies -> DSR from the VIP', () => {
  it('every reply leaves from a VIP with correct checksums', () => {
    const replies = replyFrames(config, 'host1', 5, 2);
    // replies alone: no client packet came in, so none is a recorded flow's (host-agent/dsr-flows.ts)
    const alone = replay({ config, plane: 'host-out', node: 'host1', input: toPcap(replies) });
    expect(alone.packetsOut).toBe(0);
    expect(alone.counters.drop_out_dsr_unsolicited).toBe(replies.length);
    const r = replay({ config, plane: 'host-out', node: 'host1', input: toPcap(replies), assumeFlows: true });
    expect(r.packetsOut).toBe(replies.length);
    for (const p of packetsOf(r.output)) {
      const d = dissect(p.data);
      const ip = d.first('ipv4') ?? d.first('ipv6')!;
      expect(['203.0.113.10', '2001:db8:ff::10']).toContain(ip.src);
      expect((d.first('tcp') ?? d.first('udp'))!.checksumOk).toBe(true);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// fabric.underlay: ipv6. The expected values come from examples/lab.yaml read as plain YAML (not through
// shared/config) and from a checksum written here (RFC 8200 8.1 pseudo-header, RFC 1071 sum), not from
// the code under test.

const rawLab = parseYaml(readFileSync(LAB_YAML_PATH, 'utf8')) as {
  muxes: { name: string; address: string; address6: string }[];
  hosts: { name: string; address6: string }[];
  nics: { name: string; host: string; mac: string }[];
  fabric: { mtu: number; vxlanPort?: number };
};
const config6 = labConfig((raw) => {
  raw.fabric.underlay = 'ipv6';
});

/** An IPv6 address in text (with at most one ::) as its 16 bytes. */
function v6Bytes(text: string): Buffer {
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, undefined];
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const b = Buffer.alloc(16);
  groups.forEach((g, i) => b.writeUInt16BE(parseInt(g, 16), i * 2));
  return b;
}

/** The UDP checksum over IPv6 of the segment `udp` (its checksum field included): 0xffff when right. */
function udp6Sum(src: Buffer, dst: Buffer, udp: Buffer): number {
  let sum = 0;
  const add16 = (b: Buffer) => {
    for (let i = 0; i + 1 < b.length; i += 2) sum += b.readUInt16BE(i);
    if (b.length % 2 === 1) sum += b[b.length - 1]! << 8;
  };
  add16(src);
  add16(dst);
  sum += (udp.length >>> 16) + (udp.length & 0xffff) + 17; // upper-layer length, next header
  add16(udp);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return sum;
}

describe('replay over an IPv6 underlay (fabric.underlay: ipv6), as the MUX daemon sends it', () => {
  const frames = clientFrames(config6, 25, 5);
  const r = replay({ config: config6, plane: 'mux', input: toPcap(frames) });
  const out = packetsOf(r.output);
  const mux1 = rawLab.muxes.find((m) => m.name === 'mux1')!;
  const hostPa6 = new Map(rawLab.hosts.map((h) => [h.name, v6Bytes(h.address6)]));

  it("writes VXLAN in IPv6 from the MUX's address6 to the host's, UDP checksum computed and right", () => {
    expect(out).toHaveLength(frames.length);
    expect(Object.keys(r.destinations).sort()).toEqual(['host1', 'host2']);
    let byHost = 0;
    out.forEach((p, i) => {
      const f = Buffer.from(p.data);
      expect(f.readUInt16BE(12), 'outer EtherType').toBe(0x86dd);
      expect(f[14]! >>> 4, 'IP version').toBe(6);
      expect(f.readUInt16BE(18), 'payload length').toBe(f.length - 14 - 40);
      expect(f[20], 'next header').toBe(17);
      expect(f[21], 'hop limit').toBe(64);
      expect(f.subarray(22, 38).equals(v6Bytes(mux1.address6)), 'outer source').toBe(true);
      const dst = f.subarray(38, 54);
      const host = [...hostPa6].find(([, b]) => b.equals(dst))?.[0];
      expect(host, "outer destination is a host's address6").toBeDefined();
      const udp = f.subarray(54);
      expect(udp.readUInt16BE(2)).toBe(rawLab.fabric.vxlanPort ?? 4789);
      expect(udp.readUInt16BE(0)).toBeGreaterThanOrEqual(49152);
      expect(udp.readUInt16BE(4), 'UDP length').toBe(udp.length);
      expect(udp.readUInt16BE(6), 'UDP checksum (mandatory over IPv6)').not.toBe(0);
      expect(udp6Sum(f.subarray(22, 38), dst, udp), 'UDP checksum verifies').toBe(0xffff);
      expect(udp[8], 'VXLAN I flag').toBe(0x08);
      expect(udp.readUIntBE(12, 3), 'VNI').toBe(5001);
      // the inner frame: to the chosen nic's MAC (on the outer destination's host), the client's IP packet byte for byte
      const innerMac = udp.subarray(16, 22);
      const nic = rawLab.nics.find((n) => Buffer.from(n.mac.split(':').map((x) => parseInt(x, 16))).equals(innerMac));
      expect(nic?.host, "the inner MAC is a nic on the outer destination's host").toBe(host);
      expect(udp.subarray(30).equals(frames[i]!.subarray(14)), 'inner IP packet untouched').toBe(true);
      byHost++;
    });
    expect(byHost).toBe(frames.length);
  });

  it("the frames are byte-identical to what the MUX daemon's own context produces", () => {
    // the daemon as slbx-mux builds it (not started: no capture is opened), its hosts' MACs as replay assumes them
    const d = new MuxDaemon({
      config: config6,
      name: 'mux1',
      iface: 'hE-no-such-if',
      mac: derivedMac(config6.muxes[0]!.address.words[0]!),
      bgp: false,
    });
    expect(d.ctx.underlay6).toBe(true);
    for (const h of d.ctx.tables.hosts.values()) {
      h.mac.set(derivedMac(h.pa4));
      h.macKnown = true;
    }
    const sent: Buffer[] = [];
    const input = packetsOf(toPcap(frames));
    for (const p of input) {
      d.ctx.nowS = Math.max(1, Math.floor(p.tsUs / 1e6));
      const v = processPacket(Buffer.from(p.data), p.data.length, d.ctx);
      if (v === VERDICT_FORWARD) sent.push(Buffer.from(d.ctx.out.subarray(0, d.ctx.outLen)));
    }
    expect(sent).toHaveLength(out.length);
    sent.forEach((f, i) => expect(Buffer.from(out[i]!.data).equals(f), `frame ${i}`).toBe(true));
  });

  it.skipIf(unmet(hasTshark ? null : 'tshark is not installed (apt-get install tshark)', "tshark's IPv6 decode"))(
    'tshark decodes IPv6 outer headers and finds every UDP checksum good',
    () => {
      if (!hasTshark) throw new Error('tshark is not installed: .ci/run installs it (apt-get install tshark)');
      const file = join(dir, 'fabric6.pcap');
      writeFileSync(file, r.output);
      const text = execFileSync(
        'tshark',
        [
          '-r',
          file,
          '-o',
          'udp.check_checksum:TRUE',
          '-d',
          'udp.port==4789,vxlan',
          '-T',
          'fields',
          '-E',
          'separator=/t',
          '-E',
          'occurrence=f',
          '-e',
          'ipv6.src',
          '-e',
          'ipv6.dst',
          '-e',
          'udp.checksum.status',
          '-e',
          'vxlan.vni',
        ],
        { encoding: 'utf8' },
      );
      const rows = text
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      expect(rows).toHaveLength(frames.length);
      const hosts6 = rawLab.hosts.map((h) => h.address6);
      for (const row of rows) {
        expect(row[0]).toBe(mux1.address6);
        expect(hosts6).toContain(row[1]);
        expect(row[2], 'udp.checksum.status 1 = Good').toBe('1');
        expect(row[3]).toBe('5001');
      }
    },
  );

  it('leaves 70 bytes of the fabric MTU for VXLAN over IPv6 (50 over IPv4): a DF packet that fits only over IPv4 gets ICMP too big', () => {
    // fabric MTU 1600 (examples/lab.yaml): over IPv6 the inner IP packet may be 1600 - 40 - 8 - 8 - 14 = 1530 bytes
    expect(rawLab.fabric.mtu).toBe(1600);
    const vip = config6.vips.find((v) => v.address.family === 4)!.address.text;
    const big = (total: number) =>
      pkt()
        .eth({ src: formatMac(REPLAY_ROUTER_MAC), dst: formatMac(derivedMac(config6.muxes[0]!.address.words[0]!)) })
        .ipv4({ src: '198.51.100.10', dst: vip, flags: 2 })
        .tcp({ sport: 40000, dport: 80 })
        .payload(total - 40)
        .build();
    const input = toPcap([big(1530), big(1531), big(1550)]);
    const r6 = replay({ config: config6, plane: 'mux', input });
    expect(r6.packetsOut).toBe(3);
    expect(r6.destinations['icmp-reply']).toBe(2);
    expect(r6.counters['icmp_too_big_sent']).toBe(2);
    const written = packetsOf(r6.output);
    expect(Buffer.from(written[0]!.data).readUInt16BE(12), 'the 1530-byte packet leaves in IPv6 VXLAN').toBe(0x86dd);
    for (const p of written.slice(1)) {
      const f = Buffer.from(p.data);
      expect(f.readUInt16BE(12)).toBe(0x0800);
      const icmp = f.subarray(14 + (f[14]! & 0x0f) * 4);
      expect([icmp[0], icmp[1]], 'ICMP destination unreachable, fragmentation needed').toEqual([3, 4]);
      expect(icmp.readUInt16BE(6), 'next-hop MTU').toBe(1530);
    }
    // the same packets over the IPv4 underlay all fit (1600 - 20 - 8 - 8 - 14 = 1550)
    const r4 = replay({ config, plane: 'mux', input });
    expect(r4.packetsOut).toBe(3);
    expect(r4.destinations['icmp-reply']).toBeUndefined();
  });

  it('host agents take IPv6 VXLAN as their daemons do: verified checksum, NAT to the DIP; a corrupted checksum is dropped by name', () => {
    let delivered = 0;
    for (const host of ['host1', 'host2']) {
      const h = replay({ config: config6, plane: 'host-in', node: host, input: r.output });
      delivered += h.packetsOut;
      // the host daemon's own context over the same frames: the same bytes
      const d = new HostDaemon({ config: config6, name: host, iface: 'hE-no-such-if', dsrVia4: null, dsrVia6: null, nftables: false });
      d.ctx.portMacs = d.ctx.tables.nics.map((n) => {
        const m = Uint8Array.from(n.mac);
        m[0] = m[0]! ^ 0x04;
        return m;
      });
      // the daemon's source MAC check stays on, its peers resolved as the replay assumes them (02:00 + IPv4 PA);
      // how the daemon learns them: test/host-agent-spoof.test.ts
      expect(d.ctx.sourceMacCheck).toBe(true);
      const pa4 = new Map([...config6.muxes, ...config6.hosts].map((n) => [n.name, n.address.words[0]!]));
      for (const peer of d.ctx.tables.peers) d.ctx.peerMacs[peer.index] = macKey(derivedMac(pa4.get(peer.name)!), 0);
      const sent: Buffer[] = [];
      for (const p of out)
        if (processInbound(Buffer.from(p.data), p.data.length, d.ctx) === HOST_FORWARD)
          sent.push(Buffer.from(d.ctx.outBuf.subarray(d.ctx.outOff, d.ctx.outOff + d.ctx.outLen)));
      const got = packetsOf(h.output);
      expect(sent).toHaveLength(got.length);
      sent.forEach((f, i) => expect(Buffer.from(got[i]!.data).equals(f), `${host} frame ${i}`).toBe(true));
    }
    expect(delivered).toBe(frames.length);
    const bad = Buffer.from(out[0]!.data);
    bad[bad.length - 1] = bad[bad.length - 1]! ^ 0xff; // payload changed, checksum not
    const target =
      r.destinations['host1'] !== undefined && Buffer.from(bad.subarray(38, 54)).equals(hostPa6.get('host1')!) ? 'host1' : 'host2';
    const h = replay({ config: config6, plane: 'host-in', node: target, input: toPcap([bad]) });
    expect(h.packetsOut).toBe(0);
    expect(h.counters['drop_in_bad_udp_checksum']).toBe(1);
    // as on the daemon's capture path, VXLAN from a MUX's address but another MAC is refused
    const spoofed = Buffer.from(out[0]!.data);
    spoofed[11] = spoofed[11]! ^ 0x01;
    const s = replay({ config: config6, plane: 'host-in', node: target, input: toPcap([spoofed]) });
    expect(s.packetsOut).toBe(0);
    expect(s.counters['drop_in_spoofed_source']).toBe(1);
  });
});

describe('the MUX context: one builder for the daemon and the replay', () => {
  it('a policy that moves the fabric to IPv6 gives the running daemon an IPv6 context (the settings a context holds make its key)', () => {
    const d = new MuxDaemon({
      config,
      name: 'mux1',
      iface: 'hE-no-such-if',
      mac: derivedMac(config.muxes[0]!.address.words[0]!),
      bgp: false,
    });
    expect(d.ctx.underlay6).toBe(false);
    d.applyConfig(config6);
    expect(d.ctx.underlay6).toBe(true);
    expect(Array.from(d.ctx.localPa6!)).toEqual(
      Array.from(
        v6Bytes(rawLab.muxes[0]!.address6).reduce<number[]>((w, b, i) => {
          if (i % 4 === 0) w.push(0);
          w[w.length - 1] = (w[w.length - 1]! * 256 + b) >>> 0;
          return w;
        }, []),
      ),
    );
    expect(muxContextKey(config, 'mux1')).not.toBe(muxContextKey(config6, 'mux1'));
    expect(muxContextKey(config, 'mux1')).toBe(muxContextKey(labConfig(), 'mux1'));
    expect(
      muxContextKey(
        labConfig((raw) => {
          raw.muxes[0].address6 = '2001:db8:f::99';
        }),
        'mux1',
      ),
    ).not.toBe(muxContextKey(config, 'mux1'));
    expect(() => muxContextKey(config, 'mux9')).toThrow(/mux "mux9" is not in the config \(muxes: mux1, mux2\)/);
  });
});

describe("replay host-out: the DSR return's MTU is the fabric MTU, as the host daemon reads it from its interface", () => {
  it('a backend reply larger than fabric.mtu is answered on its port with ICMP too big; one that fits goes out DSR', () => {
    const nic = rawLab.nics.find((n) => n.host === 'host1')!;
    const gw = nic.mac.split(':').map((x) => parseInt(x, 16));
    gw[0] = gw[0]! ^ 0x04;
    const gwMac = gw.map((x) => x.toString(16).padStart(2, '0')).join(':');
    const dip = config.nics.find((n) => n.name === nic.name)!.address4!.text;
    const reply = (total: number) =>
      pkt()
        .eth({ src: nic.mac, dst: gwMac })
        .ipv4({ src: dip, dst: '198.51.100.10', flags: 2 })
        .tcp({ sport: 80, dport: 40000 })
        .payload(total - 40)
        .build();
    const r = replay({
      config,
      plane: 'host-out',
      node: 'host1',
      assumeFlows: true,
      input: toPcap([reply(rawLab.fabric.mtu), reply(rawLab.fabric.mtu + 1)]),
    });
    expect(r.destinations).toEqual({ dsr: 1, [`port ${config.nics.find((n) => n.name === nic.name)!.port}`]: 1 });
    const icmpFrame = Buffer.from(packetsOf(r.output)[1]!.data);
    const icmp = icmpFrame.subarray(14 + (icmpFrame[14]! & 0x0f) * 4);
    expect([icmp[0], icmp[1]]).toEqual([3, 4]);
    expect(icmp.readUInt16BE(6)).toBe(rawLab.fabric.mtu);
    // --dsr-mtu (the API's dsrMtu) moves the bound
    expect(
      replay({ config, plane: 'host-out', node: 'host1', dsrMtu: 9000, assumeFlows: true, input: toPcap([reply(rawLab.fabric.mtu + 1)]) })
        .destinations,
    ).toEqual({ dsr: 1 });
  });
});

describe('the commands', () => {
  const capture = (fn: () => number) => {
    const out: string[] = [];
    const w1 = process.stdout.write.bind(process.stdout);
    const w2 = process.stderr.write.bind(process.stderr);
    (process.stdout as any).write = (s: string) => {
      out.push(s);
      return true;
    };
    (process.stderr as any).write = (s: string) => {
      out.push(s);
      return true;
    };
    try {
      return { code: fn(), text: out.join('') };
    } finally {
      process.stdout.write = w1;
      process.stderr.write = w2;
    }
  };

  it('gen-traffic then replay, with counters printed', () => {
    const input = join(dir, 'client.pcap');
    const output = join(dir, 'out.pcap');
    expect(capture(() => genMain(['--config', LAB_YAML_PATH, '--out', input, '--flows', '3'])).code).toBe(0);
    const r = capture(() => replayMain(['--config', LAB_YAML_PATH, '--plane', 'mux', '--in', input, '--out', output]));
    expect(r.code).toBe(0);
    expect(r.text).toMatch(/mux: 21 frames in, 21 out/);
    expect(packetsOf(readFileSync(output))).toHaveLength(21);
  });

  it('refuses bad usage with exit code 2 and a message naming the option', () => {
    expect(capture(() => replayMain(['--plane', 'mux'])).text).toMatch(/--config is required/);
    expect(capture(() => replayMain(['--config', 'x', '--plane', 'nope', '--in', 'a', '--out', 'b'])).code).toBe(2);
    expect(capture(() => replayMain(['--frobnicate'])).text).toMatch(/unknown option --frobnicate/);
    expect(capture(() => replayMain(['--help'])).text).toMatch(/usage: slbx-replay/);
    const badMtu = capture(() =>
      replayMain(['--config', LAB_YAML_PATH, '--plane', 'host-out', '--in', 'a', '--out', 'b', '--dsr-mtu', '100']),
    );
    expect(badMtu.code).toBe(2);
    expect(badMtu.text).toMatch(/--dsr-mtu must be an integer 576\.\.65535/);
  });

  it('refuses a bad config with every problem listed', () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, readFileSync(LAB_YAML_PATH, 'utf8').replace('vni: 5001', 'vni: 0').replace('weight: 50', 'weight: 5000'));
    const r = capture(() => replayMain(['--config', bad, '--plane', 'mux', '--in', 'x', '--out', 'y']));
    expect(r.code).toBe(1);
    expect(r.text).toMatch(/networks\[0\]\.vni/);
    expect(r.text).toMatch(/backends\[0\]\.weight/);
  });

  it('refuses pcapng input with a hint', () => {
    const ng = join(dir, 'x.pcapng');
    writeFileSync(ng, Buffer.from('0a0d0d0a1c0000004d3c2b1a01000000ffffffffffffffff1c000000', 'hex'));
    const r = capture(() => replayMain(['--config', LAB_YAML_PATH, '--plane', 'mux', '--in', ng, '--out', join(dir, 'o.pcap')]));
    expect(r.code).toBe(1);
    expect(r.text).toMatch(/editcap -F pcap/);
  });
});
