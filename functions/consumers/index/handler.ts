import { lambdaConsumer } from '#shared/consumers/lambda-consumer';
import { index } from './consumer';
import { effect } from './effect';

/** The index consumer Lambda: keeps the content-index table at each task's latest version. */
export const handler = lambdaConsumer(index, effect, {});
