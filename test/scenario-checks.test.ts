// The scenario verifiers' assertions (scripts/scenarios/lib/check.ts): a verifier that cross-checks with
// tshark fails when tshark cannot be run, even if its caller only skipped the comparison.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Checks, tsharkFields } from '../scripts/scenarios/lib/check.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../shared/pcap-file.js';
import { pkt } from '../shared/packet-builder.js';

/** Runs exit() of `c` and returns its exit code and what it printed. */
function exitOf(c: Checks): { code: number; out: string } {
  let out = '';
  const w = vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
    out += String(s);
    return true;
  });
  const x = vi.spyOn(process, 'exit').mockImplementation(((code?: number) => {
    throw Object.assign(new Error('exit'), { exitCode: code });
  }) as never);
  try {
    c.exit();
  } catch (e) {
    return { code: (e as { exitCode: number }).exitCode, out };
  } finally {
    w.mockRestore();
    x.mockRestore();
  }
  throw new Error('exit() returned');
}

describe('tshark cross-checks', () => {
  const path = process.env.PATH;
  const dir = mkdtempSync(join(tmpdir(), 'slbx-checks-'));
  const pcap = join(dir, 'one.pcap');
  const frame = pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).udp({ sport: 1, dport: 7 }).build();
  writeFileSync(pcap, buildPcap(LINKTYPE_ETHERNET, [{ tsUs: 1, data: frame, origLen: frame.length }]));
  afterEach(() => {
    process.env.PATH = path;
  });

  it('without tshark on PATH: null to the caller, and the verifier fails at exit, naming the capture', () => {
    process.env.PATH = dir; // a folder without tshark
    const c = new Checks();
    c.check(true, 'something the codecs checked');
    expect(tsharkFields(pcap, ['udp.dstport'])).toBeNull();
    const r = exitOf(c);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      /FAIL {2}tshark cross-checks ran {2}\(tshark could not be run \(not installed; apt-get install tshark\): 1 cross-check\(s\) of .*one\.pcap did not run\)/,
    );
    expect(r.out).toMatch(/FAILED: 1 checks passed, 1 failed/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('the next verifier in the same process starts clean', () => {
    const c = new Checks();
    c.check(true, 'fine');
    expect(exitOf(c)).toEqual({ code: 0, out: expect.stringMatching(/OK: 1 checks passed, 0 failed/) });
  });
});
