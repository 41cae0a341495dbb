import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../infra/ops-tools/cli/cli';
import type { FetchLike } from '../../infra/ops-tools/cli/cli-client';
import { executeApiRegion, sigv4Fetch } from '../../infra/ops-tools/cli/cli-sigv4';

const taskId = '3f1c2b7e-8d4a-4c1e-9b0a-5e6f7a8b9c0d';
const apiUrl = 'https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/sandbox/';
const keys = {
  AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
  AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
};

interface Seen {
  readonly url: string;
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body: string | undefined;
}

function recordingFetch(reply: unknown) {
  const seen: Seen[] = [];
  const fetch: FetchLike = async (url, init) => {
    seen.push({
      url,
      method: init?.method ?? 'GET',
      headers: Object.fromEntries(new Headers(init?.headers).entries()),
      body: typeof init?.body === 'string' ? init.body : undefined,
    });
    return new Response(JSON.stringify(reply), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  };
  return { fetch, seen };
}

async function cli(argv: string[], fetch: FetchLike, env: Record<string, string>) {
  let stderr = '';
  const code = await runCli(argv, {
    fetch,
    env,
    stdout: { write: () => true },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stderr };
}

/** SigV4 computed by hand from the spec, to check the signer against something independent of it. */
function expectedSignature(req: Seen, date: string, secret: string, region: string): string {
  const url = new URL(req.url);
  const signed = Object.keys(req.headers)
    .map((h) => h.toLowerCase())
    .concat('host')
    .filter((h) => h !== 'authorization')
    .sort();
  const value = (h: string) => (h === 'host' ? url.host : (req.headers[h] ?? '').trim());
  const canonical = [
    req.method,
    url.pathname,
    '',
    ...signed.map((h) => `${h}:${value(h)}`),
    '',
    signed.join(';'),
    createHash('sha256')
      .update(req.body ?? '')
      .digest('hex'),
  ].join('\n');
  const day = date.slice(0, 8);
  const scope = `${day}/${region}/execute-api/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', date, scope, createHash('sha256').update(canonical).digest('hex')].join(
    '\n',
  );
  let key: Buffer = createHmac('sha256', `AWS4${secret}`).update(day).digest();
  for (const part of [region, 'execute-api', 'aws4_request'])
    key = createHmac('sha256', key).update(part).digest();
  return createHmac('sha256', key).update(toSign).digest('hex');
}

describe('the ops CLI against a deployed tasks API', () => {
  it('recognizes execute-api URLs and their region, and nothing else', () => {
    expect(executeApiRegion(apiUrl)).toBe('eu-west-1');
    expect(executeApiRegion('http://127.0.0.1:3000')).toBeUndefined();
    expect(executeApiRegion('https://example.com/execute-api.eu-west-1.amazonaws.com')).toBeUndefined();
  });

  it('signs tasks requests with SigV4 for execute-api in the URL’s region, under the stage path', async () => {
    const { fetch, seen } = recordingFetch({ taskId, status: 'approved', version: 2, eventId: taskId });

    const { code } = await cli(['--url', apiUrl, 'tasks', 'approve', taskId], fetch, {
      ...keys,
      AWS_SESSION_TOKEN: 'session-token',
    });

    expect(code).toBe(0);
    const [request] = seen;
    expect(request?.url).toBe(
      `https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/sandbox/tasks/${taskId}/approve`,
    );
    expect(request?.headers['x-amz-security-token']).toBe('session-token');
    const auth = request?.headers.authorization ?? '';
    const date = request?.headers['x-amz-date'] ?? '';
    expect(auth).toMatch(
      new RegExp(
        `^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/${date.slice(0, 8)}/eu-west-1/execute-api/aws4_request, `,
      ),
    );
    expect(auth).toMatch(/SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$/);
  });

  it('computes the signature the SigV4 spec gives for the request', async () => {
    const { fetch, seen } = recordingFetch({ taskId, status: 'pending_review', version: 1 });
    const signed = sigv4Fetch(
      fetch,
      'eu-west-1',
      { accessKeyId: keys.AWS_ACCESS_KEY_ID, secretAccessKey: keys.AWS_SECRET_ACCESS_KEY },
      () => new Date('2026-11-30T10:00:00Z'),
    );

    await signed(`${apiUrl}tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"title":"Spring launch post"}',
    });

    const request = seen[0] as Seen;
    const signature = /Signature=([0-9a-f]{64})$/.exec(request.headers.authorization ?? '')?.[1];
    const withoutAuth = Object.fromEntries(
      Object.entries(request.headers).filter(([h]) => h !== 'authorization'),
    );
    expect(signature).toBe(
      expectedSignature(
        { ...request, headers: withoutAuth },
        '20261130T100000Z',
        keys.AWS_SECRET_ACCESS_KEY,
        'eu-west-1',
      ),
    );
  });

  it('leaves requests to a local pipeline unsigned', async () => {
    const { fetch, seen } = recordingFetch({ taskId, status: 'approved', version: 2, eventId: taskId });

    await cli(['--url', 'http://127.0.0.1:3000', 'tasks', 'approve', taskId], fetch, keys);

    expect(seen[0]?.headers.authorization).toBeUndefined();
  });
});
