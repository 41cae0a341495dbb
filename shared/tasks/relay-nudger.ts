import { LambdaClient } from '@aws-sdk/client-lambda';
import { invokeAsync } from '../aws/invoke-async';
import { sdkClientConfig } from '../aws/sdk-client';

/**
 * Wakes the outbox relay right after a commit, for low latency. Only a hint: the relay's
 * schedule is the safety net, so callers log a failed nudge and never fail a request on it.
 */
export interface RelayNudger {
  nudge(): Promise<void>;
}

/** Thrown when the relay could not be nudged; the SDK error travels as `cause`. */
export class RelayNudgeError extends Error {
  override readonly name = 'RelayNudgeError';
}

/** The payload the relay handler recognizes as a nudge rather than a scheduled run. */
export const nudgePayload = { nudge: true } as const;

/** AWS adapter: an asynchronous (`Event`) invoke of the relay function, so the API never waits on a relay run. */
export class LambdaRelayNudger implements RelayNudger {
  private readonly client: LambdaClient;
  private readonly functionName: string;

  constructor(props: { readonly client: LambdaClient; readonly functionName: string }) {
    this.client = props.client;
    this.functionName = props.functionName;
  }

  async nudge(): Promise<void> {
    try {
      await invokeAsync(this.client, this.functionName, nudgePayload);
    } catch (err) {
      const e = err as Error;
      throw new RelayNudgeError(e.message, { cause: e.cause ?? e });
    }
  }
}

/** For targets without a relay function to wake (RELAY_FUNCTION_NAME unset): the schedule alone drives the relay. */
export const noopRelayNudger: RelayNudger = {
  async nudge() {},
};

/** Picks the nudger for a target: the Lambda adapter when a relay function is named, else the no-op. */
export function createRelayNudger(
  functionName: string | undefined,
  client: () => LambdaClient = () => new LambdaClient(sdkClientConfig()),
): RelayNudger {
  return functionName === undefined
    ? noopRelayNudger
    : new LambdaRelayNudger({ client: client(), functionName });
}
