// @ts-check
// Plain JavaScript: imported by dynalite-worker.mjs, which a worker thread loads with Node's own
// loader, and by the local bus's PutEvents endpoint (TypeScript, through sigv4-verifier.d.mts).
import { createHash, timingSafeEqual } from 'node:crypto';
import { HttpRequest } from '@smithy/core/protocols';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';

/**
 * How far a request's `X-Amz-Date` may be from the verifier's clock, either way: AWS refuses a
 * request "more than 15 minutes after the date stamp on the request", or one dated more than 15
 * minutes ahead (RequestExpired, https://docs.aws.amazon.com/eventbridge/latest/APIReference/CommonErrors.html).
 */
export const maxClockSkewMs = 15 * 60_000;

const algorithm = 'AWS4-HMAC-SHA256';
const emptyBodyHash = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** `20240102T030405Z` to epoch ms, or NaN. */
function amzDateMs(/** @type {string} */ value) {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  if (!m) return Number.NaN;
  return Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
}

/** Epoch ms as an `X-Amz-Date` (`20240102T030405Z`). */
const amzDate = (/** @type {number} */ ms) => `${new Date(ms).toISOString().replace(/[-:]|\.\d{3}/g, '')}`;

/** A header's one value as node:http gives it (a repeated header is joined, as it is signed). */
function headerValue(
  /** @type {import('node:http').IncomingHttpHeaders} */ headers,
  /** @type {string} */ name,
) {
  const v = headers[name];
  return Array.isArray(v) ? v.join(',') : v;
}

/**
 * The `Authorization` header's parts (`AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
 * Signature=…`), or the first thing missing from it.
 * @param {string} header
 */
function parseAuthorization(header) {
  const space = header.indexOf(' ');
  const scheme = space < 0 ? header : header.slice(0, space);
  if (scheme !== algorithm) {
    return { problem: `Unsupported signing algorithm '${scheme}': only ${algorithm} is accepted.` };
  }
  /** @type {Record<string, string>} */
  const params = {};
  for (const part of header.slice(space + 1).split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) params[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  const missing = ['Credential', 'SignedHeaders', 'Signature'].filter((p) => !params[p]);
  if (missing.length > 0) {
    return { problem: missing.map((p) => `Authorization header requires '${p}' parameter.`).join(' ') };
  }
  const [accessKeyId, date, region, service, terminator, ...rest] = (params.Credential ?? '').split('/');
  if (!accessKeyId || !date || !region || !service || terminator !== 'aws4_request' || rest.length > 0) {
    return {
      problem: `Credential should be of the form <access key id>/<date>/<region>/<service>/aws4_request, not '${params.Credential}'.`,
    };
  }
  return {
    credential: { accessKeyId, date, region, service },
    signedHeaders: (params.SignedHeaders ?? '').split(';'),
    signature: params.Signature ?? '',
  };
}

/**
 * @typedef {import('./sigv4-verifier.d.mts').SigV4VerifierOptions} SigV4VerifierOptions
 * @typedef {import('./sigv4-verifier.d.mts').SignedRequest} SignedRequest
 * @typedef {import('./sigv4-verifier.d.mts').SigV4Verdict} SigV4Verdict
 */

/**
 * A verifier of AWS Signature Version 4 requests signed with one set of credentials, for the
 * local runtime's AWS-like endpoints: see sigv4-verifier.d.mts.
 * @param {SigV4VerifierOptions} options
 * @returns {(request: SignedRequest) => Promise<SigV4Verdict>}
 */
export function createSigV4Verifier(options) {
  const { credentials, region, service } = options;
  const now = options.now ?? (() => Date.now());
  const signer = new SignatureV4({
    credentials: { accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretAccessKey },
    region,
    service,
    sha256: Hash.bind(null, 'sha256'),
    uriEscapePath: true,
    applyChecksum: false,
  });
  const expected = Buffer.from(credentials.accessKeyId);

  return async (request) => {
    const { headers } = request;
    const authorization = headerValue(headers, 'authorization');
    if (authorization === undefined || authorization.trim() === '') {
      return { ok: false, reason: 'missing', message: 'the request is not signed (no Authorization header)' };
    }
    const parsed = parseAuthorization(authorization.trim());
    if ('problem' in parsed) return { ok: false, reason: 'incomplete', message: parsed.problem ?? '' };
    const { credential, signedHeaders, signature } = parsed;
    const given = Buffer.from(credential.accessKeyId);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return {
        ok: false,
        reason: 'unrecognized',
        message: 'The security token included in the request is invalid.',
      };
    }
    const stamp = headerValue(headers, 'x-amz-date') ?? '';
    const signedAt = amzDateMs(stamp);
    if (Number.isNaN(signedAt)) {
      return {
        ok: false,
        reason: 'incomplete',
        message: `Authorization header requires existence of an 'X-Amz-Date' header in ISO 8601 basic format, got '${stamp}'.`,
      };
    }
    for (const required of ['host', 'x-amz-date']) {
      if (!signedHeaders.includes(required)) {
        return {
          ok: false,
          reason: 'invalid',
          message: `'${required}' must be a signed header; SignedHeaders was '${signedHeaders.join(';')}'.`,
        };
      }
    }
    if (credential.date !== stamp.slice(0, 8)) {
      return {
        ok: false,
        reason: 'invalid',
        message: `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${credential.date}' != '${stamp.slice(0, 8)}', from '${stamp}'.`,
      };
    }
    if (credential.region !== region) {
      return {
        ok: false,
        reason: 'invalid',
        message: `Credential should be scoped to a valid region: '${region}', not '${credential.region}'.`,
      };
    }
    if (credential.service !== service) {
      return {
        ok: false,
        reason: 'invalid',
        message: `Credential should be scoped to correct service: '${service}', not '${credential.service}'.`,
      };
    }
    const at = now();
    if (signedAt < at - maxClockSkewMs) {
      return {
        ok: false,
        reason: 'expired',
        message: `Signature expired: ${stamp} is now earlier than ${amzDate(at - maxClockSkewMs)} (${amzDate(at)} - 15 min.)`,
      };
    }
    if (signedAt > at + maxClockSkewMs) {
      return {
        ok: false,
        reason: 'expired',
        message: `Signature not yet current: ${stamp} is still later than ${amzDate(at + maxClockSkewMs)} (${amzDate(at)} + 15 min.)`,
      };
    }
    const bodyHash =
      request.body.length === 0 ? emptyBodyHash : createHash('sha256').update(request.body).digest('hex');
    const declaredHash = headerValue(headers, 'x-amz-content-sha256');
    if (declaredHash !== undefined && declaredHash !== bodyHash) {
      return {
        ok: false,
        reason: 'invalid',
        message: 'The provided x-amz-content-sha256 header does not match what was computed.',
      };
    }
    // Recomputed over what the client said it signed: method, path, query, those headers, and
    // the body's hash, as the client's signer computed it.
    const url = new URL(request.url, 'http://localhost');
    /** @type {Record<string, string | string[]>} */
    const query = {};
    for (const [k, v] of url.searchParams) {
      const had = query[k];
      query[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
    }
    /** @type {Record<string, string>} */
    const signed = {};
    for (const name of signedHeaders) {
      const value = headerValue(headers, name);
      if (value === undefined) {
        return {
          ok: false,
          reason: 'invalid',
          message: `the signed header '${name}' is not in the request.`,
        };
      }
      signed[name] = value;
    }
    const recomputed = await signer.sign(
      new HttpRequest({
        method: request.method,
        protocol: 'http:',
        hostname: 'localhost',
        path: url.pathname,
        query,
        headers: signed,
        body: request.body,
      }),
      { signingDate: new Date(signedAt), signableHeaders: new Set(signedHeaders) },
    );
    const ours = /Signature=([0-9a-f]+)$/.exec(String(recomputed.headers.authorization ?? ''))?.[1] ?? '';
    const theirs = Buffer.from(signature);
    if (ours.length !== theirs.length || !timingSafeEqual(Buffer.from(ours), theirs)) {
      return {
        ok: false,
        reason: 'invalid',
        message:
          'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
      };
    }
    return { ok: true };
  };
}
