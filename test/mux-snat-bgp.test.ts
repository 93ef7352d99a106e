// A MUX announces outbound NAT's frontend IPs like VIPs (docs/outbound.md, mux/bgp/routes.ts): a dedicated
// frontend as its own /32 or /128 with the MUX's next hop, held for the same reasons as a VIP except a
// backend's health (replies to the backends' own connections need no pool), a VIP used as a frontend
// announced once, and gone from the plan (withdrawn) when the config drops the rule.
import { describe, expect, it } from 'vitest';
import { formatBgpPrefix } from '../shared/bgp-update.js';
import { compileMuxTables, ALL_HEALTHY, type HealthView } from '../mux/tables.js';
import { planVipRoutes, type RoutePlanFacts } from '../mux/bgp/routes.js';
import { labConfig } from './helpers/lab-config.js';

const withOutbound = labConfig((raw) => {
  raw.outbound = [{ name: 'out', frontendIps: ['203.0.113.200', '2001:db8:ff::200', '203.0.113.10'], pool: 'web', portsPerNic: 64 }];
});
const facts: RoutePlanFacts = { ready: true, hasAddress4: true, hasAddress6: true };
const plan = (config = withOutbound, f: RoutePlanFacts = facts, health: HealthView = ALL_HEALTHY) =>
  planVipRoutes(compileMuxTables(config, health, null, 1), config.muxes[0]!, f);
const routes = (p: ReturnType<typeof plan>) => p.routes.map((r) => `${formatBgpPrefix(r.prefix)} via ${r.nextHop.text}`);

describe('a MUX announces the outbound NAT frontend IPs', () => {
  it('each dedicated frontend once, /32 and /128, after the VIPs; a VIP used as a frontend only as the VIP', () => {
    const p = plan();
    expect(routes(p)).toEqual([
      '203.0.113.10/32 via 198.18.0.11',
      '2001:db8:ff::10/128 via 2001:db8:f::11',
      '203.0.113.200/32 via 198.18.0.11',
      '2001:db8:ff::200/128 via 2001:db8:f::11',
    ]);
    expect(p.vips.filter((v) => v.frontend).map((v) => v.vip.text)).toEqual(['203.0.113.200', '2001:db8:ff::200']);
  });

  it('held like a VIP while the data plane is not ready or the policy unknown, but never for want of a healthy backend', () => {
    expect(routes(plan(withOutbound, { ...facts, ready: false }))).toEqual([]);
    expect(new Set(plan(withOutbound, { ...facts, policyKnown: false }).vips.map((v) => v.held))).toEqual(new Set(['awaiting_policy']));
    const down = plan(withOutbound, facts, { isHealthy: () => false });
    // the lab's VIPs have unprobed rules: still announced; the frontends in any case
    expect(routes(down)).toContain('203.0.113.200/32 via 198.18.0.11');
    const no6 = labConfig((raw) => {
      raw.outbound = [{ name: 'out', frontendIps: ['203.0.113.200', '2001:db8:ff::200'], pool: 'web', portsPerNic: 64 }];
      delete raw.muxes[0].address6;
    });
    expect(plan(no6).vips.find((v) => v.vip.text === '2001:db8:ff::200')!.held).toBe('no_address6');
  });

  it('a config without the rule: the frontends leave the plan (the speaker withdraws what it no longer lists)', () => {
    expect(routes(plan(labConfig()))).toEqual(['203.0.113.10/32 via 198.18.0.11', '2001:db8:ff::10/128 via 2001:db8:f::11']);
  });
});
