import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  createRelayNudger,
  LambdaRelayNudger,
  noopRelayNudger,
  RelayNudgeError,
} from '../../shared/tasks/relay-nudger';

describe('Lambda relay nudger invokes the relay asynchronously and reports failures as RelayNudgeError', () => {
  const lambda = mockClient(LambdaClient);
  const nudger = () =>
    new LambdaRelayNudger({
      client: new LambdaClient({ region: 'eu-west-1' }),
      functionName: 'content-relay',
    });

  beforeEach(() => {
    lambda.reset();
  });

  it('sends an Event invoke of the named function with payload {"nudge":true}', async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });

    await nudger().nudge();

    const calls = lambda.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(1);
    const input = calls[0]?.args[0].input;
    expect(input?.FunctionName).toBe('content-relay');
    expect(input?.InvocationType).toBe('Event');
    expect(new TextDecoder().decode(input?.Payload as Uint8Array)).toBe('{"nudge":true}');
  });

  it('wraps an SDK error in RelayNudgeError with the SDK error as cause', async () => {
    const sdkError = Object.assign(new Error('Rate exceeded'), { name: 'TooManyRequestsException' });
    lambda.on(InvokeCommand).rejects(sdkError);

    const attempt = nudger().nudge();

    await expect(attempt).rejects.toBeInstanceOf(RelayNudgeError);
    await expect(attempt).rejects.toMatchObject({ cause: sdkError });
  });

  it('rejects an answer other than 202, since then nothing was queued', async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 200 });

    await expect(nudger().nudge()).rejects.toThrow(/status 200/);
  });
});

describe('createRelayNudger picks the adapter from RELAY_FUNCTION_NAME', () => {
  const lambda = mockClient(LambdaClient);

  beforeEach(() => {
    lambda.reset();
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
  });

  it('returns the no-op nudger, which calls nothing, when no function is named', async () => {
    const nudger = createRelayNudger(undefined);

    await nudger.nudge();

    expect(nudger).toBe(noopRelayNudger);
    expect(lambda.commandCalls(InvokeCommand)).toHaveLength(0);
  });

  it('returns a Lambda nudger for a named function', async () => {
    const nudger = createRelayNudger('content-relay', () => new LambdaClient({ region: 'eu-west-1' }));

    await nudger.nudge();

    expect(nudger).toBeInstanceOf(LambdaRelayNudger);
    expect(lambda.commandCalls(InvokeCommand)[0]?.args[0].input.FunctionName).toBe('content-relay');
  });
});
