// PKCE (RFC 7636) for the native-app login: a code verifier and its S256 challenge.
// It needs Web Crypto (crypto.getRandomValues, crypto.subtle): browsers and Node.js 20 have it;
// React Native needs a polyfill (react-native-quick-crypto, expo-crypto) or its own helper.

interface WebCrypto {
  getRandomValues<T extends ArrayBufferView>(array: T): T;
  subtle: { digest(algorithm: string, data: BufferSource): Promise<ArrayBuffer> };
}

function webCrypto(): WebCrypto {
  const c = (globalThis as { crypto?: Partial<WebCrypto> }).crypto;
  if (!c?.getRandomValues || !c.subtle?.digest) {
    throw new Error("Web Crypto (crypto.getRandomValues and crypto.subtle) is not available: polyfill it, or make the PKCE pair yourself");
  }
  return c as WebCrypto;
}

function base64url(bytes: Uint8Array): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += alphabet[(n >> 18) & 63]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + alphabet[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += alphabet[(n >> 18) & 63]! + alphabet[(n >> 12) & 63]!;
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += alphabet[(n >> 18) & 63]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]!;
  }
  return out;
}

/** The S256 code challenge of a verifier: base64url(SHA-256(verifier)), without padding. */
export async function pkceChallenge(verifier: string): Promise<string> {
  if (!/^[A-Za-z0-9\-._~]{43,128}$/.test(verifier)) {
    throw new TypeError("a PKCE code verifier is 43 to 128 characters of [A-Za-z0-9-._~]");
  }
  const digest = await webCrypto().subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

/** A fresh PKCE pair for mobileLoginUrl (challenge) and mobileToken (verifier): 32 random bytes. */
export async function createPkce(): Promise<{ verifier: string; challenge: string }> {
  const verifier = base64url(webCrypto().getRandomValues(new Uint8Array(32)));
  return { verifier, challenge: await pkceChallenge(verifier) };
}
