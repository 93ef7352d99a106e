// What a MUX announces (mux/bgp/routes.ts): each VIP it can serve, as a host route with its own
// provider address as next hop; held back, with a reason, when no rule has a backend for new flows,
// when an IPv6 VIP has no IPv6 next hop, when the next-hop address is not on an interface, or while
// the data plane is not ready.
import { describe, expect, it } from 'vitest';
import { ip } from '../shared/addr.js';
import { formatBgpPrefix } from '../shared/bgp-update.js';
import { compileMuxTables, ALL_HEALTHY, type HealthView } from '../mux/tables.js';
import { planVipRoutes } from '../mux/bgp/routes.js';
import { labConfig } from './helpers/lab-config.js';

const facts = { ready: true, hasAddress4: true, hasAddress6: true };
const plan = (config = labConfig(), health: HealthView = ALL_HEALTHY, f = facts, mux = 'mux1') =>
  planVipRoutes(
    compileMuxTables(config, health, null, 1),
    config.muxes.find((m) => m.name === mux)!,
    f,
  );
const held = (p: ReturnType<typeof plan>) => Object.fromEntries(p.vips.map((v) => [v.vip.text, v.held]));

describe('which VIPs a MUX announces', () => {
  it("every VIP, /32 and /128, next hop the MUX's own address and address6", () => {
    const p = plan();
    expect(p.routes.map((r) => `${formatBgpPrefix(r.prefix)} via ${r.nextHop.text}`)).toEqual([
      '203.0.113.10/32 via 198.18.0.11',
      '2001:db8:ff::10/128 via 2001:db8:f::11',
    ]);
    expect(plan(labConfig(), ALL_HEALTHY, facts, 'mux2').routes.map((r) => r.nextHop.text)).toEqual(['198.18.0.12', '2001:db8:f::12']);
  });

  it('keeps a VIP while any rule still has a backend: a probed rule down, an unprobed one up', () => {
    const probesDown: HealthView = { isHealthy: (_nic, probe) => probe !== 'http80' };
    expect(held(plan(labConfig(), probesDown))).toEqual({ '203.0.113.10': null, '2001:db8:ff::10': null });
  });

  it('withdraws a VIP whose every rule has no backend for new flows, and only that VIP', () => {
    // the IPv6 VIP's rules use their own pool here; all its backends are drained
    const config = labConfig((raw) => {
      raw.pools.push({ name: 'web6', backends: raw.pools[0].backends.map((b: any) => ({ ...b, drain: true })) });
      for (const r of raw.vips[1].rules) r.pool = 'web6';
      raw.vips[1].rules[1].backendPort = 17; // the stateless DSR rule: another backend port than the IPv4 echo
      raw.vips[1].rules[0].backendPort = 8080;
    });
    expect(held(plan(config))).toEqual({ '203.0.113.10': null, '2001:db8:ff::10': 'no_healthy_backend' });
    const allDown: HealthView = { isHealthy: () => false };
    expect(
      held(
        plan(
          labConfig((raw) => {
            for (const v of raw.vips) for (const r of v.rules) r.probe = 'tcp80';
          }),
          allDown,
        ),
      ),
    ).toEqual({ '203.0.113.10': 'no_healthy_backend', '2001:db8:ff::10': 'no_healthy_backend' });
  });

  it('no IPv6 VIP without an IPv6 next hop; no route whose next hop is not on an interface; none before the data plane is ready', () => {
    const no6 = labConfig((raw) => {
      delete raw.muxes[0].address6;
    });
    expect(held(plan(no6))).toEqual({ '203.0.113.10': null, '2001:db8:ff::10': 'no_address6' });
    expect(held(plan(labConfig(), ALL_HEALTHY, { ...facts, hasAddress6: false }))).toEqual({
      '203.0.113.10': null,
      '2001:db8:ff::10': 'next_hop_missing',
    });
    expect(held(plan(labConfig(), ALL_HEALTHY, { ...facts, hasAddress4: false }))['203.0.113.10']).toBe('next_hop_missing');
    const p = plan(labConfig(), ALL_HEALTHY, { ...facts, ready: false });
    expect(p.routes).toEqual([]);
    expect(new Set(p.vips.map((v) => v.held))).toEqual(new Set(['data_plane_not_ready']));
    expect(p.vips.map((v) => v.vip.text)).toEqual([ip('203.0.113.10').text, '2001:db8:ff::10']);
  });
});
