import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** Whether a call's response is lost, by the SDK's command name (`UpdateItemCommand`, ...) and input. */
export type ResponseLossDecider = (commandName: string, input: Readonly<Record<string, unknown>>) => boolean;

/** One call whose write landed and whose response the client never saw. */
export interface LostResponse {
  readonly commandName: string;
  readonly input: Readonly<Record<string, unknown>>;
}

/**
 * Makes `client` lose the responses of the calls `decide` picks, after they landed: the request
 * reaches DynamoDB and is applied, then the client throws a `TimeoutError` as if the socket had
 * timed out on the way back. The middleware sits in the `deserialize` step, inside the SDK's
 * retry loop (`finalizeRequest`), so the SDK treats the error as transient and sends the same
 * request again, which is what a real lost response does (AWS SDK retry behavior:
 * https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html). Returns the
 * calls it struck, so a test can prove the fault happened.
 */
export function loseResponsesAfterLanding(
  client: DynamoDBClient,
  decide: ResponseLossDecider,
  /** Where the struck calls are recorded; several clients may share one list. */
  lost: LostResponse[] = [],
): { readonly lost: readonly LostResponse[] } {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      const input = args.input as Readonly<Record<string, unknown>>;
      const commandName = String(context.commandName ?? '');
      if (!decide(commandName, input)) return result;
      lost.push({ commandName, input });
      throw Object.assign(new Error(`injected: the ${commandName} response was lost after it landed`), {
        name: 'TimeoutError',
        $metadata: {},
      });
    },
    { step: 'deserialize', name: 'guaranteesLoseResponseAfterLanding' },
  );
  return { lost };
}
