import { functionDatabase } from '#shared/consumers/adapters/aws/database';
import { s3Bucket } from '#shared/consumers/adapters/aws/s3-write-once-store';
import { lambdaConsumer } from '#shared/consumers/lambda-consumer';
import { archive } from './consumer';
import { effect } from './effect';

/** The archive consumer Lambda: stores a write-once S3 snapshot of each approved task version. */
export const handler = lambdaConsumer(archive, effect, { bucket: s3Bucket, database: functionDatabase });
