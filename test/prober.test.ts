// The host agent's prober (host-agent/prober.ts) without namespaces: its plan from the config, and whole
// probe runs against simulated backends (a few lines that answer like a kernel and an HTTP server would,
// with frames from the packet builder), on fake timers: first results, detection of a stopped server
// within interval x downThreshold + one interval, recovery, the listener, status and config changes.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { dissect } from '../shared/dissect.js';
import { TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import type { ProbeStatus } from '../shared/probe-state.js';
import type { SlbxConfig } from '../shared/config.js';
import { Prober, planProbeTargets } from '../host-agent/prober.js';
import { labConfig } from './helpers/lab-config.js';

const PORT_MACS: Record<string, string> = { h1vm1: '02:00:00:01:00:01', h1vm2: '02:00:00:01:00:02' };

describe('probe plan', () => {
  it('probes every (local nic, probe, VIP family) a rule uses, from the gateway of that family', () => {
    const plan = planProbeTargets(labConfig(), 'host1');
    expect(plan.map((p) => [p.key, p.dst.text, p.src?.text, p.probe.port, p.probe.path, p.rules])).toEqual([
      ['h1vm1/http80/4', '192.0.2.10', '192.0.2.1', 80, '/health', ['203.0.113.10:80/web-http']],
      ['h1vm1/http80/6', '2001:db8:d::10', '2001:db8:d::1', 80, '/health', ['[2001:db8:ff::10]:80/web-http']],
      ['h1vm2/http80/4', '192.0.2.11', '192.0.2.1', 80, '/health', ['203.0.113.10:80/web-http']],
      ['h1vm2/http80/6', '2001:db8:d::11', '2001:db8:d::1', 80, '/health', ['[2001:db8:ff::10]:80/web-http']],
    ]);
    expect(planProbeTargets(labConfig(), 'host2').map((p) => p.key)).toEqual([
      'h2vm1/http80/4',
      'h2vm1/http80/6',
      'h2vm2/http80/4',
      'h2vm2/http80/6',
    ]);
  });

  it('only the family whose rules use the probe; a probe no rule names is not run; rules sharing a probe share the target', () => {
    const config = labConfig((raw) => {
      raw.vips[1].rules[0].probe = null; // the IPv6 web rule: no probe
      raw.vips[0].rules[2].probe = 'http80'; // web-alt (8080 -> 8000) uses it too
    });
    const plan = planProbeTargets(config, 'host1');
    expect(plan.map((p) => [p.key, p.rules])).toEqual([
      ['h1vm1/http80/4', ['203.0.113.10:80/web-http', '203.0.113.10:8080/web-alt']],
      ['h1vm2/http80/4', ['203.0.113.10:80/web-http', '203.0.113.10:8080/web-alt']],
    ]);
  });
});

// ---------------------------------------------------------------------------------------------

type Behaviour = 'ok' | 'closed' | 'silent' | '503';

/** Backends that answer the prober's frames the way a Linux stack and the lab's HTTP server would. */
function backends(behaviour: Record<string, Behaviour>, deliver: (nic: string, ipPacket: Buffer) => void) {
  const sentByNic: Record<string, number> = {};
  const send = (nic: string, frame: Buffer, len: number): boolean => {
    sentByNic[nic] = (sentByNic[nic] ?? 0) + 1;
    const d = dissect(frame.subarray(0, len));
    const tcp = d.all('tcp')[0]!;
    const l3 = d.layers.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6')!;
    const v6 = l3.layer === 'ipv6';
    const ipb = () => (v6 ? pkt().ipv6({ src: l3.dst, dst: l3.src }) : pkt().ipv4({ src: l3.dst, dst: l3.src }));
    const b = behaviour[nic] ?? 'ok';
    const reply = (seq: number, ack: number, flags: number, data?: string) => {
      const p = ipb().tcp({ sport: tcp.dstPort, dport: tcp.srcPort, seq, ack, flags });
      const bytes = (data !== undefined ? p.payload(data) : p).build();
      queueMicrotask(() => deliver(nic, bytes)); // answers come later, from the capture
    };
    if (b === 'silent') return true;
    if (tcp.flags === TCP_SYN) {
      if (b === 'closed') reply(0, (tcp.seq + 1) >>> 0, TCP_RST | TCP_ACK);
      else reply(5000, (tcp.seq + 1) >>> 0, TCP_SYN | TCP_ACK);
    } else if (tcp.payloadLen > 0) {
      const body = b === '503' ? 'HTTP/1.1 503 Service Unavailable\r\n\r\n' : 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';
      reply(5001, (tcp.seq + tcp.payloadLen) >>> 0, TCP_ACK | TCP_PSH | TCP_FIN, body);
    }
    return true;
  };
  return { send, sentByNic };
}

describe('prober against simulated backends', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function setup(
    o: {
      behaviour?: Record<string, Behaviour>;
      edit?: (raw: any) => void;
      after?: (c: SlbxConfig) => SlbxConfig;
      openPorts?: string[];
    } = {},
  ) {
    const validated = labConfig((raw) => {
      raw.probes[0].intervalMs = 1000;
      raw.probes[0].timeoutMs = 500;
      raw.probes[0].upThreshold = 2;
      raw.probes[0].downThreshold = 2;
      o.edit?.(raw);
    });
    const config = o.after === undefined ? validated : o.after(validated);
    const behaviour: Record<string, Behaviour> = { ...(o.behaviour ?? {}) };
    const logs: { level: string; event: string; fields: Record<string, unknown> }[] = [];
    const calls: ProbeStatus[][] = [];
    let prober: Prober | null = null;
    const open = new Set(o.openPorts ?? Object.keys(PORT_MACS));
    const be = backends(behaviour, (nic, bytes) => prober!.onLocalPacket(nic, bytes, 0, bytes.length));
    prober = new Prober({
      hostName: 'host1',
      config,
      ports: { portMac: (nic) => (open.has(nic) ? mac(PORT_MACS[nic]!) : null), send: be.send },
      onChange: (r) => calls.push(r),
      log: (level, event, fields) => logs.push({ level, event, fields }),
      random: () => 0.5,
    });
    const byKey = () => Object.fromEntries(prober!.status().map((s) => [`${s.nic}/${s.family}`, s.state]));
    return { prober, behaviour, logs, calls, byKey, be, config };
  }

  it('every target comes up with its first probe; the listener gets the full set on each change', async () => {
    const t = setup();
    t.prober.start();
    expect(t.byKey()).toEqual({ 'h1vm1/4': 'unknown', 'h1vm1/6': 'unknown', 'h1vm2/4': 'unknown', 'h1vm2/6': 'unknown' });
    await vi.advanceTimersByTimeAsync(600); // first probes within min(interval, 1 s) x random (0.5 here)
    expect(t.byKey()).toEqual({ 'h1vm1/4': 'up', 'h1vm1/6': 'up', 'h1vm2/4': 'up', 'h1vm2/6': 'up' });
    expect(t.calls).toHaveLength(4);
    expect(t.calls[3]!.map((s) => s.state)).toEqual(['up', 'up', 'up', 'up']);
    const s = t.prober.status()[0]!;
    expect(s).toMatchObject({
      nic: 'h1vm1',
      probe: 'http80',
      family: 4,
      target: '192.0.2.10:80',
      state: 'up',
      healthy: true,
      lastResult: 'success',
      detail: 'http 200',
      successes: 1,
      failures: 0,
    });
    expect(s.reason).toBe('first probe succeeded; last: http 200');
    expect(Date.parse(s.since)).not.toBeNaN();
    expect(t.logs.filter((l) => l.event === 'probe_state')).toHaveLength(4);
    t.prober.stop();
  });

  it('a stopped HTTP server is down within interval x downThreshold + one interval, and comes back after upThreshold successes', async () => {
    const t = setup();
    t.prober.start();
    await vi.advanceTimersByTimeAsync(2000);
    expect(t.byKey()['h1vm1/4']).toBe('up');
    t.behaviour['h1vm1'] = 'closed';
    const killedAt = Date.now();
    let downAt = 0;
    for (let ms = 0; ms < 5000 && downAt === 0; ms += 10) {
      await vi.advanceTimersByTimeAsync(10);
      if (t.byKey()['h1vm1/4'] === 'down' && t.byKey()['h1vm1/6'] === 'down') downAt = Date.now();
    }
    expect(downAt - killedAt).toBeGreaterThan(0);
    expect(downAt - killedAt).toBeLessThanOrEqual(1000 * 2 + 1000);
    expect(t.byKey()).toMatchObject({ 'h1vm2/4': 'up', 'h1vm2/6': 'up' });
    const st = t.prober.status().find((x) => x.nic === 'h1vm1' && x.family === 4)!;
    expect(st).toMatchObject({ state: 'down', healthy: false, detail: 'refused', lastResult: 'failure' });
    expect(st.reason).toBe('2 consecutive failures (downThreshold 2); last: refused');
    const log = t.logs.find((l) => l.event === 'probe_state' && l.fields['to'] === 'down')!;
    expect(log).toMatchObject({
      level: 'warn',
      fields: { nic: 'h1vm1', from: 'up', to: 'down', detail: 'refused', reason: '2 consecutive failures (downThreshold 2)' },
    });
    expect(
      t.calls
        .at(-1)!
        .filter((x) => !x.healthy)
        .map((x) => `${x.nic}/${x.family}`)
        .sort(),
    ).toEqual(['h1vm1/4', 'h1vm1/6']);

    t.behaviour['h1vm1'] = 'ok';
    await vi.advanceTimersByTimeAsync(1000);
    expect(t.byKey()['h1vm1/4']).toBe('down'); // one success is not enough
    await vi.advanceTimersByTimeAsync(1000);
    expect(t.byKey()).toEqual({ 'h1vm1/4': 'up', 'h1vm1/6': 'up', 'h1vm2/4': 'up', 'h1vm2/6': 'up' });
    t.prober.stop();
  });

  it('names what failed: a 503, a timeout, a port that is not open', async () => {
    const t = setup({ behaviour: { h1vm1: '503', h1vm2: 'silent' }, openPorts: ['h1vm1', 'h1vm2'] });
    t.prober.start();
    await vi.advanceTimersByTimeAsync(3000);
    const st = Object.fromEntries(t.prober.status().map((s) => [`${s.nic}/${s.family}`, [s.state, s.detail]]));
    expect(st).toEqual({
      'h1vm1/4': ['down', 'http 503'],
      'h1vm1/6': ['down', 'http 503'],
      'h1vm2/4': ['down', 'timeout (no syn-ack)'],
      'h1vm2/6': ['down', 'timeout (no syn-ack)'],
    });
    t.prober.stop();
    const u = setup({ openPorts: ['h1vm2'] });
    u.prober.start();
    await vi.advanceTimersByTimeAsync(3000);
    expect(u.prober.status().find((s) => s.nic === 'h1vm1')).toMatchObject({ state: 'down', detail: 'port not open' });
    u.prober.stop();
  });

  it('probes at the interval, never later, one at a time', async () => {
    const t = setup();
    t.prober.start();
    await vi.advanceTimersByTimeAsync(10_500);
    // 4 targets, an HTTP probe = SYN + request + RST = 3 frames; first probes at 500 ms, then every 975 ms (jitter 0.5 x 50)
    const probes = (t.be.sentByNic['h1vm1']! + t.be.sentByNic['h1vm2']!) / 3;
    expect(probes).toBe(4 * 11);
    const details = t.prober.details();
    expect(details.map((d) => d['sent'])).toEqual([11, 11, 11, 11]);
    t.prober.stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect((t.be.sentByNic['h1vm1']! + t.be.sentByNic['h1vm2']!) / 3).toBe(4 * 11);
  });

  it('follows config changes: removed targets stop, new ones start, the rest keep their state', async () => {
    const t = setup();
    t.prober.start();
    await vi.advanceTimersByTimeAsync(2000);
    const callsBefore = t.calls.length;
    const next = labConfig((raw) => {
      raw.probes[0].intervalMs = 1000;
      raw.probes[0].timeoutMs = 500;
      raw.vips[1].rules[0].probe = null; // IPv6 web: no probe any more
      raw.vips[0].rules[2].probe = 'tcp80'; // web-alt gets a TCP probe
    });
    t.prober.applyConfig(next);
    expect(t.calls.length).toBe(callsBefore + 1);
    expect(t.prober.status().map((s) => [s.nic, s.probe, s.family, s.state])).toEqual([
      ['h1vm1', 'http80', 4, 'up'],
      ['h1vm1', 'tcp80', 4, 'unknown'],
      ['h1vm2', 'http80', 4, 'up'],
      ['h1vm2', 'tcp80', 4, 'unknown'],
    ]);
    expect(t.logs.find((l) => l.event === 'probes_changed')!.fields).toEqual({
      added: ['h1vm1/tcp80/4', 'h1vm2/tcp80/4'],
      removed: ['h1vm1/http80/6', 'h1vm2/http80/6'],
    });
    await vi.advanceTimersByTimeAsync(6000); // tcp80 keeps the default interval (5 s), first probe within 1 s
    expect(t.prober.status().map((s) => [s.probe, s.state, s.detail])).toEqual([
      ['http80', 'up', 'http 200'],
      ['tcp80', 'up', 'syn-ack'],
      ['http80', 'up', 'http 200'],
      ['tcp80', 'up', 'syn-ack'],
    ]);
    t.prober.stop();
  });

  it('a network without a gateway of the family cannot be probed: unknown (healthy), said so once', async () => {
    // config validation refuses such a config (shared/config.ts); the prober still copes with one
    const t = setup({ after: (c) => ({ ...c, networks: c.networks.map((n) => ({ ...n, gateway6: null })) }) });
    t.prober.start();
    await vi.advanceTimersByTimeAsync(3000);
    const v6 = t.prober.status().filter((s) => s.family === 6);
    expect(v6.map((s) => [s.state, s.healthy, s.detail])).toEqual([
      ['unknown', true, 'cannot probe: network tenant-a has no IPv6 gateway'],
      ['unknown', true, 'cannot probe: network tenant-a has no IPv6 gateway'],
    ]);
    expect(t.logs.filter((l) => l.event === 'probe_impossible')).toHaveLength(2);
    t.prober.stop();
  });

  it('a listener that throws is logged, not fatal', async () => {
    const t = setup();
    t.prober.onChange = () => {
      throw new Error('controller unreachable');
    };
    t.prober.start();
    await vi.advanceTimersByTimeAsync(1000);
    expect(t.logs.filter((l) => l.event === 'health_listener_failed')).toHaveLength(4);
    expect(t.byKey()['h1vm1/4']).toBe('up');
    t.prober.stop();
  });
});
