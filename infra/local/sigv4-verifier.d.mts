import type { IncomingHttpHeaders } from 'node:http';

/** An access key pair the local runtime made for its data directory (see local-credentials.ts). */
export interface LocalAwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

export interface SigV4VerifierOptions {
  /** The one key pair whose signatures are accepted. */
  readonly credentials: LocalAwsCredentials;
  /** The Region the credential scope must name (`us-east-1` locally). */
  readonly region: string;
  /** The service the credential scope must name (`events`, `dynamodb`). */
  readonly service: string;
  /** Epoch ms the request's date is checked against; the wall clock (`Date.now()`, read at each call) by default, as the SDK signs with. */
  readonly now?: () => number;
}

/** A request as it arrived: its method, its target (path and query), its headers and its whole body. */
export interface SignedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Uint8Array;
}

/**
 * Why a request was refused: `missing` (not signed), `incomplete` (an Authorization header that
 * cannot be read), `unrecognized` (another access key id), `invalid` (a wrong signature, or a
 * scope of another date, Region or service), `expired` (dated more than 15 minutes from now).
 */
export type SigV4Refusal = 'missing' | 'incomplete' | 'unrecognized' | 'invalid' | 'expired';

export type SigV4Verdict =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: SigV4Refusal; readonly message: string };

/** How far a request's `X-Amz-Date` may be from now, either way: 15 minutes, as AWS allows. */
export const maxClockSkewMs: number;

/**
 * A verifier of AWS Signature Version 4 (header-signed, `AWS4-HMAC-SHA256`) requests, as AWS
 * checks them: the access key id must be the one given, the credential scope its date (the day
 * of `X-Amz-Date`), Region and service, `X-Amz-Date` within 15 minutes of now, `host` and
 * `x-amz-date` signed, and the signature the one `@smithy/signature-v4` computes with the secret
 * key over the method, path, query, the headers the request says it signed and the body's
 * SHA-256 (an `x-amz-content-sha256` header must be that hash). Compared in constant time.
 */
export function createSigV4Verifier(
  options: SigV4VerifierOptions,
): (request: SignedRequest) => Promise<SigV4Verdict>;
