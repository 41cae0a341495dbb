import type { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import type { FetchLike } from './cli-client';

// The SDK modules below are imported when a request is signed, never when this module loads: a
// CLI run against the local server (no signing) must not pay for loading them.

const executeApiHost = /^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/;

/** The region of an API Gateway `execute-api` URL (the deployed tasks API), or undefined for any other URL. */
export function executeApiRegion(url: string): string | undefined {
  try {
    return executeApiHost.exec(new URL(url).hostname)?.[1];
  } catch {
    return undefined;
  }
}

/**
 * Credentials for signing: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)
 * from `env` when set and no `profile` (`--profile`) is named, else the SDK's default chain
 * (profiles, SSO, instance roles) for that profile, loaded on first use.
 */
export function credentialsFrom(
  env: Readonly<Record<string, string | undefined>>,
  profile?: string,
): AwsCredentialIdentity | AwsCredentialIdentityProvider {
  if (profile === undefined && env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY) {
    return {
      accessKeyId: env.AWS_ACCESS_KEY_ID,
      secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
      sessionToken: env.AWS_SESSION_TOKEN || undefined,
    };
  }
  let provider: AwsCredentialIdentityProvider | undefined;
  return async (options) => {
    if (!provider) {
      const { defaultProvider } = await import('@aws-sdk/credential-provider-node');
      provider = defaultProvider(profile === undefined ? {} : { profile });
    }
    return provider(options);
  };
}

/**
 * Wraps `fetch` so every request is signed with SigV4 for `execute-api`: the deployed tasks
 * API has IAM authorization on every method. The signer is the SDK's own (@smithy/signature-v4).
 */
export function sigv4Fetch(
  inner: FetchLike,
  region: string,
  credentials: AwsCredentialIdentity | AwsCredentialIdentityProvider,
  signingDate?: () => Date,
): FetchLike {
  // Loaded on the first request: building the signer loads the SDK.
  let signer: Promise<SignatureV4> | undefined;
  const load = async () => {
    const [v4, { Hash }] = await Promise.all([import('@smithy/signature-v4'), import('@smithy/hash-node')]);
    return new v4.SignatureV4({
      service: 'execute-api',
      region,
      credentials,
      sha256: Hash.bind(null, 'sha256'),
    });
  };
  return async (input, init = {}) => {
    signer ??= load();
    const url = new URL(input);
    const headers: Record<string, string> = { host: url.host };
    for (const [name, value] of new Headers(init.headers).entries()) headers[name] = value;
    const body = typeof init.body === 'string' ? init.body : undefined;
    const signed = await (await signer).sign(
      {
        method: init.method ?? 'GET',
        protocol: url.protocol,
        hostname: url.hostname,
        port: url.port ? Number(url.port) : undefined,
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers,
        body,
      },
      signingDate ? { signingDate: signingDate() } : undefined,
    );
    // fetch sets Host itself (to the same value); it may not be passed in.
    const { host: _host, ...sent } = signed.headers;
    return inner(input, { ...init, headers: sent });
  };
}
