// Assertions for scenario verifiers: each check prints one line (PASS/FAIL and what was measured), and
// the verifier's exit code is the number of failures (0 = the scenario's claims hold).
import { readFileSync, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { readPcap } from '../../../shared/pcap-file.js';
import { dissect, type Dissection } from '../../../shared/dissect.js';
import { formatConfigErrors, parseConfig, type SlbxConfig } from '../../../shared/config.js';

export class Checks {
  failures = 0;
  passes = 0;
  readonly lines: string[] = [];

  check(ok: boolean, what: string, detail = ''): boolean {
    const line = `${ok ? 'PASS' : 'FAIL'}  ${what}${detail ? `  (${detail})` : ''}`;
    this.lines.push(line);
    process.stdout.write(`${line}\n`);
    if (ok) this.passes++;
    else this.failures++;
    return ok;
  }

  /** Records a measured fact without asserting anything. */
  note(what: string): void {
    const line = `      ${what}`;
    this.lines.push(line);
    process.stdout.write(`${line}\n`);
  }

  exit(): never {
    if (tsharkMissing.length > 0) {
      this.check(
        false,
        'tshark cross-checks ran',
        `tshark could not be run (${tsharkMissing[0]!.why}; apt-get install tshark): ${tsharkMissing.length} cross-check(s) of ${[...new Set(tsharkMissing.map((m) => m.path))].join(', ')} did not run`,
      );
      tsharkMissing.length = 0;
    }
    process.stdout.write(`${this.failures === 0 ? 'OK' : 'FAILED'}: ${this.passes} checks passed, ${this.failures} failed\n`);
    process.exit(this.failures === 0 ? 0 : 1);
  }
}

export interface CapturedPacket {
  index: number;
  tsUs: number;
  data: Uint8Array;
  d: Dissection;
}

/** Reads and decodes a capture with slbx's own codecs. Throws when missing or unreadable. */
export function loadCapture(path: string): CapturedPacket[] {
  if (!existsSync(path)) throw new Error(`capture ${path} is missing`);
  const r = readPcap(readFileSync(path));
  if (typeof r === 'number') throw new Error(`capture ${path} is not a pcap file`);
  return r.packets.map((p, i) => ({ index: i + 1, tsUs: p.tsUs, data: p.data, d: dissect(p.data, r.linkType) }));
}

export function loadConfig(path: string): SlbxConfig {
  const r = parseConfig(readFileSync(path, 'utf8'), path);
  if (!r.ok) throw new Error(formatConfigErrors(r.errors, path));
  return r.config;
}

/**
 * Cross-checks that could not run because tshark could not be started. A verifier that cross-checks
 * with tshark must not pass without it: Checks.exit() turns these into one FAIL line, whatever the
 * caller did with the null it got.
 */
const tsharkMissing: { path: string; why: string }[] = [];

/** Records that a tshark cross-check of `path` could not run (for callers that spawn tshark themselves). */
export function tsharkUnavailable(path: string, error: Error): void {
  tsharkMissing.push({ path, why: (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'not installed' : error.message });
}

/**
 * tshark's own decode, one row of fields per packet (occurrences joined by ','). Null when tshark
 * cannot be started: the caller skips its comparison, and the verifier fails at exit() (tsharkMissing).
 */
export function tsharkFields(
  path: string,
  fields: string[],
  filter = '',
  decodeAs = ['udp.port==4789,vxlan'],
  prefs: string[] = [], // -o preferences, e.g. udp.check_checksum:TRUE
): string[][] | null {
  const args = ['-r', path, '-T', 'fields', '-E', 'separator=/t', '-E', 'occurrence=a', '-E', 'aggregator=,'];
  for (const d of decodeAs) args.push('-d', d);
  for (const o of prefs) args.push('-o', o);
  if (filter) args.push('-Y', filter);
  for (const f of fields) args.push('-e', f);
  const r = spawnSync('tshark', args, { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.error) {
    tsharkUnavailable(path, r.error);
    return null;
  }
  if (r.status !== 0) throw new Error(`tshark failed on ${path}: ${r.stderr}`);
  const text = r.stdout.trimEnd();
  return text === '' ? [] : text.split('\n').map((l) => l.split('\t'));
}

export function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/** The IP packet of a decoded frame (outermost), as bytes, or null. */
export function outerIpPacket(p: CapturedPacket): Uint8Array | null {
  const l = p.d.layers.find((x) => x.layer === 'ipv4' || x.layer === 'ipv6');
  if (l === undefined) return null;
  const len = l.layer === 'ipv4' ? l.totalLength : 40 + l.payloadLength;
  return p.data.subarray(l.off, l.off + len);
}

/** The inner IP packet of a VXLAN frame, or null. */
export function innerIpPacket(p: CapturedPacket): Uint8Array | null {
  const vx = p.d.layers.findIndex((x) => x.layer === 'vxlan');
  if (vx < 0) return null;
  const l = p.d.layers.slice(vx).find((x) => x.layer === 'ipv4' || x.layer === 'ipv6');
  if (l === undefined) return null;
  const len = l.layer === 'ipv4' ? l.totalLength : 40 + l.payloadLength;
  return p.data.subarray(l.off, l.off + len);
}

export function countBy<T>(xs: Iterable<T>, key: (x: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const x of xs) {
    const k = key(x);
    m.set(k, (m.get(k) ?? 0) + 1);
  }
  return m;
}

export function fmtCounts(m: Map<string, number>): string {
  return [...m.entries()]
    .sort()
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ');
}

/** argv --name value pairs into a map (verifiers take only such). */
export function flagsOf(argv: readonly string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i]!;
    if (!k.startsWith('--') || argv[i + 1] === undefined) throw new Error(`expected --name value pairs, got ${k}`);
    m.set(k.slice(2), argv[i + 1]!);
  }
  return m;
}

export function need(m: Map<string, string>, k: string): string {
  const v = m.get(k);
  if (v === undefined) throw new Error(`missing --${k}`);
  return v;
}
