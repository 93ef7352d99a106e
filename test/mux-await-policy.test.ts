// A MUX started with a controller and a bootstrap config holds its VIPs back (BGP) until the controller's
// first policy is in force: the bootstrap config knows no health, so before that policy the MUX would send
// new flows to a backend that is down, and flows the router moves to it (from a MUX that placed them with
// that backend out of its table) to another backend than the one they are on. Found by the soak
// (scripts/soak.sh, docs/soak.md): a MUX restarted while a backend was down announced 200 ms before its
// first policy came, and in those 200 ms new connections to the down backend were refused and
// keep-alive connections that moved to it were reset.
import { afterEach, describe, expect, it } from 'vitest';
import { compileMuxTables, ALL_HEALTHY, type HealthView } from '../mux/tables.js';
import { planVipRoutes, type RoutePlanFacts } from '../mux/bgp/routes.js';
import { BGP_POLICY_WAIT_MS, BGP_READY_WAIT_MS, MuxBgp, readinessFacts } from '../mux/bgp/mux-bgp.js';
import { MUX_PROGRAM } from '../mux/main.js';
import type { Daemon } from '../runtime/daemon-main.js';
import type { AppliedPolicy } from '../runtime/policy-client.js';
import type { SlbxConfig } from '../shared/config.js';
import { labConfig } from './helpers/lab-config.js';

const facts: RoutePlanFacts = { ready: true, hasAddress4: true, hasAddress6: true };
const held = (f: RoutePlanFacts) => {
  const config = labConfig();
  const p = planVipRoutes(compileMuxTables(config, ALL_HEALTHY, null, 1), config.muxes[0]!, f);
  return { routes: p.routes.length, held: p.vips.map((v) => v.held) };
};

describe("the route plan waits for the controller's first policy", () => {
  it('holds every VIP as awaiting_policy, announces nothing, until the policy is known', () => {
    expect(held({ ...facts, policyKnown: false })).toEqual({ routes: 0, held: ['awaiting_policy', 'awaiting_policy'] });
    expect(held({ ...facts, policyKnown: true })).toEqual({ routes: 2, held: [null, null] });
    // without a controller the fact is absent: announced as before
    expect(held(facts)).toEqual({ routes: 2, held: [null, null] });
    // a data plane that is not ready either: the policy is the first reason given
    expect(held({ ...facts, ready: false, policyKnown: false }).held).toEqual(['awaiting_policy', 'awaiting_policy']);
  });

  it('readinessFacts: each wait ends with its fact or with its timeout', () => {
    const cases: [boolean, boolean, number, boolean, boolean][] = [
      // dataPlaneReady, policyApplied, sinceStartMs -> ready, policyKnown
      [false, false, 0, false, false],
      [true, false, 100, true, false],
      [true, true, 100, true, true],
      [false, true, 100, false, true],
      [true, false, BGP_POLICY_WAIT_MS - 1, true, false],
      [true, false, BGP_POLICY_WAIT_MS, true, true], // the controller is down: serve with the bootstrap config
      [false, false, BGP_READY_WAIT_MS, true, BGP_READY_WAIT_MS >= BGP_POLICY_WAIT_MS],
    ];
    for (const [dataPlaneReady, policyApplied, sinceStartMs, ready, policyKnown] of cases) {
      expect(readinessFacts({ dataPlaneReady, policyApplied, sinceStartMs }), `${dataPlaneReady} ${policyApplied} ${sinceStartMs}`).toEqual(
        { ready, policyKnown },
      );
    }
  });
});

describe('MUX_PROGRAM.applyPolicy', () => {
  const stub = () => {
    const calls: string[] = [];
    const d = {
      start() {},
      stop() {},
      applyConfig(_c: SlbxConfig, h?: HealthView) {
        calls.push(`applyConfig ${h === undefined ? 'no health' : h.isHealthy('h1vm1', 'http80') ? 'h1vm1 up' : 'h1vm1 down'}`);
      },
      policyApplied() {
        calls.push('policyApplied');
      },
    };
    return { d: d as unknown as Daemon, calls };
  };
  const policy = (o: Partial<AppliedPolicy>): AppliedPolicy => ({
    stateId: 's',
    generation: 2,
    config: labConfig(),
    health: {},
    healthView: { isHealthy: () => true },
    configChanged: false,
    healthChanged: false,
    snat: [],
    snatChanged: false,
    ...o,
  });

  it('tells the daemon of every policy, also one that changes nothing (the first one after a bootstrap config usually does not)', () => {
    const { d, calls } = stub();
    MUX_PROGRAM.applyPolicy!(d, policy({}));
    expect(calls).toEqual(['policyApplied']);
  });

  it('installs the health first, then lets BGP announce', () => {
    const { d, calls } = stub();
    MUX_PROGRAM.applyPolicy!(
      d,
      policy({ healthChanged: true, health: { 'h1vm1/http80': 'down' }, healthView: { isHealthy: (nic) => nic !== 'h1vm1' } }),
    );
    expect(calls).toEqual(['applyConfig h1vm1 down', 'policyApplied']);
  });
});

describe('MuxBgp with policyKnown', () => {
  let bgp: MuxBgp | null = null;
  afterEach(() => {
    bgp?.stop();
    bgp = null;
  });

  it('holds the VIPs while the policy is unknown and announces them at the replan that follows it', () => {
    const config = labConfig((raw) => {
      raw.bgp.peers[0].port = 1;
      raw.bgp.reconnectMinMs = 60000;
      raw.bgp.reconnectMaxMs = 60000;
    });
    let known = false;
    const logs: { event: string; fields: Record<string, unknown> }[] = [];
    bgp = new MuxBgp({
      name: 'mux1',
      config,
      tables: () => compileMuxTables(config, ALL_HEALTHY, null, 1),
      ready: () => true,
      policyKnown: () => known,
      hasAddress: () => true,
      log: (_l, event, fields) => logs.push({ event, fields }),
    });
    bgp.start();
    const vips = () =>
      (bgp!.status()!.vips as { vip: string; announced: boolean; reason: string | null }[]).map(
        (v) => `${v.vip} ${v.reason ?? 'announced'}`,
      );
    expect(vips()).toEqual(['203.0.113.10 awaiting_policy', '2001:db8:ff::10 awaiting_policy']);
    expect(logs.filter((l) => l.event === 'bgp_vip_held').map((l) => l.fields.reason)).toEqual(['awaiting_policy', 'awaiting_policy']);
    known = true;
    bgp.replan();
    expect(vips()).toEqual(['203.0.113.10 announced', '2001:db8:ff::10 announced']);
    expect(logs.filter((l) => l.event === 'bgp_vip_announce').map((l) => l.fields.was)).toEqual(['awaiting_policy', 'awaiting_policy']);
  });
});
