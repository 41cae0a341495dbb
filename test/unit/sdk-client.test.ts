import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import type { Context } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/aws/constructs/pipeline-function';
import {
  InvocationDeadlineError,
  sdkCallLimits,
  sdkClientConfig,
  withInvocationDeadline,
} from '../../shared/aws/sdk-client';
import { failureKind } from '../../shared/inbox/failure-kind';
import { type HungServer, startHungServer } from '../support/hung-server';

/** A context whose remaining time runs out at `deadline` (epoch ms), as Lambda's does. */
const contextUntil = (deadline: number) =>
  ({ getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()) }) as Pick<
    Context,
    'getRemainingTimeInMillis'
  >;

const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
const publish = new PublishCommand({ TopicArn: 'arn:aws:sns:us-east-1:123456789012:t', Message: 'm' });

describe('SDK clients made with sdkClientConfig (shared/aws/sdk-client.ts)', () => {
  let hung: HungServer;
  beforeEach(async () => {
    hung = await startHungServer();
  });
  afterEach(async () => {
    await hung.close();
  });

  it("a call to a downstream that never answers ends before the invocation's deadline, as a transient failure", async () => {
    const sns = new SNSClient({
      ...sdkClientConfig(),
      endpoint: hung.endpoint,
      region: 'us-east-1',
      credentials,
    });
    // Less time left than one attempt's request timeout: only the deadline can end the call.
    const left = sdkCallLimits.request.reserveMs + 1_000;
    expect(left).toBeLessThan(sdkCallLimits.request.requestTimeoutMs);
    const deadline = Date.now() + left;

    const outcome = await withInvocationDeadline(async () =>
      sns.send(publish).then(
        () => 'answered',
        (err: unknown) => err,
      ),
    )(undefined, contextUntil(deadline));
    const endedAt = Date.now();
    sns.destroy();

    expect(outcome).toBeInstanceOf(InvocationDeadlineError);
    expect(endedAt).toBeLessThan(deadline);
    // The SDK does not try again once the invocation's time is spent; the inbox would, later.
    expect(hung.requests()).toBe(1);
    expect(failureKind(outcome)).toBe('transient');
  });

  it('a call that would start with no budget left fails at once, without reaching the service', async () => {
    const sns = new SNSClient({
      ...sdkClientConfig(),
      endpoint: hung.endpoint,
      region: 'us-east-1',
      credentials,
    });
    const deadline = Date.now() + sdkCallLimits.request.reserveMs - 1;

    const outcome = await withInvocationDeadline(async () => sns.send(publish).catch((err: unknown) => err))(
      undefined,
      contextUntil(deadline),
    );
    sns.destroy();

    expect(outcome).toBeInstanceOf(InvocationDeadlineError);
    expect(hung.requests()).toBe(0);
  });

  it('outside an invocation a hung attempt ends by its request timeout, and the SDK tries at most maxAttempts times', async () => {
    const config = sdkClientConfig('item');
    const handler = config.requestHandler;
    // A short request timeout for this test only: the limits' own figure is seconds.
    handler.updateHttpClientConfig('requestTimeout', 200);
    const sns = new SNSClient({ ...config, endpoint: hung.endpoint, region: 'us-east-1', credentials });

    const outcome = await sns.send(publish).catch((err: unknown) => err);
    sns.destroy();

    expect(outcome).toMatchObject({ name: 'TimeoutError' });
    expect(hung.requests()).toBe(sdkCallLimits.item.maxAttempts);
    expect(failureKind(outcome)).toBe('transient');
    expect(handler.httpHandlerConfigs()).toMatchObject({
      connectionTimeout: sdkCallLimits.item.connectionTimeoutMs,
      throwOnRequestTimeout: true,
    });
  });
});

/** Every TypeScript file under `dir` (repository-relative), recursively. */
function sources(dir: string): string[] {
  return readdirSync(join(projectRoot, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(projectRoot, path)).isDirectory()) return sources(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

describe('every SDK client a function builds is bounded', () => {
  it('no handler or shared module builds an AWS SDK client without sdkClientConfig', () => {
    const unbounded = [...sources('functions'), ...sources('shared')].flatMap((path) => {
      const text = readFileSync(join(projectRoot, path), 'utf8');
      // Our SqlClient adapters are not SDK clients (the Data API's RDSDataClient inside one is).
      return [...text.matchAll(/new ((?!PgSql|DataApiSql)\w+Client)\(([^)]*)\)/g)]
        .filter(([, , args]) => !args?.includes('sdkClientConfig('))
        .map(([call]) => `${relative(projectRoot, join(projectRoot, path))}: ${call}`);
    });

    expect(unbounded).toEqual([]);
  });

  it("every function's exported handler runs inside withInvocationDeadline", () => {
    const unwrapped = sources('functions')
      .filter((path) => path.endsWith('handler.ts'))
      .filter((path) => {
        const text = readFileSync(join(projectRoot, path), 'utf8');
        return !/export const handler = (withInvocationDeadline\(|lambdaConsumer\()/.test(text);
      });

    expect(unwrapped).toEqual([]);
  });
});
