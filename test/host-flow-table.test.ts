// The host agent's general flow table (host-agent/flow-table.ts): keys by VNI and 5-tuple in both
// families, kind and action packed and unpacked, the bound, idle expiry and removal.
import { describe, expect, it } from 'vitest';
import { FLOW_FASTPATH, FLOW_TO_MUX, HostFlowTable, flowAction, flowKind } from '../host-agent/flow-table.js';

const A = 0xc000020a; // 192.0.2.10
const VIP = 0xc0000264; // 192.0.2.100

describe('host flow table', () => {
  it('stores kind and action per (VNI, 5-tuple); another VNI or family is another flow', () => {
    const t = new HostFlowTable(10);
    t.setKey4(5001, A, VIP, 6, 40000, 7000);
    expect(t.insert(FLOW_TO_MUX, 1, 100)).toBe(true);
    const v = t.lookup(10, 100);
    expect([flowKind(v), flowAction(v)]).toEqual([FLOW_TO_MUX, 1]);
    t.setKey4(5002, A, VIP, 6, 40000, 7000);
    expect(t.lookup(10, 100)).toBe(-1);
    t.setKey6(5001, [A, 0, 0, 0], [VIP, 0, 0, 0], 6, 40000, 7000);
    expect(t.lookup(10, 100)).toBe(-1);
    t.setKey4(5001, A, VIP, 6, 40000, 7000);
    expect(t.insert(FLOW_FASTPATH, 0xabcdef, 100)).toBe(true);
    expect(flowKind(t.peek(10))).toBe(FLOW_FASTPATH);
    expect(flowAction(t.peek(10))).toBe(0xabcdef);
    expect(t.size).toBe(1);
    expect(t.countByKind(10)).toEqual({ fastpath: 1 });
  });
  it('is bounded, expires idle entries and removes on request', () => {
    const t = new HostFlowTable(3);
    for (let p = 0; p < 3; p++) {
      t.setKey4(5001, A, VIP, 17, 1000 + p, 53);
      expect(t.insert(FLOW_TO_MUX, 0, 20)).toBe(true);
    }
    t.setKey4(5001, A, VIP, 17, 2000, 53);
    expect(t.insert(FLOW_TO_MUX, 0, 20)).toBe(false);
    t.setKey4(5001, A, VIP, 17, 1000, 53);
    expect(t.remove()).toBe(true);
    expect(t.size).toBe(2);
    expect(t.sweep(20, 1 << 20)).toBe(2); // live while expiresAt > now
    expect(t.size).toBe(0);
    t.setKey4(5001, A, VIP, 17, 2000, 53);
    expect(t.insert(FLOW_TO_MUX, 0, 40)).toBe(true);
  });
});
