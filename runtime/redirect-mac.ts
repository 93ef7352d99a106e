// The HMAC of Fastpath redirects (shared/redirect.ts, docs/east-west.md), keyed from the policy key (the
// API token that signs policy): key = HMAC-SHA256(token, "slbx-redirect"), so a redirect's MAC never
// equals a policy signature. Synchronous node:crypto, handed to the data planes as a function.
import { createHmac } from 'node:crypto';
import { REDIRECT_MAC_LEN, type RedirectMac } from '../shared/redirect.js';
import { readToken } from './api-token.js';

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

/**
 * The policy key a daemon signs or checks redirects with: the token of --controller-token-file (the one
 * that signs policy), null without that option (no redirects: every east-west flow stays on the MUX path).
 */
export function readPolicyKey(path: string | undefined): string | null | { error: string } {
  if (path === undefined) return null;
  return readToken(path);
}
