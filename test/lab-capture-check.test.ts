// The lab's capture check helpers: pcap-records (records and those cut short by the snapshot length)
// and the binomial bounds the scenarios' share checks use.
import { describe, expect, it } from 'vitest';
import { countPcapRecords } from '../scripts/lab/pcap-records.js';
import { binomialBounds, withinBinomial } from '../scripts/scenarios/lib/stats.js';

/** A classic little-endian pcap file, byte by byte: records of [captured length, packet length]. */
function pcapBytes(records: [number, number][], extra: number[] = []): Uint8Array {
  const out: number[] = [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xe2, 0x05, 0, 0, 1, 0, 0, 0];
  const u32 = (v: number) => [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24];
  for (const [incl, orig] of records) out.push(...u32(1), ...u32(2), ...u32(incl), ...u32(orig), ...new Array<number>(incl).fill(0xab));
  return Uint8Array.from([...out, ...extra]);
}

describe('countPcapRecords', () => {
  it('counts records, those cut short and the longest packet', () => {
    expect(
      countPcapRecords(
        pcapBytes([
          [60, 60],
          [1514, 1514],
          [100, 1514],
          [42, 42],
        ]),
      ),
    ).toEqual({ records: 4, truncated: 1, longest: 1514 });
  });
  it('reads a big-endian file too', () => {
    const b = Uint8Array.from([
      0xa1,
      0xb2,
      0xc3,
      0xd4,
      0,
      2,
      0,
      4,
      ...new Array<number>(16).fill(0),
      0,
      0,
      0,
      1,
      0,
      0,
      0,
      2,
      0,
      0,
      0,
      3,
      0,
      0,
      0,
      9,
      1,
      2,
      3,
    ]);
    expect(countPcapRecords(b)).toEqual({ records: 1, truncated: 1, longest: 9 });
  });
  it('an empty capture has no records', () => {
    expect(countPcapRecords(pcapBytes([]))).toEqual({ records: 0, truncated: 0, longest: 0 });
  });
  it('refuses a file that ends inside a record, or is not pcap', () => {
    const whole = pcapBytes([[60, 60]]);
    expect(() => countPcapRecords(whole.subarray(0, whole.length - 1))).toThrow(/cut short/);
    expect(() => countPcapRecords(pcapBytes([], [1, 2, 3]))).toThrow(/record header cut short/);
    expect(() => countPcapRecords(Uint8Array.from([0x0a, 0x0d, 0x0d, 0x0a, ...new Array<number>(20).fill(0)]))).toThrow(
      /not a classic pcap/,
    );
  });
});

describe('binomialBounds', () => {
  it('is the mean -/+ 6 standard deviations, rounded outwards', () => {
    // n 400, p 1/4: mean 100, sd sqrt(75) = 8.660, 6 sd = 51.96 -> 48.04..151.96
    expect(binomialBounds(400, 0.25)).toMatchObject({ mean: 100, lo: 48, hi: 152 });
    // n 300, p 1/2: mean 150, sd sqrt(75), the same width
    expect(binomialBounds(300, 0.5)).toMatchObject({ lo: 98, hi: 202 });
  });
  it('is exact at p 0 and 1, and stays within 0..n', () => {
    expect(binomialBounds(1000, 0)).toMatchObject({ lo: 0, hi: 0 });
    expect(binomialBounds(10, 1)).toMatchObject({ lo: 10, hi: 10 });
    expect(binomialBounds(10, 0.05)).toMatchObject({ lo: 0 });
  });
  it('withinBinomial takes the bounds inclusive', () => {
    const b = binomialBounds(400, 0.25);
    expect([47, 48, 152, 153].map((k) => withinBinomial(k, b))).toEqual([false, true, true, false]);
  });
  it('refuses a p outside 0..1', () => {
    expect(() => binomialBounds(10, 1.5)).toThrow();
  });
});
