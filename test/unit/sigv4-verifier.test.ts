import { HttpRequest } from '@smithy/core/protocols';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { createSigV4Verifier, type SignedRequest } from '../../infra/local/sigv4-verifier.mjs';

const credentials = { accessKeyId: 'LKIAABCDEFGHIJKLMNOP', secretAccessKey: 'x'.repeat(40) };
const now = Date.UTC(2026, 11, 5, 12, 0, 0);
const verify = createSigV4Verifier({ credentials, region: 'us-east-1', service: 'events', now: () => now });

/** A PutEvents-like request signed as the AWS SDK signs it, then as the server receives it. */
async function signed(
  options: {
    readonly key?: typeof credentials;
    readonly at?: number;
    readonly region?: string;
    readonly service?: string;
    readonly body?: string;
  } = {},
): Promise<SignedRequest> {
  const body = options.body ?? '{"Entries":[]}';
  const signer = new SignatureV4({
    credentials: options.key ?? credentials,
    region: options.region ?? 'us-east-1',
    service: options.service ?? 'events',
    sha256: Hash.bind(null, 'sha256'),
  });
  const request = await signer.sign(
    new HttpRequest({
      method: 'POST',
      protocol: 'http:',
      hostname: '127.0.0.1',
      port: 4010,
      path: '/',
      headers: {
        host: '127.0.0.1:4010',
        'content-type': 'application/x-amz-json-1.1',
        'x-amz-target': 'AWSEvents.PutEvents',
        'amz-sdk-invocation-id': 'b5d0a6c3-4b1d-4c3e-9a55-0c1b2f3e4d5a',
        'user-agent': 'aws-sdk-js/3',
      },
      body,
    }),
    { signingDate: new Date(options.at ?? now) },
  );
  const headers = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k.toLowerCase(), v]));
  return { method: 'POST', url: '/', headers, body: Buffer.from(body) };
}

describe('the local endpoints verify SigV4 as AWS does', () => {
  it('accepts a request signed with the key pair, whatever unsigned headers it also carries', async () => {
    const request = await signed();
    expect(await verify({ ...request, headers: { ...request.headers, 'x-forwarded-for': 'a' } })).toEqual({
      ok: true,
    });
  });

  it('refuses an unsigned request as missing its token', async () => {
    const { authorization: _, ...headers } = (await signed()).headers;
    expect(await verify({ ...(await signed()), headers })).toMatchObject({ ok: false, reason: 'missing' });
  });

  it('refuses another access key id as unrecognized', async () => {
    const request = await signed({ key: { ...credentials, accessKeyId: 'LKIAZZZZZZZZZZZZZZZZ' } });
    expect(await verify(request)).toMatchObject({
      ok: false,
      reason: 'unrecognized',
      message: 'The security token included in the request is invalid.',
    });
  });

  it('refuses a signature made with another secret key', async () => {
    const request = await signed({ key: { ...credentials, secretAccessKey: 'y'.repeat(40) } });
    expect(await verify(request)).toMatchObject({
      ok: false,
      reason: 'invalid',
      message: expect.stringContaining('does not match the signature you provided'),
    });
  });

  it('refuses a body changed after signing, and a signed header changed', async () => {
    const request = await signed();
    expect(await verify({ ...request, body: Buffer.from('{"Entries":[{}]}') })).toMatchObject({
      reason: 'invalid',
    });
    expect(
      await verify({ ...request, headers: { ...request.headers, 'x-amz-target': 'AWSEvents.PutRule' } }),
    ).toMatchObject({ reason: 'invalid' });
  });

  it('refuses a scope of another Region or service', async () => {
    expect(await verify(await signed({ region: 'eu-west-1' }))).toMatchObject({
      reason: 'invalid',
      message: expect.stringContaining('valid region'),
    });
    expect(await verify(await signed({ service: 'dynamodb' }))).toMatchObject({
      reason: 'invalid',
      message: expect.stringContaining('correct service'),
    });
  });

  it('refuses a request dated more than 15 minutes from now, either way, in words the SDK corrects its clock on', async () => {
    expect(await verify(await signed({ at: now - 15 * 60_000 }))).toEqual({ ok: true });
    expect(await verify(await signed({ at: now - 16 * 60_000 }))).toMatchObject({
      reason: 'expired',
      message: expect.stringMatching(/^Signature expired: 20261205T114400Z is now earlier than/),
    });
    expect(await verify(await signed({ at: now + 16 * 60_000 }))).toMatchObject({
      reason: 'expired',
      message: expect.stringMatching(/^Signature not yet current/),
    });
  });

  it('refuses an Authorization header it cannot read', async () => {
    const request = await signed();
    expect(
      await verify({
        ...request,
        headers: { ...request.headers, authorization: 'AWS4-HMAC-SHA256 Signature=ab' },
      }),
    ).toMatchObject({ reason: 'incomplete' });
    expect(
      await verify({ ...request, headers: { ...request.headers, authorization: 'Bearer abc' } }),
    ).toMatchObject({ reason: 'incomplete' });
  });
});
