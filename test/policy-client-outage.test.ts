// Control-plane failures are visible without flooding the log (runtime/policy-client.ts): while the
// controller is down, the status heartbeat and the host's health report fail on every retry; each is
// logged at warn once, when it starts failing, and at info once, when it works again (with the number of
// failed attempts), every other failure at debug. Against a real controller on 127.0.0.1, stopped and
// started again on the same port.
import { afterEach, describe, expect, it } from 'vitest';
import { PolicyClient } from '../runtime/policy-client.js';
import type { LogLevel } from '../runtime/log.js';
import { labConfig } from './helpers/lab-config.js';
import { startTestController, type TestController } from './helpers/controller.js';

const until = async (what: string, f: () => boolean, ms = 15_000) => {
  const t0 = Date.now();
  while (!f()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

interface Line {
  level: LogLevel;
  event: string;
  fields: Record<string, unknown>;
}

describe('policy client: one warn per outage, one info at recovery', () => {
  let ctl: TestController | null = null;
  let client: PolicyClient | null = null;
  afterEach(async () => {
    client?.stop();
    await ctl?.cleanup();
  });

  it('heartbeat and health report: warn at the first failure, debug for the retries, info when they work again', async () => {
    ctl = await startTestController();
    const lines: Line[] = [];
    client = new PolicyClient({
      url: new URL(ctl.url),
      kind: 'host',
      name: 'host1',
      bootstrap: labConfig(),
      apply: () => {},
      heartbeat: () => ({ status: { name: 'host1' } }),
      waitS: 1,
      heartbeatMs: 50,
      healthResendMs: 100,
      backoffMinMs: 20,
      backoffMaxMs: 50,
      log: (level, event, fields) => {
        lines.push({ level, event, fields });
      },
    });
    client.start();
    client.reportHealth([{ nic: 'h1vm1', probe: 'http80', state: 'up' }]);
    const seen = (event: string, level?: LogLevel) => lines.filter((l) => l.event === event && (level === undefined || l.level === level));
    await until('connected and health sent', () => seen('controller_connected').length > 0 && client!.status().health?.sentAt != null);
    expect(seen('heartbeat_failed')).toEqual([]);

    await ctl.stop();
    // several failed retries of each
    await until('retries', () => seen('heartbeat_failed').length >= 4 && seen('health_send_failed').length >= 3);
    for (const ev of ['heartbeat_failed', 'health_send_failed']) {
      expect(seen(ev, 'warn'), ev).toHaveLength(1);
      expect(
        seen(ev).filter((l) => l.level !== 'warn' && l.level !== 'debug'),
        ev,
      ).toEqual([]);
      expect(seen(ev)[0]!.level, `${ev}: the first of the outage is the warning`).toBe('warn');
      expect(String(seen(ev, 'warn')[0]!.fields.error)).not.toBe('');
    }
    expect(seen('heartbeat_recovered')).toEqual([]);

    await ctl.restart();
    await until('recovered', () => seen('heartbeat_recovered').length > 0 && seen('health_send_recovered').length > 0);
    const failedBefore = { hb: seen('heartbeat_failed').length, health: seen('health_send_failed').length };
    for (const [ev, failed] of [
      ['heartbeat_recovered', failedBefore.hb],
      ['health_send_recovered', failedBefore.health],
    ] as const) {
      const r = seen(ev);
      expect(r, ev).toHaveLength(1);
      expect(r[0]!.level).toBe('info');
      // every failed attempt of the outage is counted in the recovery line
      expect(r[0]!.fields.failures, ev).toBe(failed);
      expect(Number(r[0]!.fields.outageMs)).toBeGreaterThan(0);
    }

    // a second outage warns again, once
    await ctl.stop();
    await until(
      'second outage',
      () => seen('heartbeat_failed', 'warn').length === 2 && seen('heartbeat_failed').length >= failedBefore.hb + 3,
    );
    expect(seen('heartbeat_failed', 'warn')).toHaveLength(2);
  });
});
