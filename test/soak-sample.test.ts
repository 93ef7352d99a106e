// The soak's small parsers: /proc text in the sampler (scripts/soak/sample.ts), HTTP response heads in
// the traffic generator (scripts/soak/traffic.ts); and the sampler on this very process.
import { describe, expect, it } from 'vitest';
import { parseCpuS, parseDaemonList, parseStatusKb, parseVmRssKb, sampleDaemon } from '../scripts/soak/sample.js';
import { parseResponseHead } from '../scripts/soak/traffic.js';

describe('sampler parsers', () => {
  it('VmRSS from /proc/PID/status', () => {
    expect(parseVmRssKb('Name:\tnode\nVmPeak:\t  999 kB\nVmRSS:\t  123456 kB\nRssAnon:\t 1 kB\n')).toBe(123456);
    expect(parseVmRssKb('Name:\tkthreadd\n')).toBeNull();
  });

  it('RssAnon and RssFile from /proc/PID/status; their sum is VmRSS on this process (with RssShmem)', () => {
    const text = 'VmRSS:\t  300 kB\nRssAnon:\t  120 kB\nRssFile:\t  170 kB\nRssShmem:\t 10 kB\n';
    expect([parseStatusKb(text, 'RssAnon'), parseStatusKb(text, 'RssFile'), parseStatusKb(text, 'Nope')]).toEqual([120, 170, null]);
    const s = sampleDaemon('me', process.pid, 1);
    expect(s.rssAnonKb).toBeGreaterThan(0);
    expect(s.rssFileKb).toBeGreaterThan(0);
    // the kernel's own sum (sampled at one instant: VmRSS = RssAnon + RssFile + RssShmem)
    expect(s.rssKb! - s.rssAnonKb! - s.rssFileKb!).toBeGreaterThanOrEqual(0);
  });

  it('utime + stime from /proc/PID/stat, also with spaces and parentheses in the command', () => {
    const rest = 'S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0';
    expect(parseCpuS(`4321 (node) ${rest}`)).toBe(3);
    expect(parseCpuS(`4321 (a (b) c) ${rest}`)).toBe(3);
    expect(parseCpuS('garbage')).toBeNull();
  });

  it('"NAME PID" lines; comments, blanks and bad PIDs skipped', () => {
    expect(parseDaemonList('mux1 100\n# x\n\n  host1   200 \nbird x\nmux2\n')).toEqual([
      { name: 'mux1', pid: 100 },
      { name: 'host1', pid: 200 },
    ]);
  });

  it('samples a live process, and says when one is gone', () => {
    const s = sampleDaemon('me', process.pid, 1);
    expect(s.gone).toBeUndefined();
    expect(s.rssKb).toBeGreaterThan(1000);
    expect(s.fds).toBeGreaterThan(2);
    expect(s.cpuS).toBeGreaterThan(0);
    expect(sampleDaemon('none', 2 ** 22 + 12345, 1)).toEqual({
      t: 1,
      name: 'none',
      pid: 2 ** 22 + 12345,
      rssKb: null,
      fds: null,
      cpuS: null,
      gone: true,
    });
  });
});

describe('parseResponseHead', () => {
  it('status, X-Backend (any case), Content-Length', () => {
    expect(parseResponseHead('HTTP/1.1 200 OK\r\nX-Backend: h1vm1\r\ncontent-length: 6\r\nconnection: close')).toEqual({
      status: 200,
      backend: 'h1vm1',
      length: 6,
    });
    expect(parseResponseHead('HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain')).toEqual({
      status: 503,
      backend: null,
      length: null,
    });
    expect(parseResponseHead('garbage').status).toBe(0);
  });
});
