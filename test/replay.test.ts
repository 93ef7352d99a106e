// The offline replay: the data planes over pcap files, checked with our own decoder and with tshark.
import { describe, expect, it, beforeAll } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPcap, readPcap, LINKTYPE_ETHERNET } from '../shared/pcap-file.js';
import { dissect } from '../shared/dissect.js';
import { replay, main as replayMain } from '../cli/replay.js';
import { clientFrames, replyFrames, main as genMain } from '../cli/gen-traffic.js';
import { labConfig, LAB_YAML_PATH } from './helpers/lab-config.js';
import { unmet } from './helpers/prerequisite.js';

const hasTshark = spawnSync('tshark', ['--version'], { stdio: 'ignore' }).status === 0;
const config = labConfig();
const toPcap = (frames: Buffer[]) => buildPcap(LINKTYPE_ETHERNET, frames.map((d, i) => ({ tsUs: 1e15 + i, data: d, origLen: d.length })));
const packetsOf = (b: Uint8Array) => { const r = readPcap(b); if (typeof r === 'number') throw new Error('bad pcap'); return r.packets; };

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'slbx-replay-')); return () => rmSync(dir, { recursive: true, force: true }); });

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

  it.skipIf(unmet(hasTshark ? null : 'tshark is not installed (apt-get install tshark)', 'tshark\'s decode'))('tshark decodes it as VXLAN with VNI 5001 and the client packet inside', () => {
    if (!hasTshark) throw new Error('tshark is not installed: .ci/run installs it (apt-get install tshark)');
    const file = join(dir, 'fabric.pcap');
    writeFileSync(file, r.output);
    const text = execFileSync('tshark', ['-r', file, '-d', 'udp.port==4789,vxlan', '-T', 'fields', '-E', 'separator=/t', '-E', 'occurrence=a', '-E', 'aggregator=,',
      '-e', 'vxlan.vni', '-e', 'ip.src', '-e', 'ip.dst', '-e', 'ipv6.src', '-e', 'ipv6.dst', '-e', 'tcp.dstport', '-e', 'udp.dstport'], { encoding: 'utf8' });
    const rows = text.trim().split('\n').map((l) => l.split('\t'));
    expect(rows).toHaveLength(frames.length);
    rows.forEach((row, i) => {
      const client = dissect(frames[i]!);
      const ip = client.first('ipv4') ?? client.first('ipv6')!;
      expect(row[0]).toBe('5001');
      const outerSrc = row[1]!.split(',')[0];
      expect(outerSrc).toBe('198.18.0.11');
      if (client.first('ipv4')) expect(row[1]!.split(',')[1]).toBe(ip.src); else expect(row[3]).toBe(ip.src);
      if (client.first('ipv4')) expect(row[2]!.split(',')[1]).toBe(ip.dst); else expect(row[4]).toBe(ip.dst);
      const l4 = client.first('tcp') ?? client.first('udp')!;
      const ports = (client.first('tcp') ? row[5]! : row[6]!).split(',');
      expect(ports[ports.length - 1]).toBe(String(l4.dstPort));
    });
  });

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
    const r = replay({ config, plane: 'host-out', node: 'host1', input: toPcap(replies) });
    expect(r.packetsOut).toBe(replies.length);
    for (const p of packetsOf(r.output)) {
      const d = dissect(p.data);
      const ip = d.first('ipv4') ?? d.first('ipv6')!;
      expect(['203.0.113.10', '2001:db8:ff::10']).toContain(ip.src);
      expect((d.first('tcp') ?? d.first('udp'))!.checksumOk).toBe(true);
    }
  });
});

describe('the commands', () => {
  const capture = (fn: () => number) => {
    const out: string[] = [];
    const w1 = process.stdout.write.bind(process.stdout);
    const w2 = process.stderr.write.bind(process.stderr);
    (process.stdout as any).write = (s: string) => { out.push(s); return true; };
    (process.stderr as any).write = (s: string) => { out.push(s); return true; };
    try { return { code: fn(), text: out.join('') }; } finally { process.stdout.write = w1; process.stderr.write = w2; }
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
