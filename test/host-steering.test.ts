// Host agent worker steering (host-agent/worker-steering.ts, issue 19): both directions of a flow, and the
// ICMP errors about it, go to one worker.
//   - steeringKey: every frame a host agent gets of a flow, on the fabric (VXLAN) and from the backend's
//     port, gives the key of the flow's remote end, computed from the tuple by the documented formula
//     (flowKey), not by the code under test: return path, outbound NAT and east-west, IPv4 and IPv6, an
//     IPv6 underlay, VLAN-tagged ports, first and later fragments, ICMP errors from either side (a
//     router's about a DSR reply, a backend's about a client's packet, outbound NAT, east-west) and IPv6
//     extension headers; edge frames (cut quotes, quotes without ports, ICMP that is no error, chains too
//     long or cut short) as stated; flows spread; no input throws;
//   - the classic BPF program: assembled within the kernel's limits; run by a second implementation of
//     classic BPF (test/helpers/cbpf.ts), it returns steeringKey() for the whole corpus, every cut of
//     every frame and frames with random bytes changed (the full 32-bit value);
//   - (root) the kernel runs the programs: N ring sockets per interface in PACKET_FANOUT_CBPF groups on two
//     veth pairs, every frame of every flow injected: every copy reaches one socket, the one the flow's
//     tuple names (and steeringKey), edge frames the one steeringKey names; an ARP frame (no key)
//     reaches socket 0;
//   - (root) how leaving and joining reorders a group: what a worker restart must do (a regroup).
import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { pkt } from '../shared/packet-builder.js';
import {
  buildSteeringProgram,
  encodeSockFilters,
  steerWorker,
  steeringKey,
  BPF_MAXINSNS,
  NO_INTERNAL_VIPS,
  STEER_FABRIC,
  STEER_MAX_INTERNAL_VIPS,
  STEER_PORT,
} from '../host-agent/worker-steering.js';
import { checkVips, flowKey, steeringEdges, steeringPairs, CHECK_VXLAN_PORT } from '../host-agent/worker-steering-check.js';
import { canNetns, notRunHere } from './helpers/prerequisite.js';
import { runCbpf } from './helpers/cbpf.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ADDON = `${ROOT}native/build/Release/slbx_ring.node`;
const CHECK = `${ROOT}dist/host-agent/worker-steering-check.js`;
const VIPS = checkVips();

describe('steeringKey: both directions of a flow, one worker', () => {
  const pairs = steeringPairs(32);
  const kinds = [...new Set(pairs.map((p) => p.kind))];

  it('covers the return path, outbound NAT, east-west, IPv6, an IPv6 underlay, VLAN, fragments, ICMP errors and IPv6 extension headers', () => {
    expect(kinds).toEqual([
      'return-v4',
      'return-v6',
      'return-v4-ipv6-underlay',
      'return-v4-vlan',
      'return-v6-vlan',
      'snat-v4',
      'snat-v6-udp',
      'east-west-client-v4',
      'east-west-client-v6',
      'east-west-backend-v4',
      'fragment-v4',
      'first-fragment',
      'icmp-return-v4',
      'icmp-return-v6',
      'icmp-snat-v4',
      'icmp-east-west-client-v6',
      'ext6-return',
    ]);
  });

  for (const kind of kinds) {
    it(`${kind}: every fabric frame and every port frame give the key of the flow's remote end, and flows spread over workers`, () => {
      const mine = pairs.filter((p) => p.kind === kind);
      const workers = new Set<number>();
      for (const p of mine) {
        // expected from the tuple (the documented formula), not from the frames
        const want = flowKey(p.remote.addr, p.remote.port);
        p.fabric.forEach((b, i) =>
          expect(steeringKey(b, 0, b.length, STEER_FABRIC, CHECK_VXLAN_PORT, VIPS), `${kind} fabric frame ${i}`).toBe(want),
        );
        p.port.forEach((b, i) =>
          expect(steeringKey(b, 0, b.length, STEER_PORT, CHECK_VXLAN_PORT, VIPS), `${kind} port frame ${i}`).toBe(want),
        );
        workers.add(steerWorker(want, 2));
      }
      expect(workers.size, `${kind}: 32 flows all on one of 2 workers`).toBe(2);
    });
  }

  for (const e of steeringEdges()) {
    it(`edge: ${e.name} (${e.side}) -> ${e.expect === 0 ? 'no key' : `${e.expect.addr} port ${e.expect.port}`}`, () => {
      const want = e.expect === 0 ? 0 : flowKey(e.expect.addr, e.expect.port);
      expect(steeringKey(e.frame, 0, e.frame.length, e.side === 'fabric' ? STEER_FABRIC : STEER_PORT, CHECK_VXLAN_PORT, VIPS)).toBe(want);
    });
  }

  it('at a non-zero offset in a larger buffer: the same key', () => {
    const p = pairs[0]!;
    const fabric = p.fabric[0]!;
    const big = Buffer.alloc(fabric.length + 100, 0xee);
    fabric.copy(big, 37);
    expect(steeringKey(big, 37, fabric.length, STEER_FABRIC, CHECK_VXLAN_PORT, VIPS)).toBe(
      steeringKey(fabric, 0, fabric.length, STEER_FABRIC, CHECK_VXLAN_PORT, VIPS),
    );
  });

  it('the internal VIP decides which end: east-west on one host (client and DIP ports) stays on one worker only with it', () => {
    // the client's request on its port, and the DIP's reply on its own port of the same host
    const local = Array.from({ length: 32 }, (_, i) => ({
      request: pkt()
        .eth()
        .ipv4({ src: '192.0.2.20', dst: '198.19.0.101' })
        .tcp({ sport: 30000 + i, dport: 80 })
        .build(),
      reply: pkt()
        .eth()
        .ipv4({ src: '192.0.2.10', dst: '192.0.2.20' })
        .tcp({ sport: 8080, dport: 30000 + i })
        .build(),
    }));
    const key = (b: Buffer, vips = VIPS) => steeringKey(b, 0, b.length, STEER_PORT, CHECK_VXLAN_PORT, vips);
    for (const l of local) expect(key(l.reply)).toBe(key(l.request));
    const split = local.filter((l) => key(l.reply, NO_INTERNAL_VIPS) !== key(l.request, NO_INTERNAL_VIPS));
    expect(split.length).toBe(local.length);
    // and a client's flows through another host: without the VIP they would all share the VIP's key
    const ew = pairs.filter((p) => p.kind === 'east-west-client-v4');
    expect(new Set(ew.map((p) => key(p.port[0]!, NO_INTERNAL_VIPS))).size).toBe(1);
    expect(new Set(ew.map((p) => key(p.port[0]!))).size).toBe(ew.length);
  });

  it('no key (0, worker 0): ARP, VXLAN to another port, an outer fragment, a short frame', () => {
    const arp = pkt().eth().arp({ senderIp: '192.0.2.10', targetIp: '192.0.2.1' }).build();
    expect(steeringKey(arp, 0, arp.length, STEER_PORT, CHECK_VXLAN_PORT, VIPS)).toBe(0);
    const p = pairs[0]!;
    const fabric = p.fabric[0]!;
    expect(steeringKey(fabric, 0, fabric.length, STEER_FABRIC, 4790, VIPS)).toBe(0);
    const frag = Buffer.from(fabric);
    frag[14 + 6] = 0x20; // MF
    expect(steeringKey(frag, 0, frag.length, STEER_FABRIC, CHECK_VXLAN_PORT, VIPS)).toBe(0);
    for (let len = 0; len < 14 + 20 + 16 + 14 + 20; len++)
      expect(steeringKey(fabric, 0, len, STEER_FABRIC, CHECK_VXLAN_PORT, VIPS), `length ${len}`).toBe(0);
  });

  it('random bytes never throw', () => {
    for (let i = 0; i < 5000; i++) {
      const b = randomBytes(1 + (i % 200));
      if (b.length >= 14 && i % 3 === 0) b.writeUInt16BE(0x0800, 12);
      if (b.length >= 14 && i % 5 === 0) b.writeUInt16BE(0x86dd, 12);
      for (const side of [STEER_FABRIC, STEER_PORT] as const) {
        const k = steeringKey(b, 0, b.length, side, CHECK_VXLAN_PORT, VIPS);
        expect(k >>> 0).toBe(k);
      }
    }
  });
});

describe('the steering program (classic BPF)', () => {
  // the program run by a second implementation of classic BPF (test/helpers/cbpf.ts): its full value
  const progs = {
    [STEER_FABRIC]: buildSteeringProgram(STEER_FABRIC, CHECK_VXLAN_PORT, VIPS),
    [STEER_PORT]: buildSteeringProgram(STEER_PORT, CHECK_VXLAN_PORT, VIPS),
  };
  const corpus: { what: string; side: typeof STEER_FABRIC | typeof STEER_PORT; frame: Buffer }[] = [];
  for (const p of steeringPairs(4)) {
    p.fabric.forEach((frame, i) => corpus.push({ what: `${p.kind} fabric ${i}`, side: STEER_FABRIC, frame }));
    p.port.forEach((frame, i) => corpus.push({ what: `${p.kind} port ${i}`, side: STEER_PORT, frame }));
  }
  for (const e of steeringEdges()) corpus.push({ what: e.name, side: e.side === 'fabric' ? STEER_FABRIC : STEER_PORT, frame: e.frame });

  it('returns steeringKey() for every frame of the corpus (flows, ICMP errors, extension headers, edges), on its side', () => {
    for (const c of corpus) {
      expect(runCbpf(progs[c.side], c.frame), c.what).toBe(steeringKey(c.frame, 0, c.frame.length, c.side, CHECK_VXLAN_PORT, VIPS));
    }
  });

  it('returns steeringKey() for every cut of every corpus frame and for frames with random bytes changed (bounds, lengths, types)', () => {
    let seed = 19;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    let nonZero = 0;
    let n = 0;
    for (const c of corpus) {
      const check = (b: Buffer, what: string) => {
        const want = steeringKey(b, 0, b.length, c.side, CHECK_VXLAN_PORT, VIPS);
        if (want !== 0) nonZero++;
        n++;
        expect(runCbpf(progs[c.side], b), what).toBe(want);
      };
      for (let len = 14; len < c.frame.length; len++) check(c.frame.subarray(0, len), `${c.what} cut to ${len}`);
      for (let i = 0; i < 40; i++) {
        const b = Buffer.from(c.frame);
        for (let j = 1 + rnd(3); j > 0; j--)
          b[14 + rnd(b.length - 14)] = rnd(4) === 0 ? rnd(256) : [0, 1, 3, 4, 6, 11, 17, 43, 44, 51, 58, 60, 0xff][rnd(13)]!;
        check(b, `${c.what} changed (${i})`);
      }
    }
    expect(nonZero, 'most changed frames still have a key').toBeGreaterThan(n / 4);
  });

  it('assembles within the kernel limits, with the most internal VIPs it takes', () => {
    const many = {
      v4: Array.from({ length: STEER_MAX_INTERNAL_VIPS }, (_, i) => (0xc6130000 + i) >>> 0),
      v6: Array.from({ length: STEER_MAX_INTERNAL_VIPS }, (_, i) => [0x20010db8, 0, 0, i]),
    };
    for (const side of [STEER_FABRIC, STEER_PORT] as const) {
      const prog = buildSteeringProgram(side, CHECK_VXLAN_PORT, many);
      expect(prog.length).toBeLessThanOrEqual(BPF_MAXINSNS);
      expect(prog[prog.length - 1]!.code & 0x07, 'the last instruction returns').toBe(0x06);
      expect(encodeSockFilters(prog).length).toBe(prog.length * 8);
    }
    expect(() => buildSteeringProgram(STEER_PORT, CHECK_VXLAN_PORT, { v4: [...many.v4, 1], v6: [] })).toThrow(/at most 64/);
  });
});

interface CheckResult {
  workers: number;
  sent: number;
  received: number;
  perSocket: number[][];
  kernelDrops: number;
  arpSocket: number;
  flows: { flow: number; kind: string; fabric: number[]; port: number[]; keyFabric: number[]; keyPort: number[]; expect: number }[];
  edges: { name: string; side: string; sockets: number[]; key: number; expect: number }[];
}

describe('PACKET_FANOUT_CBPF with the steering programs: the kernel puts both directions of a flow on one socket', () => {
  const ready = canNetns() && existsSync(ADDON) && existsSync(CHECK);
  if (!ready) {
    const why = !canNetns()
      ? 'needs root and network namespaces'
      : !existsSync(ADDON)
        ? 'the ring addon is not built (npm run build:native)'
        : 'dist is not built (npx tsc -p tsconfig.json)';
    notRunHere(why, 'PACKET_FANOUT_CBPF on two veth pairs');
    return;
  }

  // two veth pairs in a namespace of the test's own: fab/fabt (the fabric and its tester end), vmp/vmt
  const withNs = (fn: (check: (...extra: string[]) => unknown) => void): void => {
    const ns = `slbx-test-${randomBytes(3).toString('hex')}-steer`;
    const ip = (...a: string[]) => execFileSync('ip', a, { stdio: 'pipe' });
    ip('netns', 'add', ns);
    try {
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'link', 'add', 'fab', 'type', 'veth', 'peer', 'name', 'fabt');
      ip('-n', ns, 'link', 'add', 'vmp', 'type', 'veth', 'peer', 'name', 'vmt');
      for (const i of ['fab', 'fabt', 'vmp', 'vmt']) ip('-n', ns, 'link', 'set', i, 'up');
      execFileSync('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1']);
      fn((...extra) => {
        const r = spawnSync(
          'ip',
          [
            'netns',
            'exec',
            ns,
            process.execPath,
            CHECK,
            ...['--fabric', 'fab', '--fabric-tester', 'fabt', '--port', 'vmp', '--port-tester', 'vmt'],
            ...extra,
          ],
          { encoding: 'utf8', timeout: 120_000 },
        );
        const line = r.stdout.trim().split('\n').pop() ?? '';
        expect(line, `worker-steering-check: exit ${r.status}\n${r.stderr}`).toMatch(/^\{/);
        return JSON.parse(line) as unknown;
      });
    } finally {
      spawnSync('ip', ['netns', 'del', ns]);
    }
  };

  it('2 and 3 sockets per interface: every frame once; each flow, ICMP errors about it included, on one socket in both directions, the one its remote end names; edge frames where steeringKey says', () => {
    withNs((check) => {
      for (const workers of [2, 3]) {
        const g = check('--workers', String(workers), '--flows', '16') as CheckResult;
        expect(g.kernelDrops).toBe(0);
        expect(g.received).toBe(g.sent);
        const pairs = steeringPairs(1);
        expect(g.flows.length).toBe(pairs.length * 16);
        expect(g.arpSocket).toBe(0);
        const used = new Set<number>();
        for (const f of g.flows) {
          const p = pairs.find((q) => q.kind === f.kind)!;
          const what = `${workers} sockets, flow ${f.flow} (${f.kind}): fabric ${JSON.stringify(f.fabric)}, port ${JSON.stringify(f.port)}, expected ${f.expect}`;
          expect(f.fabric.length, what).toBe(2 * p.fabric.length); // every frame sent twice each way
          expect(f.port.length, what).toBe(2 * p.port.length);
          // the expected socket from the flow's tuple (flowKey), not from parsing the frames
          expect([...new Set([...f.fabric, ...f.port])], what).toEqual([f.expect]);
          expect([...new Set([...f.keyFabric, ...f.keyPort])], `${what}: steeringKey`).toEqual([f.expect]);
          used.add(f.expect);
        }
        expect(used.size, 'every socket got flows').toBe(workers);
        expect(g.edges.length).toBe(steeringEdges().length);
        for (const e of g.edges) {
          const what = `${workers} sockets, edge ${e.name}: sockets ${JSON.stringify(e.sockets)}`;
          expect(e.sockets.length, what).toBe(2);
          expect([...new Set(e.sockets)], what).toEqual([e.key]);
          expect(e.key, what).toBe(e.expect);
        }
      }
    });
  }, 300_000);

  // The kernel keeps a group's members in join order and fills a leaving member's slot with the last one
  // (net/packet/af_packet.c, __fanout_unlink): so leaving and joining again moves flows between workers,
  // and two groups stay alike only while they see the same leaves and joins in the same order.
  it('4 workers: a restart moves flows but keeps directions together; two leaving in different orders split flows; a regroup in index order mends both', () => {
    withNs((check) => {
      const g = check('--restarts', '--workers', '4', '--flows', '8') as {
        phases: { phase: string; flows: number; missing: number; split: number; offIndex: number }[];
      };
      const by = Object.fromEntries(g.phases.map((p) => [p.phase, p]));
      for (const p of g.phases) expect(p.missing, p.phase).toBe(0);
      expect([by['start']!.split, by['start']!.offIndex]).toEqual([0, 0]);
      expect(by['restart']!.split).toBe(0);
      expect(by['restart']!.offIndex, 'worker 0 rejoined last: the flows of index 0 and 3 moved').toBeGreaterThan(0);
      expect([by['regrouped']!.split, by['regrouped']!.offIndex]).toEqual([0, 0]);
      expect(by['two-died']!.split, 'fabric order 3,2,0,1 against port order 2,3,0,1').toBeGreaterThan(0);
      expect([by['regrouped-again']!.split, by['regrouped-again']!.offIndex]).toEqual([0, 0]);
    });
  }, 300_000);
});
