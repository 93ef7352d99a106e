// The Fastpath redirect codec and its HMAC: round trip, at an offset, refusals, and a golden vector made
// with the openssl command line (docs/east-west.md), so that the layout and the MAC cannot be wrong together:
//   KEY=$(printf slbx-redirect | openssl dgst -sha256 -hmac "$TOKEN" -r | cut -d' ' -f1)
//   printf "$MSG" | xxd -r -p | openssl dgst -sha256 -mac HMAC -macopt hexkey:$KEY
import { describe, expect, it } from 'vitest';
import { ip, mac, writeIpAddr } from '../shared/addr.js';
import { ERR_BAD_VERSION, ERR_TRUNCATED } from '../shared/codec-error.js';
import {
  REDIRECT_LEN,
  REDIRECT_SIGNED_LEN,
  newRedirect,
  parseRedirect,
  redirectMacEqual,
  writeRedirect,
  type Redirect,
} from '../shared/redirect.js';
import { redirectMacFor } from '../runtime/redirect-mac.js';

const TOKEN = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
const Z12 = '000000000000000000000000';
const GOLDEN_SIGNED =
  '534c4252' +
  '01' +
  '04' +
  '06' +
  '00' +
  '00001389' +
  '6a000000' +
  `c000020a${Z12}` +
  `c0000264${Z12}` +
  '9c40' +
  '1b58' +
  `c000020c${Z12}` +
  `c6120016${Z12}` +
  '0200c000020c' +
  '0000';
const GOLDEN_MAC = 'c74c185815b7a8a686e0cc918a1da8274a738dc498475ccf410af0f1b13056a1';

function sample(): Redirect {
  const r = newRedirect();
  r.family = 4;
  r.protocol = 6;
  r.vni = 5001;
  r.expiresS = 0x6a000000;
  writeIpAddr(ip('192.0.2.10'), r.src, 0);
  writeIpAddr(ip('192.0.2.100'), r.dst, 0);
  r.srcPort = 40000;
  r.dstPort = 7000;
  writeIpAddr(ip('192.0.2.12'), r.dip, 0);
  writeIpAddr(ip('198.18.0.22'), r.dipHostPa, 0);
  r.dipMac.set(mac('02:00:c0:00:02:0c'));
  return r;
}

describe('redirect codec', () => {
  it('writes the golden bytes and the HMAC openssl computes', () => {
    const buf = new Uint8Array(REDIRECT_LEN);
    expect(writeRedirect(sample(), buf, 0)).toBe(REDIRECT_SIGNED_LEN);
    redirectMacFor(TOKEN)(buf, 0, REDIRECT_SIGNED_LEN, buf, REDIRECT_SIGNED_LEN);
    expect(Buffer.from(buf.subarray(0, REDIRECT_SIGNED_LEN)).toString('hex')).toBe(GOLDEN_SIGNED);
    expect(Buffer.from(buf.subarray(REDIRECT_SIGNED_LEN)).toString('hex')).toBe(GOLDEN_MAC);
  });
  it('reads back what it wrote, at a non-zero offset in a larger buffer', () => {
    const buf = new Uint8Array(300).fill(0xee);
    writeRedirect(sample(), buf, 77);
    const r = newRedirect();
    expect(parseRedirect(buf, 77, r, 77 + REDIRECT_LEN)).toBe(REDIRECT_LEN);
    expect(r).toEqual(sample());
  });
  it('refuses short, wrong magic, version, family and protocol', () => {
    const good = new Uint8Array(REDIRECT_LEN);
    writeRedirect(sample(), good, 0);
    const r = newRedirect();
    expect(parseRedirect(good, 0, r, REDIRECT_LEN - 1)).toBe(ERR_TRUNCATED);
    for (const [off, v] of [
      [0, 0x53 ^ 1],
      [4, 2],
      [5, 5],
      [6, 1],
    ] as const) {
      const b = good.slice();
      b[off] = v;
      expect(parseRedirect(b, 0, r), `byte ${off}`).toBe(ERR_BAD_VERSION);
    }
  });
  it('a changed byte or another key gives another HMAC', () => {
    const buf = new Uint8Array(REDIRECT_LEN);
    writeRedirect(sample(), buf, 0);
    const sign = redirectMacFor(TOKEN);
    sign(buf, 0, REDIRECT_SIGNED_LEN, buf, REDIRECT_SIGNED_LEN);
    const other = new Uint8Array(32);
    redirectMacFor(TOKEN.replace(/^00/, '01'))(buf, 0, REDIRECT_SIGNED_LEN, other, 0);
    expect(redirectMacEqual(buf, REDIRECT_SIGNED_LEN, other, 0)).toBe(false);
    buf[60]! ^= 1;
    sign(buf, 0, REDIRECT_SIGNED_LEN, other, 0);
    expect(redirectMacEqual(buf, REDIRECT_SIGNED_LEN, other, 0)).toBe(false);
    buf[60]! ^= 1;
    sign(buf, 0, REDIRECT_SIGNED_LEN, other, 0);
    expect(redirectMacEqual(buf, REDIRECT_SIGNED_LEN, other, 0)).toBe(true);
  });
});
