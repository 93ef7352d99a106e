// The lab's delay links without namespaces: the delays file's validation (every problem at once, each
// naming its field), who carries a pair, the live rewrite of one pair, and how the device finds the inner
// frame of VXLAN (frames from the project's packet builder).
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import {
  DEFAULT_QUEUE_FRAMES,
  delayNodesFromPlan,
  delayOwners,
  formatDelays,
  parseDelays,
  setDelay,
  type DelayNode,
} from '../scripts/lab/delay-config.js';
import { FrameQueue, innerEthernetOffset } from '../scripts/lab/delay-link.js';
import { buildLabPlan, formatLabPlan } from '../scripts/lab/plan.js';
import { parseConfig } from '../shared/config.js';
import { pkt } from '../shared/packet-builder.js';

function labNodes(): DelayNode[] {
  const r = parseConfig(readFileSync('examples/lab.yaml', 'utf8'), 'examples/lab.yaml');
  if (!r.ok) throw new Error('examples/lab.yaml does not parse');
  const p = buildLabPlan(r.config, 1);
  if (!p.ok) throw new Error(p.errors.join('\n'));
  return delayNodesFromPlan(formatLabPlan(p.plan));
}

describe('delays file', () => {
  const nodes = labNodes();

  it('reads the nodes and their MACs from the plan', () => {
    const byName = new Map(nodes.map((n) => [n.name, n]));
    // the plan's MACs are 02:00 + the IPv4 address (scripts/lab/plan.ts): 198.18.0.11 = c6.12.00.0b
    expect(byName.get('mux1')).toEqual({ name: 'mux1', kind: 'mux', mac: '02:00:c6:12:00:0b' });
    expect(byName.get('host2')?.mac).toBe('02:00:c6:12:00:16');
    expect(byName.get('router')?.kind).toBe('router');
    expect(byName.get('h2vm1')).toEqual({ name: 'h2vm1', kind: 'nic', host: 'host2', mac: '02:00:c0:00:02:0c' });
  });

  it('accepts the example file; owners are the fabric side, a nic on its own link', () => {
    const r = parseDelays(readFileSync('examples/lab-delays.yaml', 'utf8'), nodes);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.settings.queueFrames).toBe(DEFAULT_QUEUE_FRAMES);
    expect(r.settings.pairs).toEqual([
      { owner: 'mux1', peer: 'host1', ms: 5 },
      { owner: 'mux1', peer: 'host2', ms: 40 },
      { owner: 'mux2', peer: 'host1', ms: 40 },
      { owner: 'mux2', peer: 'host2', ms: 5 },
    ]);
    const n = parseDelays('delays:\n  - { between: [host1, h1vm2], ms: 10 }\n  - { between: [h2vm1, mux2], ms: 2.5 }\n', nodes);
    expect(n.ok && n.settings.pairs).toEqual([
      { owner: 'h1vm2', peer: 'host1', ms: 10 },
      { owner: 'mux2', peer: 'h2vm1', ms: 2.5 },
    ]);
    expect(n.ok && delayOwners(n.settings)).toEqual(['h1vm2', 'mux2']);
  });

  it('lists every problem at once, each naming its field and what is allowed', () => {
    const r = parseDelays(
      [
        'delays:',
        '  - { between: [mux1, hostX], ms: 5 }',
        '  - { between: [mux1, host1], ms: -1 }',
        '  - { between: [host1, mux1], ms: 3 }',
        '  - { between: [h1vm1, h2vm1], ms: 3 }',
        '  - { between: [h1vm1, host2], ms: 3 }',
        '  - { between: [mux1, mux1], ms: 3 }',
        '  - { between: [mux2], ms: 3 }',
        '  - { between: [mux2, host2], ms: 3, jitter: 1 }',
        'queueFrames: 0',
        'other: 1',
      ].join('\n'),
      nodes,
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toEqual([
      'other: unknown field; allowed: delays, queueFrames',
      'queueFrames: must be an integer 1..1000000 (frames held per pair and direction), got 0',
      "delays[0].between[1]: 'hostX' is no node of this lab (fabric nodes: router, controller, mux1, mux2, host1, host2; nics: h1vm1, h1vm2, h2vm1, h2vm2)",
      'delays[1].ms: must be a number of milliseconds 0..10000 (the added round trip), got -1',
      'delays[2].between: host1 and mux1 are also delays[1]; one delay per pair',
      'delays[3].between: two nics: one side must be a mux, host, router or controller (the delay link sits on its fabric port)',
      'delays[4].between: h1vm1 is a nic on host1: its partner must be its host host1 (the link on its port) or a MUX (VXLAN to and from it), not the host host2',
      "delays[5].between: 'mux1' twice; a delay is between two different nodes",
      'delays[6].between: must be two node names, e.g. [mux1, host1], got ["mux2"]',
      'delays[7].jitter: unknown field; allowed: between, ms',
    ]);
  });

  it('set changes one pair and keeps the rest; a pair without a link on its owner is refused with the fix', () => {
    const r = parseDelays(
      'delays:\n  - { between: [mux1, host1], ms: 5 }\n  - { between: [mux2, host1], ms: 40 }\nqueueFrames: 100\n',
      nodes,
    );
    if (!r.ok) throw new Error(r.errors.join('\n'));
    const owners = new Set(['mux1', 'mux2']);
    const s = setDelay(r.settings, 'host1', 'mux1', 60, nodes, owners);
    expect(s.ok && s.settings).toEqual({
      pairs: [
        { owner: 'mux1', peer: 'host1', ms: 60 },
        { owner: 'mux2', peer: 'host1', ms: 40 },
      ],
      queueFrames: 100,
    });
    if (!s.ok) return;
    // the written file reads back to the same settings
    const back = parseDelays(formatDelays(s.settings), nodes, owners);
    expect(back.ok && back.settings).toEqual(s.settings);
    const added = setDelay(r.settings, 'mux2', 'host2', 5, nodes, owners);
    expect(added.ok && added.settings.pairs.length).toBe(3);
    const refused = setDelay(r.settings, 'router', 'host2', 5, nodes, owners);
    expect(refused.ok ? [] : refused.errors).toEqual([
      'delays[2].between: router has no delay link in this lab (links: mux1, mux2); name the pair in the --delays file at lab_up (0 ms is fine) so that its link is built',
    ]);
  });
});

describe('delay link internals', () => {
  it('finds the inner Ethernet frame of VXLAN over IPv4 and IPv6, and nothing in other frames', () => {
    const inner = (b: ReturnType<typeof pkt>) =>
      b
        .vxlan({ vni: 5001 })
        .eth({ src: '02:00:00:00:00:aa', dst: '02:00:c0:00:02:0c' })
        .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' });
    const v4 = inner(pkt().eth().ipv4({ src: '198.18.0.11', dst: '198.18.0.22' }).udp({ sport: 51000, dport: 4789 }))
      .udp({ sport: 1000, dport: 7 })
      .build();
    // 14 Ethernet + 20 IPv4 + 8 UDP + 8 VXLAN
    expect(innerEthernetOffset(v4, v4.length, 4789)).toBe(50);
    expect(v4.subarray(50, 56).toString('hex')).toBe('0200c000020c'); // the nic's MAC, inner destination
    const v6 = inner(pkt().eth().ipv6({ src: '2001:db8:f::11', dst: '2001:db8:f::22' }).udp({ sport: 51000, dport: 4789 }))
      .udp({ sport: 1000, dport: 7 })
      .build();
    expect(innerEthernetOffset(v6, v6.length, 4789)).toBe(70);
    expect(innerEthernetOffset(v4, v4.length, 8472)).toBe(-1);
    expect(innerEthernetOffset(v4, 60, 4789)).toBe(-1); // cut short before the inner header
    const plain = pkt().eth().ipv4({ src: '198.18.0.11', dst: '198.18.0.22' }).udp({ sport: 1, dport: 2 }).payload('x').build();
    expect(innerEthernetOffset(plain, plain.length, 4789)).toBe(-1);
    const frag = pkt()
      .eth()
      .ipv4({ src: '198.18.0.11', dst: '198.18.0.22', fragOffset: 100 })
      .udp({ sport: 4789, dport: 4789 })
      .payload(Buffer.alloc(40))
      .build();
    expect(innerEthernetOffset(frag, frag.length, 4789)).toBe(-1);
  });

  it('the queue gives frames back in order and tracks its bytes', () => {
    const q = new FrameQueue();
    for (let i = 0; i < 3000; i++) q.push(Buffer.from([i & 0xff, i >> 8]), i);
    expect(q.size).toBe(3000);
    expect(q.bytes).toBe(6000);
    for (let i = 0; i < 3000; i++) {
      expect(q.peekAt()).toBe(i);
      const b = q.shift();
      expect(b[0]! | (b[1]! << 8)).toBe(i);
    }
    expect(q.size).toBe(0);
    expect(q.bytes).toBe(0);
    expect(q.peekAt()).toBe(Infinity);
  });
});
