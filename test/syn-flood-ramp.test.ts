// The SYN flood's rate ramp (scripts/lab/syn-flood.ts, scenario 17): the rule that moves the rate, the
// shares, the step line the verifier reads, and the options. Expected rates are worked out by hand from
// the rule as scenario 17 states it (+40 % until the lab first falls short of 97 %, +10 % after; stay at
// >= 90 %; -30 % below; never above the maximum).
import { describe, expect, it } from 'vitest';
import { parseArgs } from '../shared/args.js';
import {
  COMMAND,
  DEFAULT_RAMP,
  formatStepLine,
  nextRate,
  nstatValue,
  optionsOf,
  parseCounters,
  perMille,
  rampStep,
} from '../scripts/lab/syn-flood.js';

describe('nextRate', () => {
  it('follows what the lab carries', () => {
    const steps: [number, number, boolean, number, boolean][] = [
      // rate, share, found -> rate, found
      [20000, 1000, false, 28000, false],
      [28000, 970, false, 39200, false],
      [39200, 969, false, 39200, true],
      [39200, 900, true, 39200, true],
      [39200, 899, true, 27440, true],
      [27440, 970, true, 30184, true],
      [30184, 0, true, 21128, true],
      [1900000, 1000, true, 2000000, true],
      [1500000, 1000, false, 2000000, false],
    ];
    for (const [rate, share, found, want, wantFound] of steps) {
      expect(nextRate(rate, share, found, DEFAULT_RAMP), `${rate} at ${share}`).toEqual({ rate: want, found: wantFound });
    }
  });
});

describe('a step', () => {
  it('shares per mille, the smaller one judged by the caller', () => {
    expect([perMille(969, 1000), perMille(1, 3), perMille(5, 0), perMille(0, 0)]).toEqual([969, 333, 5000, 0]);
    const a = { clientTx: 100, arrived: 90, muxRead: 80, muxTx: 70, hostIn: 60 };
    const b = { clientTx: 20100, arrived: 20090, muxRead: 19480, muxTx: 19470, hostIn: 19460 };
    const s = rampStep(a, b);
    expect(s).toEqual({ sent: 20000, arrived: 20000, muxRead: 19400, muxTx: 19400, hostIn: 19400, shareMux: 970, shareHost: 1000 });
    // the verifier's format: STEP START_US END_US RATE SENT ARRIVED MUX_READ MUX_TX HOST_IN SHARE_MUX SHARE_HOST
    expect(formatStepLine(3, 1000000, 2000000, 20000, s)).toBe('3 1000000 2000000 20000 20000 20000 19400 19400 19400 970 1000\n');
  });
  it("reads the daemons' counters and nstat", () => {
    expect([...parseCounters('{"rx_packets": 5, "control_arp": 1, "state": "up"}', 'mux1')]).toEqual([
      ['rx_packets', 5],
      ['control_arp', 1],
    ]);
    expect(() => parseCounters('', 'the daemon in ns1')).toThrow(/^the daemon in ns1: \/counters is not JSON/);
    expect(() => parseCounters('[1]', 'mux1')).toThrow('mux1: /counters is not a JSON object');
    const nstat =
      '#kernel\nIpInReceives                    7                  0.0\nIpInAddrErrors                  1234               0.0\n';
    expect(nstatValue(nstat, 'IpInAddrErrors')).toBe(1234);
    expect(nstatValue('#kernel\n', 'IpInAddrErrors')).toBe(0);
  });
});

describe('options', () => {
  const req = ['--client-ns', 'c', '--trafgen-file', 'f', '--mux-ns', 'm', '--host-ns', 'h1', '--host-ns', 'h2'];
  const files = ['--out', 'o', '--times', 't', '--log', 'l'];
  const opts = (argv: string[]) => optionsOf(parseArgs(argv, COMMAND.options));
  it("defaults to scenario 17's ramp", () => {
    const o = opts([...req, ...files]);
    expect(o.hostNs).toEqual(['h1', 'h2']);
    expect([o.seconds, o.minSyns, o.maxSeconds, o.stepCapS, o.muxPort, o.hostPort, o.iface]).toEqual([
      12,
      30000,
      90,
      '1.5',
      9180,
      9181,
      'eth0',
    ]);
    expect(o.ramp).toEqual({
      startPps: 20000,
      maxPps: 2000000,
      growPct: 40,
      growFoundPct: 10,
      carriedPerMille: 970,
      holdPerMille: 900,
      fallPct: 30,
    });
  });
  it('refuses what is missing or out of range, naming the option', () => {
    expect(() => opts([...req])).toThrow('--out is required');
    expect(() => opts(['--client-ns', 'c', '--trafgen-file', 'f', '--mux-ns', 'm', ...files])).toThrow(/--host-ns is required/);
    expect(() => opts([...req, ...files, '--step-cap-s', '0'])).toThrow(/--step-cap-s must be a positive number/);
    expect(() => opts([...req, ...files, '--fall-pct', '100'])).toThrow('--fall-pct must be an integer 0..99, got 100');
    expect(() => opts([...req, ...files, '--hold-per-mille', '980'])).toThrow(/--hold-per-mille must not exceed --carried-per-mille/);
  });
});
