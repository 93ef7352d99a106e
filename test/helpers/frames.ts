// Frame comparison for fixture tests: on a mismatch, print both frames decoded layer by layer, side by
// side, so the failing field is visible at once (instead of two hex blobs).
import { expect } from 'vitest';
import { dissect, type DissectedLayer } from '../../shared/dissect.js';
import { LINKTYPE_ETHERNET } from '../../shared/pcap-file.js';

function rows(layers: DissectedLayer[]): string[] {
  const out: string[] = [];
  for (const l of layers) {
    for (const [k, v] of Object.entries(l)) {
      if (k === 'layer' || k === 'off') continue;
      out.push(`${l.layer}.${k}=${typeof v === 'number' && k.toLowerCase().includes('flags') ? `0x${v.toString(16)}` : String(v)}`);
    }
  }
  return out;
}

/** Side-by-side decode of two frames, marking the rows that differ. */
export function describeDiff(actual: Uint8Array, expected: Uint8Array, linkType = LINKTYPE_ETHERNET): string {
  const a = rows(dissect(actual, linkType).layers);
  const e = rows(dissect(expected, linkType).layers);
  const n = Math.max(a.length, e.length);
  const w = Math.max(8, ...e.map((s) => s.length));
  const lines = [`${'expected'.padEnd(w)} | actual`];
  for (let i = 0; i < n; i++) {
    const mark = a[i] === e[i] ? '  ' : '≠ ';
    lines.push(`${mark}${(e[i] ?? '').padEnd(w)} | ${a[i] ?? ''}`);
  }
  let firstByte = -1;
  for (let i = 0; i < Math.max(actual.length, expected.length); i++)
    if (actual[i] !== expected[i]) {
      firstByte = i;
      break;
    }
  lines.push(`lengths: expected ${expected.length}, actual ${actual.length}; first differing byte: ${firstByte}`);
  return lines.join('\n');
}

/** Asserts byte equality, explaining a mismatch field by field. */
export function expectFrame(actual: Uint8Array, expected: Uint8Array, linkType = LINKTYPE_ETHERNET): void {
  const same = actual.length === expected.length && actual.every((b, i) => b === expected[i]);
  if (!same) expect.fail(`frames differ\n${describeDiff(actual, expected, linkType)}`);
}
