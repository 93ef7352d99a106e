// The HMAC of Fastpath redirects (shared/redirect.ts, docs/east-west.md), keyed from the policy key (the
// API token that signs policy): key = HMAC-SHA256(token, "slbx-redirect"), so a redirect's MAC never
// equals a policy signature. Synchronous node:crypto, handed to the data planes as a function.
import { createHmac } from 'node:crypto';
import { REDIRECT_MAC_LEN, type RedirectMac } from '../shared/redirect.js';

export const REDIRECT_KEY_LABEL = 'slbx-redirect';

export function redirectKey(token: string): Buffer {
  return createHmac('sha256', token).update(REDIRECT_KEY_LABEL).digest();
}

export function redirectMacFor(token: string): RedirectMac {
  const key = redirectKey(token);
  return (data, off, len, out, outOff) => {
    const d = createHmac('sha256', key)
      .update(data.subarray(off, off + len))
      .digest();
    for (let i = 0; i < REDIRECT_MAC_LEN; i++) out[outOff + i] = d[i]!;
  };
}
