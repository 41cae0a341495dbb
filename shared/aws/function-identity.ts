import type { Context } from 'aws-lambda';
import type { BusIdentity } from '../events/bus-event';

/**
 * The account and Region of a running function, from its own ARN
 * (`arn:<partition>:lambda:<region>:<account>:function:<name>`): the bus's, for a stack
 * deploys its functions and its bus side by side, and what EventBridge writes into each event.
 */
export function functionIdentity(context: Pick<Context, 'invokedFunctionArn'>): BusIdentity {
  const [, , , region = '', account = ''] = context.invokedFunctionArn.split(':');
  return { account, region };
}
