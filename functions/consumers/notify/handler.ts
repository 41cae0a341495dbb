import { snsTopic } from '#shared/consumers/adapters/aws/sns-publisher';
import { lambdaConsumer } from '#shared/consumers/lambda-consumer';
import { notify } from './consumer';
import { effect } from './effect';

/** The notify consumer Lambda: tells the assignee (SNS) that their content was approved or rejected. */
export const handler = lambdaConsumer(notify, effect, { topic: snsTopic });
